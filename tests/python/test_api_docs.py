"""The public API is complete, documented, and described by its type stub.

* every name in `deepseek_recipe.__all__` imports, and every public name of the native module is
  exported;
* every public class, method, static method, property and function has a non-empty `__doc__`
  (the Rust `///` comments of the bindings);
* the docstrings of `_native.pyi` say the same as the run-time `__doc__` (whitespace aside), so
  the stub and the bindings cannot drift apart. The signatures are checked by
  `mypy.stubtest` in `.ci/run`.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import deepseek_recipe as dr
import pytest
from deepseek_recipe import _native

STUB = Path(_native.__file__).with_name("_native.pyi")


def _public(name: str) -> bool:
    return not name.startswith("_")


def _members(cls: type) -> list[str]:
    """Public attributes the class itself defines (methods, properties), not enum members."""
    out = []
    for name, value in vars(cls).items():
        if not _public(name) or isinstance(value, cls):
            continue
        out.append(name)
    return sorted(out)


def _flat(doc: str | None) -> str:
    return " ".join((doc or "").split())


def test_all_names_import():
    missing = [name for name in dr.__all__ if not hasattr(dr, name)]
    assert not missing, f"in __all__ but not importable: {missing}"
    assert len(set(dr.__all__)) == len(dr.__all__), "duplicate names in __all__"


def test_every_native_name_is_exported():
    native = {name for name in vars(_native) if _public(name)} | {"__version__"}
    unexported = sorted(native - set(dr.__all__))
    assert not unexported, f"defined by _native but not exported by deepseek_recipe: {unexported}"


EXPORTED = [getattr(dr, name) for name in dr.__all__]
CLASSES = [obj for obj in EXPORTED if isinstance(obj, type)]
FUNCTIONS = [obj for obj in EXPORTED if callable(obj) and not isinstance(obj, type)]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_class_and_members_have_docs(cls):
    assert _flat(cls.__doc__), f"{cls.__name__} has no docstring"
    undocumented = [name for name in _members(cls) if not _flat(getattr(cls, name).__doc__)]
    assert not undocumented, f"{cls.__name__}: members without a docstring: {undocumented}"


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_function_has_doc(fn):
    assert _flat(fn.__doc__), f"{fn.__name__} has no docstring"


def _stub_docs() -> dict[str, str | None]:
    """`Class`, `Class.member` and `function` -> docstring in the stub (first overload's)."""
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    docs: dict[str, str | None] = {}

    def visit_function(prefix: str, node: ast.FunctionDef) -> None:
        if node.name.startswith("_"):
            return
        decorators = {ast.unparse(d) for d in node.decorator_list}
        if any(d.endswith(".setter") for d in decorators):
            return
        key = prefix + node.name
        docs[key] = docs.get(key) or ast.get_docstring(node)

    for node in tree.body:
        if isinstance(node, ast.ClassDef) and _public(node.name):
            docs[node.name] = ast.get_docstring(node)
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    visit_function(node.name + ".", item)
        elif isinstance(node, ast.FunctionDef):
            visit_function("", node)
    return docs


STUB_DOCS = _stub_docs()


def _runtime(key: str):
    obj = _native
    for part in key.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("key", sorted(STUB_DOCS))
def test_stub_docstring_matches_runtime(key):
    stub_doc = STUB_DOCS[key]
    assert stub_doc, f"{key}: no docstring in _native.pyi"
    runtime_doc = inspect.cleandoc(_runtime(key).__doc__ or "")
    assert _flat(stub_doc) == _flat(runtime_doc), (
        f"{key}: the stub's docstring differs from the binding's doc comment\n"
        f"  stub:    {_flat(stub_doc)}\n  runtime: {_flat(runtime_doc)}"
    )


def test_stub_documents_every_runtime_member():
    expected = set()
    for cls in CLASSES:
        if cls.__module__ != _native.__name__:
            continue
        expected.add(cls.__name__)
        expected.update(f"{cls.__name__}.{name}" for name in _members(cls))
    expected.update(fn.__name__ for fn in FUNCTIONS)
    missing = sorted(expected - set(STUB_DOCS))
    assert not missing, f"public names without a documented entry in _native.pyi: {missing}"
