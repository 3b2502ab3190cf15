"""Regressions for inputs that once broke the codec's promises: a typed image-token spelling that
became the image control token, deeply nested JSON that crashed the process, and the identity of
the conversion exception. Expected values were observed from the official package (the conversion
fixtures under `tests/conformance/conversion` record the same cases)."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap

import deepseek_recipe as dr
import pytest

IMG = "<｜image｜>"
IMG_ID = 129279
URL = "https://example.com/a.png"


def _chat(model, content):
    body = {"model": model, "messages": [{"role": "user", "content": content}], "thinking": {"type": "disabled"}}
    return dr.ChatCompletionRequest(body).convert(dr.ConversionOptions()).conversation


def test_typed_image_token_is_text_and_the_image_part_is_the_placeholder(sys_tokenizer):
    conv = _chat("DeepSeek-V4.1-Flash", [{"type": "text", "text": f"look: {IMG} fake"},
                                         {"type": "image_url", "image_url": {"url": URL}}])
    enc = dr.DeepseekV41Encoding()
    r = enc.render_conversation(conv)
    assert conv.messages[0].content == f"look: {IMG} fake\n\n{IMG}"
    assert r.prompt.endswith(f"<｜User｜>look: {IMG} fake\n\n{IMG}<｜Assistant｜></think>")
    placeholders = [r.prompt[a:b] for a, b in r.special_ranges if r.prompt[a:b] == IMG]
    assert len(placeholders) == 1
    start = r.prompt.rindex(IMG)
    assert [start, start + len(IMG)] in [list(x) for x in r.special_ranges]
    ids = enc.with_tokenizer(sys_tokenizer).encode(conv)
    # The official package's IDs: the typed spelling is plain text, the image part is 129279.
    assert ids == [0, 128803, 12533, 28, 818, 28217, 10253, 28217, 32, 32640, 271, IMG_ID, 128804, 128822]


def test_converted_message_keeps_its_placeholders_when_rebuilt_into_a_conversation(sys_tokenizer):
    conv = _chat("DeepSeek-V4.1-Flash", [{"type": "text", "text": IMG}, {"type": "image_url", "image_url": {"url": URL}}])
    again = dr.Conversation(conv.messages, thinking_mode=False)
    enc = dr.DeepseekV41Encoding().with_tokenizer(sys_tokenizer)
    assert enc.encode(again) == enc.encode(conv)
    assert enc.encode(conv).count(IMG_ID) == 1


@pytest.mark.parametrize("cls", ["user", "system", "tool"])
def test_directly_built_message_marks_first_occurrences(cls):
    src = [dr.UrlImageSource(URL)]
    content = f"a {IMG} b {IMG} c"
    msg = {"user": lambda: dr.UserMessage(content, src),
           "system": lambda: dr.SystemMessage(content, src),
           "tool": lambda: dr.ToolMessage(content, None, src)}[cls]()
    assert msg.content == content
    conv = dr.Conversation([dr.UserMessage("q"), msg] if cls != "user" else [msg], thinking_mode=False)
    for enc in (dr.DeepseekV4Encoding(), dr.DeepseekV41Encoding()):
        r = enc.render_conversation(conv)
        marked = [a for a, b in r.special_ranges if r.prompt[a:b] == IMG]
        assert marked == [r.prompt.index(IMG)]


def _nested_dict(n):
    d = {"type": "string"}
    for _ in range(n):
        d = {"type": "object", "properties": {"x": d}}
    return d


def _nested_list(n):
    v = []
    for _ in range(n):
        v = [v]
    return v


def test_nesting_limit_matches_official():
    # 128 nested containers are accepted, 129 raise (as in the official package).
    dr.ToolDefinition("t", "d", _nested_list(127))
    dr.Conversation([], response_schema=_nested_list(127))
    with pytest.raises(RecursionError, match="^JSON input exceeds the maximum nesting depth of 128$"):
        dr.ToolDefinition("t", "d", _nested_list(128))
    with pytest.raises(RecursionError, match="^JSON input exceeds the maximum nesting depth of 128$"):
        dr.Conversation([], response_schema=_nested_list(128))


def test_deep_nesting_raises_instead_of_crashing():
    # Run in a child: before the fix these inputs killed the process with SIGSEGV.
    code = textwrap.dedent("""
        import deepseek_recipe as dr
        def nested_dict(n):
            d = {"type": "string"}
            for _ in range(n):
                d = {"type": "object", "properties": {"x": d}}
            return d
        def nested_list(n):
            v = []
            for _ in range(n):
                v = [v]
            return v
        for make in (lambda: dr.Conversation([dr.UserMessage("q")], tools=[dr.ToolDefinition("t", "d", nested_dict(100000))]),
                     lambda: dr.Conversation([dr.UserMessage("q")], response_schema=nested_list(50000)),
                     lambda: dr.ChatCompletionRequest({"model": "DeepSeek-V4.1-Flash", "x": nested_list(50000),
                                                       "messages": [{"role": "user", "content": "q"}]})):
            try:
                conv = make()
                dr.DeepseekV41Encoding().render_conversation(conv)
                print("accepted")
            except RecursionError as e:
                print(type(e).__name__, e)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["RecursionError JSON input exceeds the maximum nesting depth of 128"] * 3


def test_conversion_error_identity():
    E = dr.ConversionError
    assert E.__name__ == "ConversionError"
    assert E.__module__ == "_native"
    assert E.__bases__ == (Exception,)
    assert repr(E) == "<class '_native.ConversionError'>"
    with pytest.raises(E) as info:
        dr.ChatCompletionRequest({"model": "nope", "messages": [{"role": "user", "content": "x"}]}).convert(dr.ConversionOptions())
    e = info.value
    msg = "The supported API model names are DeepSeek-V4-Pro, DeepSeek-V4.1-Flash, but you passed nope."
    assert type(e).__name__ == "ConversionError"
    assert repr(e) == f"ConversionError({msg!r})"
    assert e.args == (msg,)
    assert e.status_code == 400
    # The official class lives in a module named `_native` that cannot be imported under that
    # name, so pickling an instance fails there; ours fails the same way.
    with pytest.raises(pickle.PicklingError, match="_native"):
        pickle.dumps(e)
