"""Stream details where we differed from the official package, found by the random stream
differential (tests/conformance/diff_stream_random.py). The expected values are what the
official `deepseek-recipe` 0.2.0 returns for the same calls."""

import json

import deepseek_recipe as dr

D = "｜DSML｜"
BLOCK = f'<{D} calls>\n<{D} invoke name="f">\n<{D} parameter name="k" string="true">'


def chat_gen(thinking=False):
    body = {"model": "DeepSeek-V4.1-Flash", "messages": [{"role": "user", "content": "hi"}]}
    if not thinking:
        body["thinking"] = {"type": "disabled"}
    return dr.ChatCompletionRequest.chunk_generator(dr.ChatCompletionRequest(body).convert(dr.ConversionOptions()), "i", "m")


def deltas(sp, pushes):
    """Per push: the text of each delta (content, reasoning or tool arguments)."""
    res = []
    for p in [*pushes, None]:
        out = sp.push(dr.InferenceChunk.text(p, 1)) if p is not None else sp.finish()
        row = []
        for item in out:
            d = json.loads(item.to_json())["choices"][0]["delta"]
            if "tool_calls" in d:
                f = d["tool_calls"][0]["function"]
                row.append(f.get("name") or f["arguments"])
            elif d.get("reasoning_content"):
                row.append(("r", d["reasoning_content"]))
            elif d.get("content"):
                row.append(d["content"])
        res.append(row)
    return res


def test_ready_without_usage_reports_zero_usage():
    u = dr.InferenceChunk.ready().prompt_usage
    assert (u.prompt_tokens, u.prompt_cache_hit_tokens) == (0, 0)
    assert dr.InferenceChunk.text("a", 1).prompt_usage is None


def test_parameter_value_is_reported_one_input_unit_at_a_time():
    sp = dr.StreamProcessor(chat_gen(), dr.ParsingOptions())
    got = deltas(sp, [BLOCK, "<", "b", "c<", "d", "</", "x", f"</{D} parameter>"])
    assert got == [["f", "{", '"k"', ": ", '"'], [], ["<", "b"], [], ["c<", "d"], [], ["</", "x"], ['"'], []]


def test_value_quote_waits_while_only_a_closing_tag_start_follows():
    sp = dr.StreamProcessor(chat_gen(), dr.ParsingOptions())
    got = deltas(sp, [BLOCK + "<", "b", f"</{D} parameter>"])
    assert got == [["f", "{", '"k"', ": "], ['"', "<", "b"], ['"'], []]
    sp = dr.StreamProcessor(chat_gen(), dr.ParsingOptions())
    got = deltas(sp, [BLOCK, "<", "｜", "DS", "x<", f"</{D[:2]}", f"ab</{D} parameter>"])
    assert got == [["f", "{", '"k"', ": ", '"'], [], ["<", "｜"], ["DS"], [], ["x<"], [f"</{D[:2]}", "ab", '"'], []]


def test_newlines_that_end_reasoning_are_dropped():
    opts = dr.ParsingOptions(thinking_initial_stage=dr.ThinkingInitialStage.ReasoningStart, parse_tool_calls=False)
    sp = dr.StreamProcessor(chat_gen(True), opts)
    got = deltas(sp, ["a", "\n", "b", "c\n", "\n", "</think>", "\n", "x"])
    assert got == [[("r", "a")], [], [("r", "\n"), ("r", "b")], [], [], [("r", "c")], [], ["x"], []]
    sp = dr.StreamProcessor(chat_gen(True), dr.ParsingOptions(thinking_initial_stage=dr.ThinkingInitialStage.ReasoningStart))
    assert deltas(sp, ["a\n\n</think>\n\nb"]) == [[("r", "a"), "b"], []]


def test_the_stop_sequence_completed_first_wins():
    def stop_of(stops, text):
        g = dr.MessagesChunkGenerator("i", "m", False)
        out = dr.StreamProcessor(g, dr.ParsingOptions(stop_sequences=stops)).push(dr.InferenceChunk.text(text, 1))
        events = [json.loads(o.to_json()) for o in out]
        text_out = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
        return text_out, next(e["delta"]["stop_sequence"] for e in events if e["type"] == "message_delta")

    assert stop_of(["bc", "abcd"], "xabcd") == ("xa", "bc")
    assert stop_of(["</", "<"], "xy</z") == ("xy", "<")
    assert stop_of(["b", "ab"], "xab") == ("xa", "b")
    assert stop_of(["ab", "b"], "xab") == ("x", "ab")


def responses_events(body, text):
    req = dr.ResponsesRequest(body).convert(dr.ConversionOptions())
    sp = dr.StreamProcessor(dr.ResponsesRequest.chunk_generator(req, "id", "m"), dr.ParsingOptions())
    return [json.loads(o.to_json()) for o in sp.push(dr.InferenceChunk.text(text, 1)) + sp.finish()]


def test_calls_into_request_namespace_tools_report_name_and_namespace():
    tools = [{"type": "namespace", "name": "gh", "description": "GitHub",
              "tools": [{"type": "function", "name": "create_issue",
                         "parameters": {"type": "object", "properties": {"t": {"type": "string"}}}}]},
             {"type": "function", "name": "plain", "parameters": {"type": "object", "properties": {}}}]
    body = {"model": "DeepSeek-V4.1-Flash", "input": "hi", "reasoning": {"effort": "none"}, "tools": tools}
    for name, want in (("gh::create_issue", ("create_issue", "gh")), ("gh::other", ("gh::other", None)),
                       ("plain", ("plain", None))):
        events = responses_events(dict(body), f'<{D} calls>\n<{D} invoke name="{name}">\n</{D} invoke>\n</{D} calls>')
        items = [e["item"] for e in events if e["type"] in ("response.output_item.added", "response.output_item.done")]
        assert [(i["name"], i.get("namespace")) for i in items] == [want, want]


def test_echoed_text_format_has_the_fields_of_its_type():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": False}
    cases = [
        ({"format": {"schema": schema, "type": "json_schema", "strict": True, "name": "x"}, "verbosity": "low"},
         {"format": {"type": "json_schema", "name": "x", "schema": schema, "description": None, "strict": True},
          "verbosity": "low"}),
        ({"format": {"type": "json_schema", "name": "x", "schema": schema, "description": "dd"}},
         {"format": {"type": "json_schema", "name": "x", "schema": schema, "description": "dd", "strict": None},
          "verbosity": None}),
        ({"verbosity": "low"}, {"format": {"type": "text"}, "verbosity": "low"}),
    ]
    for text, want in cases:
        body = {"model": "DeepSeek-V4.1-Flash", "input": "hi json", "reasoning": {"effort": "none"}, "text": text}
        got = responses_events(body, "x")[0]["response"]["text"]
        assert got == want
        assert list(got["format"]) == list(want["format"])


def test_one_newline_after_an_unfinished_marker_stays_text_before_a_block():
    block = f'<{D} calls>\n<{D} invoke name="f">\n</{D} invoke>\n</{D} calls>'
    for pushes, want in ((["ab\n" + block], ["ab", "f", "{}"]), (["a<\n" + block], ["a<\n", "f", "{}"]),
                         (["a<", "\n" + block], ["a<", "\n", "f", "{}"]), (["a<b\n\n" + block], ["a<b", "f", "{}"]),
                         (["<\n\n" + block], ["<\n", "f", "{}"]), ([f"<{D[:1]}\n" + block], [f"<{D[:1]}\n", "f", "{}"])):
        sp = dr.StreamProcessor(chat_gen(), dr.ParsingOptions())
        assert [d for row in deltas(sp, pushes) for d in row] == want


def test_stop_sequences_do_not_match_the_newlines_that_open_the_content():
    g = dr.MessagesChunkGenerator("i", "m", True)
    opts = dr.ParsingOptions(thinking_initial_stage=dr.ThinkingInitialStage.ReasoningStart, stop_sequences=["\n\n"])
    out = dr.StreamProcessor(g, opts).push(dr.InferenceChunk.text("\nr</think>\n\n\n line\n\n\nmore", 3))
    events = [json.loads(o.to_json()) for o in out]
    texts = [e["delta"].get("text") for e in events if e["type"] == "content_block_delta"]
    assert " line" in texts
    assert events[-2]["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": "\n\n"}


def test_thinking_block_opens_with_reasoning_when_not_in_thinking_mode():
    opts = dr.ParsingOptions(thinking_initial_stage=dr.ThinkingInitialStage.ReasoningStart)
    for text, blocks in (("", []), (f'<{D} invoke name="f">\n</{D} invoke>\n</{D} calls>', ["tool_use"]),
                         ("hello", ["thinking"])):
        sp = dr.StreamProcessor(dr.MessagesChunkGenerator("i", "m", False), opts)
        out = (sp.push(dr.InferenceChunk.text(text, 1)) if text else []) + sp.finish()
        events = [json.loads(o.to_json()) for o in out]
        assert [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"] == blocks


def test_tokens_after_a_stop_sequence_in_the_same_chunk_are_not_counted():
    from stream_support import tokenizer
    tok = tokenizer()
    ids = tok.encode("stop</x here") + tok.encode("<｜DSML｜ calls>") + tok.encode(" more")
    sp = dr.StreamProcessor(chat_gen(), dr.ParsingOptions(stop_sequences=["</"]), tok)
    out = sp.push(dr.InferenceChunk.tokens(ids))
    usage = json.loads(out[-1].to_json())["usage"]
    # Counted up to the end of the run of ordinary tokens that holds the stop sequence.
    assert usage["completion_tokens"] == len(tok.encode("stop</x here")) + 1
    assert "completion_tokens_details" not in usage
