"""Robustness of request conversion: arbitrary and mutated bodies never crash or hang.

Every body either converts, or fails with `ValueError` (shape) or `ConversionError`
(semantics). Deep nesting and very large bodies are rejected or converted quickly, with
bounded memory.
"""

from __future__ import annotations

import json
import random
import resource

import deepseek_recipe as d
from conversion_random import mutate, random_cases
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CLASSES = [d.ChatCompletionRequest, d.ResponsesRequest, d.MessagesRequest]
OPTIONS = d.ConversionOptions()

json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=5)),
    max_leaves=30,
)
KEYS = ["model", "messages", "input", "instructions", "tools", "tool_choice", "role", "content", "type",
        "text", "function", "name", "parameters", "thinking", "reasoning", "temperature", "top_p",
        "max_tokens", "max_output_tokens", "stop", "response_format", "tool_calls", "system"]
body_like = st.recursive(
    json_leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=6)),
    max_leaves=40,
)


def _convert(cls, body):
    """Construct and convert; only the two documented exception types may escape."""
    try:
        req = cls(body)
    except ValueError:
        return "value_error"
    try:
        req.convert(OPTIONS)
    except d.ConversionError as e:
        assert e.status_code == 400
        err = json.loads(e.body)["error"]
        assert err["type"] == "invalid_request_error" and err["message"] == str(e)
        return "conversion_error"
    # Consumed after conversion.
    try:
        req.convert(OPTIONS)
    except RuntimeError as e:
        assert str(e) == "protocol request has been consumed"
    else:
        raise AssertionError("a converted request must be consumed")
    return "ok"


@settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.one_of(json_value, body_like), which=st.integers(0, 2), as_text=st.booleans())
def test_arbitrary_json_bodies(body, which, as_text):
    _convert(CLASSES[which], json.dumps(body) if as_text else body)


@settings(max_examples=200, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_mutated_request_bodies(seed):
    r = random.Random(seed)
    case = random_cases(seed, 3)[seed % 3]
    body = case["body"]
    for _ in range(r.randint(1, 3)):
        body = mutate(r, body)
    cls = {"chat": d.ChatCompletionRequest, "responses": d.ResponsesRequest, "messages": d.MessagesRequest}[case["format"]]
    _convert(cls, body)


@settings(max_examples=50, deadline=2000)
@given(data=st.binary(max_size=200))
def test_arbitrary_bytes(data):
    for cls in CLASSES:
        try:
            cls(data)
        except ValueError:
            pass


def test_failed_conversion_consumes_the_request():
    req = d.ChatCompletionRequest({"model": "unknown", "messages": [{"role": "user", "content": "x"}]})
    assert req.model == "unknown"
    try:
        req.convert(OPTIONS)
    except d.ConversionError:
        pass
    for attempt in (lambda: req.model, lambda: req.convert(OPTIONS)):
        try:
            attempt()
        except RuntimeError as e:
            assert str(e) == "protocol request has been consumed"
        else:
            raise AssertionError("expected RuntimeError")


def test_deep_nesting_is_rejected():
    deep_text = '{"model": "x", "messages": ' + "[" * 100_000 + "]" * 100_000 + "}"
    for cls in CLASSES:
        try:
            cls(deep_text)
        except ValueError as e:
            assert "recursion limit exceeded" in str(e)
        else:
            raise AssertionError("deep JSON text must be rejected")
    deep = []
    for _ in range(10_000):
        deep = [deep]
    for cls in CLASSES:
        try:
            cls({"model": "x", "messages": [], "extra": deep})
        except RecursionError as e:
            assert "maximum nesting depth" in str(e)
        else:
            raise AssertionError("a deep dict must be rejected")


def test_python_values_that_are_not_json():
    base = {"model": "DeepSeek-V4-Pro", "messages": [{"role": "user", "content": "x"}]}
    for value, exc in [(float("nan"), ValueError), ({1, 2}, TypeError), (2**70, OverflowError), (b"x", TypeError)]:
        try:
            d.ChatCompletionRequest(dict(base, extra=value))
        except exc:
            pass
        else:
            raise AssertionError(f"{value!r} must raise {exc.__name__}")
    try:
        d.ChatCompletionRequest({**base, 5: 1})
    except TypeError:
        pass
    else:
        raise AssertionError("non-string keys must be rejected")



def test_dict_bodies_fail_as_their_json_text_does():
    """A dict body is typed straight into the request (no JSON value of the whole body), yet
    every error equals the one its JSON text gives, and a Python error (a value that is not JSON)
    is raised before any shape error, wherever it sits."""
    user = {"role": "user", "content": "x"}
    bodies = [
        (d.ChatCompletionRequest, {"model": 5, "messages": [user]}),
        (d.ChatCompletionRequest, {"model": "m", "messages": [user, {"role": "robot"}]}),
        (d.ChatCompletionRequest, {"messages": [user], "model": "m", "temperature": "hot"}),
        (d.ChatCompletionRequest, {"model": "m", "messages": {"role": "user"}}),
        (d.ResponsesRequest, {"model": "m", "input": [user, {"type": "message"}]}),
        (d.ResponsesRequest, {"model": "m", "input": 3}),
        (d.MessagesRequest, {"model": "m", "max_tokens": 1, "messages": [user, {"role": "user"}]}),
        (d.MessagesRequest, {"model": "m", "max_tokens": 1, "messages": [[1, 2]]}),
        (d.MessagesRequest, [1, 2]),
    ]
    for cls, body in bodies:
        try:
            cls(json.dumps(body))
        except ValueError as e:
            want = str(e)
        else:
            raise AssertionError(f"{body!r} must be rejected")
        try:
            cls(body)
        except ValueError as e:
            assert str(e) == want, (body, str(e), want)
        else:
            raise AssertionError(f"{body!r} must be rejected as a dict too")
        if isinstance(body, dict):
            # The same body with a non-JSON value after the faulty member: the Python error wins.
            try:
                cls({**body, "zzz": float("nan")})
            except ValueError as e:
                assert str(e) == "NaN is not a finite JSON number", str(e)
    # Tuples are JSON arrays, in a kept member as anywhere else.
    req = d.ChatCompletionRequest({"model": "DeepSeek-V4-Pro", "messages": (user,), "stop": ("a",)})
    assert req.convert(d.ConversionOptions()).conversation.messages[0].content == "x"


def _rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_50_mb_body_is_converted_with_bounded_memory():
    big = "a" * (50 * 1024 * 1024)
    body = json.dumps({"model": "DeepSeek-V4.1-Flash", "messages": [{"role": "user", "content": big}]}).encode()
    del big
    before = _rss_mb()
    req = d.ChatCompletionRequest(body)
    conv = req.convert(OPTIONS)
    assert len(conv.conversation.messages[0].content) == 50 * 1024 * 1024
    growth = _rss_mb() - before
    # The body (50 MB) is held as bytes, a parsed copy and the converted message: a few copies
    # at most, never an unbounded blow-up.
    assert growth < 400, f"peak RSS grew by {growth:.0f} MB"


# Recorded from the official package (`conversion_random.py 300 801 broken`: bodies sent as bytes
# with an invalid UTF-8 sequence in a string): the column is that of the string's closing quote,
# as serde_json 1.0.151 reports it (later releases point at the bad byte).
INVALID_UTF8 = [
    (b'{"model": "\xff"}', "line 1 column 13"),
    (b'{"model": "\xc3\xa9\xff"}', "line 1 column 15"),
    (b'{"model": "ab\xff"}', "line 1 column 15"),
    (b'{"model": "\xf0\x9f\x9a\x80\xff"}', "line 1 column 17"),
    (b'{"a":1,\n "model": "abc\xffdef"}', "line 2 column 19"),
    (b'{"model": "\xed\xa0\x80"}', "line 1 column 15"),
    (b'{"model": "x", "\xff": 1}', "line 1 column 18"),
]


def test_invalid_utf8_in_a_string_is_placed_at_its_closing_quote():
    for body, where in INVALID_UTF8:
        for cls in CLASSES:
            try:
                cls(body)
            except ValueError as e:
                assert str(e) == f"invalid JSON request: invalid unicode code point at {where}", (body, str(e))
            else:
                raise AssertionError(f"{body!r} was accepted")


def test_broken_request_bodies():
    """The differential's `broken` draw (edits of every kind, JSON text and bytes, broken text)
    never crashes a constructor or a conversion."""
    from conversion_random import broken_cases

    for case in broken_cases(5, 60):
        cls = {"chat": d.ChatCompletionRequest, "responses": d.ResponsesRequest, "messages": d.MessagesRequest}[case["format"]]
        body = case["body"]
        if "body_text" in case:
            body = case["body_text"]
        if "body_bytes" in case:
            body = bytes.fromhex(case["body_bytes"])
        _convert(cls, body)
