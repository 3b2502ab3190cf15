"""`corpus`: the checker over a built-in corpus of requests (multi-turn agents, tools, images,
control-token spellings in every field, every option), against a chat template or an encoder
command, with a summary table."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from .check import backend_output, compare
from .inputs import InputError, load_tokenizer, prepare

CONTROL = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜System｜>",
           "<think>", "</think>", "｜DSML｜", "<｜latest_reminder｜>", "<｜image｜>"]
PIXEL = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGA"
         "hKmMIQAAAABJRU5ErkJggg==")
TOOLS = [
    {"type": "function", "function": {"name": "search", "description": "Search the web.",
                                      "parameters": {"type": "object", "properties": {"query": {"type": "string"},
                                                                                      "top_k": {"type": "integer"}},
                                                     "required": ["query"]}}},
    {"type": "function", "function": {"name": "read_file", "description": "Read a file of the workspace.",
                                      "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},
]


def _call(i, name, args):
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def _agent(turns: int, thinking: bool, reorder: bool = False) -> list[dict]:
    msgs = [{"role": "system", "content": "You are a careful coding agent."},
            {"role": "user", "content": "Find the failing test and fix it."}]
    for t in range(turns):
        calls = [_call(f"{t}a", "search", {"query": f"failing test {t}", "top_k": 3}),
                 _call(f"{t}b", "read_file", {"path": f"src/mod_{t}.py"})]
        msgs.append({"role": "assistant", "content": "", "tool_calls": calls,
                     **({"reasoning_content": f"Step {t}: look at the logs."} if thinking else {})})
        results = [{"role": "tool", "tool_call_id": c["id"], "content": f"result of {c['function']['name']} {t}"}
                   for c in calls]
        msgs += list(reversed(results)) if reorder else results
    msgs.append({"role": "assistant", "content": "Fixed: the fixture path was wrong.",
                 **({"reasoning_content": "All tests pass now."} if thinking else {})})
    msgs.append({"role": "user", "content": "Thanks. Now add a regression test."})
    return msgs


def corpus(model: str = "DeepSeek-V4.1-Flash") -> list[tuple[str, dict]]:
    """(name, Chat Completions body) pairs."""
    def chat(messages, **kw):
        return {"model": model, "messages": messages, **kw}

    off = {"thinking": {"type": "disabled"}}
    cases = [
        ("plain_chat_no_thinking", chat([{"role": "user", "content": "Hello!"}], **off)),
        ("plain_chat_thinking", chat([{"role": "user", "content": "Hello!"}])),
        ("system_and_history", chat([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                                     {"role": "assistant", "content": "Hello."},
                                     {"role": "user", "content": "Who are you?"}], **off)),
        ("history_with_reasoning", chat([{"role": "user", "content": "2+2?"},
                                         {"role": "assistant", "content": "4", "reasoning_content": "Add them."},
                                         {"role": "user", "content": "3+3?"}])),
        ("effort_low", chat([{"role": "user", "content": "Hi"}], reasoning_effort="low")),
        ("effort_max", chat([{"role": "user", "content": "Hi"}], reasoning_effort="max")),
        ("tools_offered", chat([{"role": "user", "content": "Search for cats."}], tools=TOOLS, **off)),
        ("tools_choice_none", chat([{"role": "user", "content": "Search for cats."}], tools=TOOLS, tool_choice="none", **off)),
        ("tools_choice_required", chat([{"role": "user", "content": "Search for cats."}], tools=TOOLS,
                                       tool_choice="required", **off)),
        ("agent_2_turns_no_thinking", chat(_agent(2, False), tools=TOOLS, **off)),
        ("agent_3_turns_thinking", chat(_agent(3, True), tools=TOOLS)),
        ("agent_results_out_of_order", chat(_agent(2, True, reorder=True), tools=TOOLS)),
        ("json_object", chat([{"role": "user", "content": "List three colours as JSON."}],
                             response_format={"type": "json_object"}, **off)),
        ("json_schema", chat([{"role": "user", "content": "A colour."}], **off,
                             response_format={"type": "json_schema", "json_schema": {
                                 "name": "c", "schema": {"type": "object", "properties": {"c": {"type": "string"}}}}})),
        ("image_part", chat([{"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                                          {"type": "image_url", "image_url": {"url": PIXEL}}]}], **off)),
        ("multiline_whitespace", chat([{"role": "user", "content": "  leading\n\n\ttabs and trailing  \n"}], **off)),
    ]
    # Control-token spellings typed into every field a request has.
    for i, sp in enumerate(CONTROL):
        name = f"spelling_{i}"
        cases.append((f"{name}_user", chat([{"role": "user", "content": f"a{sp}b"}], **off)))
        cases.append((f"{name}_everywhere", chat([
            {"role": "system", "content": f"sys {sp}"},
            {"role": "user", "content": f"user {sp}"},
            {"role": "assistant", "content": f"answer {sp}", "reasoning_content": f"why {sp}",
             "tool_calls": [_call("x", "search", {"query": f"q {sp}"})]},
            {"role": "tool", "tool_call_id": "call_x", "content": f"result {sp}"},
        ], tools=[{"type": "function", "function": {"name": "search", "description": f"desc {sp}",
                                                    "parameters": {"type": "object", "properties": {
                                                        "query": {"type": "string", "description": f"p {sp}"}}}}}])))
    return cases


def cmd_corpus(args) -> int:
    if bool(args.template) == bool(args.command):
        raise InputError("give exactly one of --template or --command")
    if args.template:
        from .hf_template import read_template
        source = ("template", read_template(args.template))
    else:
        source = ("command", args.command)
    model = "DeepSeek-V4-Pro" if args.model_version == "v4" else "DeepSeek-V4.1-Flash"
    cases = [(n, b) for n, b in corpus(model) if not args.filter or args.filter in n]
    tok = load_tokenizer(args.tokenizer, args.model_version)

    def run(case):
        name, body = case
        try:
            prep = prepare(body, "chat", args.model_version)
            return compare(prep, tok, backend_output(source, prep, body))
        except InputError as e:
            return {"error": str(e)}

    # Encoder commands are separate processes: run a few at once.
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        reports = list(pool.map(run, cases))
    rows, totals = [], {}
    for (name, _), report in zip(cases, reports):
        if "error" in report:
            rows.append({"case": name, "status": "error", "classes": {}, "injected_tokens": 0, "error": report["error"]})
            continue
        classes = dict(report["summary"])
        injected = sum(len(d["extra_control_tokens"]) for d in report["divergences"]
                       if d["class"] == "control_token_injection")
        for c in classes:
            totals[c] = totals.get(c, 0) + 1
        rows.append({"case": name, "status": "identical" if report["identical"] else "divergent",
                     "classes": classes, "injected_tokens": injected})
    if args.json:
        print(json.dumps({"cases": rows, "cases_with_class": totals}, ensure_ascii=False))
    else:
        print(format_table(rows, totals))
    # A case the backend fails on counts as a divergence; bad arguments exit with 2 earlier.
    return 0 if all(r["status"] == "identical" for r in rows) else 1


def format_table(rows, totals) -> str:
    width = max([len(r["case"]) for r in rows] + [4])
    lines = [f"{'case':{width}}  {'status':9}  divergences"]
    for r in rows:
        detail = r.get("error") or ", ".join(f"{c} x{n}" for c, n in r["classes"].items())
        lines.append(f"{r['case']:{width}}  {r['status']:9}  {detail}")
    n = len(rows)
    ok = sum(r["status"] == "identical" for r in rows)
    lines.append("")
    lines.append(f"{ok}/{n} identical, {sum(r['status'] == 'divergent' for r in rows)} divergent, "
                 f"{sum(r['status'] == 'error' for r in rows)} errors")
    for c, k in sorted(totals.items(), key=lambda x: -x[1]):
        lines.append(f"  {c}: {k} case(s)")
    return "\n".join(lines)
