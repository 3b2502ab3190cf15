"""Run request conversions and record the results in a canonical JSON form.

Imported by `generate_conversion.py` (inside the official side venv) and by our own tests
(inside our venv): both import `deepseek_recipe`, whichever one is installed.
"""

from __future__ import annotations

import json


def _image(s):
    value = {"data_url": s.data_url, "url": s.url}.get(s.kind)
    return {"kind": s.kind, "value": s.data.hex() if s.kind == "bytes" else value,
            "detail": s.detail, "path": s.path}


def _tool(t):
    return {
        "name": t.name,
        "description": t.description,
        "parameters": t.parameters,
        "strict": t.strict,
        "defer_loading": t.defer_loading,
    }


def dump_conversation(c):
    """The conversation in the canonical layout of `Conversation.to_json`
    (docs/conversation-json.md), less each message's `image_token` and `placeholders`, which the
    official package does not expose."""
    messages = []
    for m in c.messages:
        role = m.role
        if role == "system":
            d = {"role": role, "content": m.content, "image_sources": [_image(s) for s in m.image_sources],
                 "tools": None if m.tools is None else [_tool(t) for t in m.tools]}
        elif role == "user":
            d = {"role": role, "content": m.content, "image_sources": [_image(s) for s in m.image_sources]}
        elif role == "assistant":
            d = {"role": role, "content": m.content, "reasoning_content": m.reasoning_content,
                 "tool_calls": None if m.tool_calls is None
                 else [{"id": t.id, "name": t.name, "arguments": t.arguments} for t in m.tool_calls],
                 "prefix": m.prefix}
        elif role == "tool":
            d = {"role": role, "content": m.content, "tool_call_id": m.tool_call_id,
                 "image_sources": [_image(s) for s in m.image_sources]}
        else:
            d = {"role": role, "content": m.content}
        messages.append(d)
    return {
        "messages": messages,
        "thinking_mode": c.thinking_mode,
        "tools": [_tool(t) for t in c.tools],
        "tool_choice": c.tool_choice,
        "reasoning_effort": c.reasoning_effort,
        "response_format": c.response_format,
        "response_schema": c.response_schema,
        "response_regex": c.response_regex,
    }


RESOLVE_PAIRS = [(10, 1_000_000), (100, 100), (101, 100), (50, 60), (0, 0), (1000, 200_000)]


def make_options(d, spec):
    o = d.ConversionOptions()
    spec = spec or {}
    if "default_thinking_mode" in spec:
        o = o.with_default_thinking_mode(spec["default_thinking_mode"])
    if spec.get("reject_missing_reasoning"):
        o = o.with_reasoning_content_behavior(d.ReasoningContentBehavior.Reject)
    if "responses_web_search" in spec:
        o = o.with_responses_web_search(getattr(d.WebSearchBehavior, spec["responses_web_search"]))
    if "messages_web_search" in spec:
        o = o.with_messages_web_search(getattr(d.WebSearchBehavior, spec["messages_web_search"]))
    if "thinking_bound" in spec:
        o = o.with_thinking_max_tokens_upper_bound(spec["thinking_bound"])
    if "non_thinking_bound" in spec:
        o = o.with_non_thinking_max_tokens_upper_bound(spec["non_thinking_bound"])
    for name, version in spec.get("aliases", []):
        o = o.with_model_alias(name, getattr(d.ModelVersion, version))
    return o


_TOKENIZERS = {}


def _tokenizer(d):
    """The real tokenizer with `<｜System｜>` added (the V4.1 template needs it; see
    `encoding_spec.system_tokenizer_json`)."""
    if d not in _TOKENIZERS:
        from encoding_spec import system_tokenizer_json, tokenizer_path

        with open(tokenizer_path(), encoding="utf-8") as f:
            _TOKENIZERS[d] = d.Tokenizer.from_str(system_tokenizer_json(f.read()))
    return _TOKENIZERS[d]


def render_converted(d, cr):
    """Prompt, template-inserted spellings, special ranges and token IDs of a converted request,
    rendered by the encoding of its model version."""
    enc = d.DeepseekV41Encoding() if _version_name(cr.model_version) == "DeepseekV41Flash" else d.DeepseekV4Encoding()
    r = enc.render_conversation(cr.conversation)
    return {"prompt": r.prompt, "special": [r.prompt[a:b] for a, b in r.special_ranges],
            "special_ranges": [list(x) for x in r.special_ranges],
            "tokens": enc.with_tokenizer(_tokenizer(d)).encode(cr.conversation)}


def _version_name(v):
    return str(v).split(".")[-1]


def run_case(d, case):
    """Convert one case (`format`, `body`, optional `options`) and describe the outcome."""
    cls = {"chat": d.ChatCompletionRequest, "responses": d.ResponsesRequest, "messages": d.MessagesRequest}[case["format"]]
    opts = make_options(d, case.get("options"))
    body = case["body"]
    if case.get("as_text"):
        body = json.dumps(body)
    if "body_text" in case:  # JSON text as given (perhaps broken), then bytes (perhaps not UTF-8)
        body = case["body_text"]
    if "body_bytes" in case:
        body = bytes.fromhex(case["body_bytes"])
    try:
        req = cls(body)
    except Exception as e:  # noqa: BLE001 - recording the exception class is the point
        return {"outcome": "constructor_error", "error_class": type(e).__name__, "message": str(e)}
    out = {"model": req.model}
    if case["format"] == "responses":
        e = req.echo()
        out["echo"] = {"instructions": e.instructions, "max_output_tokens": e.max_output_tokens,
                       "temperature": e.temperature, "top_p": e.top_p, "top_logprobs": e.top_logprobs,
                       "user": e.user}
        try:
            out["namespace_tool_map"] = {k: list(v) for k, v in sorted(req.namespace_tool_map(opts).items())}
        except d.ConversionError as e:
            out["namespace_tool_map"] = {"error": e.body}
    try:
        cr = req.convert(opts)
    except d.ConversionError as e:
        out.update({"outcome": "conversion_error", "error_class": "ConversionError",
                    "status_code": e.status_code, "body": json.loads(e.body)})
        return out
    try:
        req.convert(opts)
        out["consumed"] = False
    except RuntimeError as e:
        out["consumed"] = str(e)
    io = cr.inference_options
    oc = io.output_constraint
    po = cr.parsing_options
    resolved = []
    for p, c in RESOLVE_PAIRS:
        try:
            resolved.append([p, c, cr.resolve_max_tokens(p, c)])
        except d.ConversionError as e:
            resolved.append([p, c, json.loads(e.body)])
    out.update({
        "outcome": "ok",
        "conversation": dump_conversation(cr.conversation),
        "inference_options": {
            "max_tokens": io.max_tokens, "temperature": io.temperature, "top_p": io.top_p,
            "logprobs": io.logprobs, "top_logprobs": io.top_logprobs, "seed": io.seed,
            "output_constraint": None if oc is None else {"kind": oc.kind, "schema": oc.schema},
        },
        "parsing_options": {
            "parse_tool_calls": po.parse_tool_calls, "starts_in_tool_calls": po.starts_in_tool_calls,
            "parse_json_output": po.parse_json_output,
            "thinking_initial_stage": None if po.thinking_initial_stage is None else _version_name(po.thinking_initial_stage),
            "stop_sequences": po.stop_sequences,
        },
        "model_version": _version_name(cr.model_version),
        "stream": cr.stream,
        "resolve_max_tokens": resolved,
    })
    if case.get("render"):
        out["rendered"] = render_converted(d, cr)
    return out
