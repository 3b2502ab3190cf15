"""Round trip: an assistant turn rendered as DSML text and encoded structurally comes back intact.

The turn (random reasoning, content, zero to three tool calls with random JSON arguments) is
rendered the way the prompt template writes a historical assistant turn, encoded with the real
tokenizer (control tokens by ID, everything else as plain text), and fed to the stream processor
one token at a time and in random chunk sizes. The accumulated Chat Completions message must equal
the original turn.
"""

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from stream_support import dr, tokenizer

D = "｜DSML｜"
ALPHABET = st.characters(
    codec="utf-8", categories=("L", "N", "Zs"), include_characters="\n,.!?-'\"{}[]:()é日本🦀",
    exclude_characters="<｜")

plain = st.text(ALPHABET, min_size=1, max_size=40)
scalar = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                   st.floats(allow_nan=False, allow_infinity=False, width=32), plain)
json_value = st.recursive(scalar, lambda c: st.one_of(st.lists(c, max_size=3),
                                                      st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), c, max_size=3)),
                          max_leaves=6)
args = st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True), json_value, max_size=4)
calls = st.lists(st.tuples(st.from_regex(r"[a-zA-Z][a-zA-Z0-9_-]{0,10}", fullmatch=True), args), max_size=3)


def strip_newlines(s):
    return s.strip("\n")


def render(reasoning, content, tool_calls):
    """The assistant turn as the model writes it after `<think>` (returns a list of pieces:
    plain text, or the name of a control token)."""
    pieces = [reasoning, ("special", "</think>"), content]
    if tool_calls:
        body = f"\n\n<{D} calls>\n"
        for name, a in tool_calls:
            body += f'<{D} invoke name="{name}">\n'
            for k, v in a.items():
                if isinstance(v, str):
                    body += f'<{D} parameter name="{k}" string="true">{v}</{D} parameter>\n'
                else:
                    body += f'<{D} parameter name="{k}" string="false">{json.dumps(v, ensure_ascii=False)}</{D} parameter>\n'
            body += f"</{D} invoke>\n"
        body += f"</{D} calls>"
        pieces.append(body)
    return pieces


def encode(pieces):
    tok = tokenizer()
    ids = []
    for p in pieces:
        if isinstance(p, tuple):
            ids += tok.encode(p[1])
            continue
        # Control-token spellings are split off and encoded by ID; plain text has none of
        # them except the DSML marker, which the template writes as a control token too.
        parts = p.split(D)
        for i, part in enumerate(parts):
            if i:
                ids += tok.encode(D)
            if part:
                ids += tok.encode(part)
    return ids


def run(ids, sizes):
    opts = dr.ParsingOptions(thinking_initial_stage=dr.ThinkingInitialStage.ReasoningStart)
    gen = dr.ChatCompletionChunkGenerator("rt", "m", thinking_mode=True,
                                          thinking_initial_stage=dr.ThinkingInitialStage.ReasoningStart)
    sp = dr.StreamProcessor(gen, opts, tokenizer())
    resp = dr.ChatCompletionResponse("rt", "m", 0, 0, 0)
    i = k = 0
    while i < len(ids):
        n = sizes[k % len(sizes)]
        k += 1
        for c in sp.push(dr.InferenceChunk.tokens(ids[i:i + n])):
            resp.accumulate(c)
        i += n
    for c in sp.push(dr.InferenceChunk.finish(dr.InferenceFinishReason.Stop)) + sp.finish():
        resp.accumulate(c)
    return json.loads(resp.to_json())["choices"][0]


@settings(max_examples=60, deadline=None)
@given(reasoning=plain.map(strip_newlines).filter(bool), content=st.one_of(st.just(""), plain.map(strip_newlines)),
       tool_calls=calls, sizes=st.lists(st.integers(1, 9), min_size=1, max_size=5))
def test_rendered_turn_round_trips(reasoning, content, tool_calls, sizes):
    ids = encode(render(reasoning, content, tool_calls))
    for chunking in ([1], sizes):
        choice = run(ids, chunking)
        msg = choice["message"]
        assert msg.get("reasoning_content") == reasoning
        assert (msg.get("content") or "") == content
        got = msg.get("tool_calls") or []
        assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in got] == \
            [(n, a) for n, a in tool_calls]
        assert choice["finish_reason"] == ("tool_calls" if tool_calls else "stop")
