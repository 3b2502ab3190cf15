"""Python-level behaviour of the stream processor: API contract, documented deviations from the
official package (docs/stream-deviations.md), robustness and SSE framing."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from stream_support import dr, tokenizer

D = "｜DSML｜"


def chat_gen(thinking=False):
    stage = dr.ThinkingInitialStage.ReasoningStart if thinking else None
    return dr.ChatCompletionChunkGenerator("c1", "m", thinking_mode=thinking, thinking_initial_stage=stage)


def collect(sp, chunks, cls=dr.ChatCompletionResponse):
    resp = cls("c1", "m", 0, 0, 0)
    items = []
    for c in chunks:
        items += sp.push(c)
    items += sp.finish()
    for i in items:
        resp.accumulate(i)
    return items, json.loads(resp.to_json())


def test_processor_lifecycle_errors():
    sp = dr.StreamProcessor(chat_gen(), dr.ParsingOptions())
    assert not sp.finished
    sp.push(dr.InferenceChunk.text("hi", 1))
    with pytest.raises(RuntimeError, match="token chunk received without a tokenizer"):
        sp.push(dr.InferenceChunk.tokens([1, 2]))
    with pytest.raises(RuntimeError, match="stream processor is closed"):
        sp.push(dr.InferenceChunk.text("x"))
    with pytest.raises(RuntimeError, match="stream processor is closed"):
        sp.finish()

    sp = dr.StreamProcessor(chat_gen(), dr.ParsingOptions())
    sp.finish()
    assert sp.finished
    assert sp.finish() == []
    with pytest.raises(RuntimeError, match="stream processor has finished"):
        sp.push(dr.InferenceChunk.text("x"))
    sp.close()
    assert not sp.finished


def test_generator_is_consumed_once():
    g = chat_gen()
    dr.StreamProcessor(g, dr.ParsingOptions())
    with pytest.raises(RuntimeError, match="consumed"):
        dr.StreamProcessor(g, dr.ParsingOptions())
    with pytest.raises(TypeError):
        dr.StreamProcessor(object(), dr.ParsingOptions())


def test_logprob_count_mismatch():
    sp = dr.StreamProcessor(chat_gen(), dr.ParsingOptions(), tokenizer())
    with pytest.raises(RuntimeError, match=r"invalid log probabilities: 1 log probabilities for 2 token IDs"):
        sp.push(dr.InferenceChunk.tokens([67, 68], [(-0.5, [])]))


def test_inference_chunk_properties():
    c = dr.InferenceChunk.ready(prompt_usage=dr.PromptUsage(prompt_tokens=5, prompt_cache_hit_tokens=2),
                                system_fingerprint="fp")
    assert (c.kind, c.prompt_usage.prompt_tokens, c.prompt_usage.prompt_cache_hit_tokens, c.system_fingerprint) == \
        ("ready", 5, 2, "fp")
    t = dr.InferenceChunk.text("abc", 3)
    assert (t.kind, t.content, t.token_count, t.token_ids) == ("text", "abc", 3, None)
    k = dr.InferenceChunk.tokens([1, 2])
    assert (k.kind, k.token_ids, k.content) == ("tokens", [1, 2], None)
    f = dr.InferenceChunk.finish(dr.InferenceFinishReason.Length)
    assert (f.kind, f.finish_reason) == ("finish", dr.InferenceFinishReason.Length)


# --- deviations -------------------------------------------------------------------------------

@pytest.mark.parametrize("cut", [1, 3, 1000])
def test_dsml_in_prose_is_kept(cut):
    text = f"I like <{D}and more"
    sp = dr.StreamProcessor(chat_gen(), dr.ParsingOptions())
    chunks = [dr.InferenceChunk.text(text[i:i + cut], 1) for i in range(0, len(text), cut)]
    _, resp = collect(sp, chunks)
    assert resp["choices"][0]["message"]["content"] == text


def test_missing_string_attribute_gives_valid_arguments():
    t = (f'<{D} calls>\n<{D} invoke name="f">\n<{D} parameter name="q">abc</{D} parameter>\n'
         f'<{D} parameter name="n" string="maybe">7</{D} parameter>\n</{D} invoke>\n</{D} calls>')
    sp = dr.StreamProcessor(chat_gen(), dr.ParsingOptions())
    _, resp = collect(sp, [dr.InferenceChunk.text(t, 1), dr.InferenceChunk.finish(dr.InferenceFinishReason.Stop)])
    call = resp["choices"][0]["message"]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"q": "abc", "n": 7}


def test_parameter_names_with_spaces_give_valid_arguments():
    """Deviation 6: the official package cuts the name at the space and writes invalid JSON."""
    t = (f'<{D} calls>\n<{D} invoke name="f">\n<{D} parameter name="a b" string="true">v</{D} parameter>\n'
         f'</{D} invoke>\n</{D} calls>')
    sp = dr.StreamProcessor(chat_gen(), dr.ParsingOptions())
    _, resp = collect(sp, [dr.InferenceChunk.text(t, 1), dr.InferenceChunk.finish(dr.InferenceFinishReason.Stop)])
    call = resp["choices"][0]["message"]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"a b": "v"}


def test_eos_ends_output_and_unknown_ids_raise():
    tok = tokenizer()
    ids = tok.encode("Hi") + [1] + tok.encode(" junk")
    sp = dr.StreamProcessor(chat_gen(), dr.ParsingOptions(), tok)
    _, resp = collect(sp, [dr.InferenceChunk.tokens(ids)])
    assert resp["choices"][0]["message"]["content"] == "Hi"
    sp = dr.StreamProcessor(chat_gen(), dr.ParsingOptions(), tok)
    with pytest.raises(RuntimeError, match="unknown token ID 999999"):
        sp.push(dr.InferenceChunk.tokens([67, 999999]))


def test_json_mode_does_not_depend_on_cuts():
    text = 'Sure thing, here is the object: {"a": [1, 2]} enjoy'
    results = set()
    for cut in (1, 2, 5, 1000):
        sp = dr.StreamProcessor(chat_gen(), dr.ParsingOptions(parse_json_output=True))
        chunks = [dr.InferenceChunk.text(text[i:i + cut], 1) for i in range(0, len(text), cut)]
        results.add(collect(sp, chunks)[1]["choices"][0]["message"]["content"])
    assert results == {' {"a": [1, 2]} enjoy'}


# --- robustness -------------------------------------------------------------------------------

def test_empty_thinking_end_spelling():
    opts = dr.ParsingOptions(thinking_initial_stage=dr.ThinkingInitialStage.ReasoningStart,
                             special_tokens=dr.SpecialTokens(thinking_end=""))
    sp = dr.StreamProcessor(chat_gen(True), opts)
    _, resp = collect(sp, [dr.InferenceChunk.text("é日本</think>x"), dr.InferenceChunk.text("🦀")])
    assert resp["choices"][0]["message"]["reasoning_content"] == "é日本</think>x🦀"


def test_big_chunk_memory():
    """One 288 KiB chunk of "a</think>" repeated costs a few MB (the official package needs
    4.4 GB); measured in a fresh interpreter (push time per parser state: benchmarks/stream_push_scaling.py)."""
    code = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
        import deepseek_recipe as dr
        from peak_memory import peak_rss_bytes, reset_peak
        opts = dr.ParsingOptions(thinking_initial_stage=dr.ThinkingInitialStage.ReasoningStart)
        g = dr.ChatCompletionChunkGenerator("c", "m", thinking_mode=True,
                                            thinking_initial_stage=dr.ThinkingInitialStage.ReasoningStart)
        sp = dr.StreamProcessor(g, opts)
        chunk = dr.InferenceChunk.text("a</think>" * (32 * 1024), 1)
        reset_peak()
        before = peak_rss_bytes()
        n = len(sp.push(chunk))
        print(n, (peak_rss_bytes() - before) / 2**20)
    """)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()
    n, mb = int(out[0]), float(out[1])
    assert n > 30000
    assert mb < 64, f"{mb:.1f} MB"


def test_thousands_of_invokes():
    body = "".join(f'<{D} invoke name="f{i}">\n<{D} parameter name="x" string="true">{i}</{D} parameter>\n</{D} invoke>\n'
                   for i in range(3000))
    sp = dr.StreamProcessor(chat_gen(), dr.ParsingOptions())
    items = sp.push(dr.InferenceChunk.text(f"<{D} calls>\n{body}</{D} calls>", 1))
    starts = [i for i in items if '"id":"call_' in i.to_json()]
    assert len(starts) == 3000


# --- SSE framing -----------------------------------------------------------------------------

def test_sse_framing():
    sp = dr.StreamProcessor(chat_gen(), dr.ParsingOptions())
    c = sp.push(dr.InferenceChunk.text("hi", 1))[0]
    assert c.to_sse() == f"data: {c.to_json()}\n\n"
    assert dr.ChatCompletionResponse.sse_event_name(c) is None
    assert dr.ChatCompletionResponse.sse_done_data() == "[DONE]"
    assert dr.sse_done_message("chat") == "data: [DONE]\n\n"
    sp = dr.StreamProcessor(dr.MessagesChunkGenerator("m1", "m", False), dr.ParsingOptions())
    e = sp.push(dr.InferenceChunk.ready())[0]
    assert e.to_sse() == f"event: message_start\ndata: {e.to_json()}\n\n"
    assert dr.MessagesResponse.sse_event_name(e) == "message_start" == e.type
    assert dr.MessagesResponse.sse_done_data() is None and dr.sse_done_message("messages") is None


def test_chunk_generators_from_converted_requests():
    body = {"model": "DeepSeek-V4.1-Flash", "messages": [{"role": "user", "content": "hi"}]}
    cr = dr.ChatCompletionRequest(body).convert(dr.ConversionOptions())
    sp = dr.StreamProcessor(dr.ChatCompletionRequest.chunk_generator(cr, "c", "m"), cr.parsing_options)
    first = json.loads(sp.push(dr.InferenceChunk.ready())[0].to_json())
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": None, "reasoning_content": ""}

    rr = dr.ResponsesRequest({"model": "DeepSeek-V4.1-Flash", "input": "hi", "instructions": "Be brief",
                              "temperature": 0.5})
    echo = rr.echo()
    cr = rr.convert(dr.ConversionOptions())
    g = dr.ResponsesRequest.chunk_generator(cr, "r", "m").with_echo(echo)
    sp = dr.StreamProcessor(g, cr.parsing_options)
    created = json.loads(sp.push(dr.InferenceChunk.ready())[0].to_json())["response"]
    assert (created["instructions"], created["temperature"]) == ("Be brief", 0.5)

    mr = dr.MessagesRequest({"model": "DeepSeek-V4.1-Flash", "max_tokens": 10,
                             "messages": [{"role": "user", "content": "hi"}], "thinking": {"type": "enabled"}})
    cr = mr.convert(dr.ConversionOptions())
    sp = dr.StreamProcessor(dr.MessagesRequest.chunk_generator(cr, "x", "m").with_signature("s"), cr.parsing_options)
    types = [e.type for e in sp.push(dr.InferenceChunk.ready())]
    assert types == ["message_start", "content_block_start", "ping"]
