"""`check`: what another backend produced for a request (prompt string, token IDs, a Hugging
Face chat template, or an encoder command) against the canonical encoding. The comparison and
its classification are done by the native checker (`recipe-rs/core/src/check`); this module
gathers the backend's output and prints the report."""

from __future__ import annotations

import json
import shlex
import subprocess

import deepseek_recipe as dr

from .inputs import InputError, load_tokenizer, prepare, read_json, read_text, read_token_ids


def backend_output(source: tuple[str, object], prep, body) -> tuple[str, object]:
    """("prompt", str) or ("ids", list[int]) for one source: ("prompt"|"ids"|"template"|"command", value)."""
    kind, value = source
    if kind in ("prompt", "ids"):
        return kind, value
    if kind == "template":
        from .hf_template import render_template
        return "prompt", render_template(value, prep.conversation)
    if kind == "command":
        return run_encoder_command(value, body)
    raise ValueError(kind)


def run_encoder_command(command: str, body) -> tuple[str, object]:
    """Run `command` with the request JSON on stdin. Its stdout is a JSON list of token IDs,
    a JSON object with `token_ids` or `prompt`, or else the prompt text itself."""
    try:
        done = subprocess.run(shlex.split(command), input=json.dumps(body, ensure_ascii=False), capture_output=True,
                              text=True, encoding="utf-8", timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InputError(f"encoder command failed to run: {e}") from None
    if done.returncode != 0:
        raise InputError(f"encoder command exited with {done.returncode}: {done.stderr.strip()[-500:]}")
    out = done.stdout
    if not out.strip():
        raise InputError("encoder command printed nothing (an empty prompt is not an encoding)")
    try:
        value = json.loads(out)
    except json.JSONDecodeError:
        return "prompt", out
    if isinstance(value, list):
        return "ids", value
    if isinstance(value, dict) and isinstance(value.get("token_ids"), list):
        return "ids", value["token_ids"]
    if isinstance(value, dict) and isinstance(value.get("prompt"), str):
        return "prompt", value["prompt"]
    if isinstance(value, str):
        return "prompt", value
    raise InputError("encoder command printed JSON that is neither token IDs nor a prompt")


def compare(prep, tok, output: tuple[str, object]) -> dict:
    """The native checker's report as a dict."""
    enc = prep.encoding(tok)
    kind, value = output
    try:
        if kind == "prompt":
            text = dr.check_prompt_text(enc, prep.conversation, value)
        else:
            text = dr.check_token_ids(enc, prep.conversation, list(value))
    except (ValueError, OverflowError, TypeError) as e:
        raise InputError(str(e)) from None
    report = json.loads(text)
    report["model_version"] = prep.version
    report["format"] = prep.fmt
    return report


def short(s: str, n: int = 70) -> str:
    s = s.replace("\n", "\\n")
    return s if len(s) <= n else s[: n // 2 - 1] + "…" + s[-(n // 2 - 1):]


def format_report(r: dict) -> str:
    version = "V4.1" if r["model_version"] == "v41" else "V4"
    head = "IDENTICAL" if r["identical"] else "DIVERGENT"
    lines = [f"{head}: {version} {r['format']} request; expected {r['expected_tokens']} tokens, found {r['found_tokens']}"]
    if r["identical"]:
        return lines[0]
    lines.append("summary: " + ", ".join(f"{c} x{n}" for c, n in r["summary"]))
    if r["control_tokens"]:
        lines.append("control tokens (expected / found):")
        for c in r["control_tokens"]:
            line = f"  {c['token']} ({c['id']}): {c['expected']} / {c['found']}"
            if c["unexpected_positions"]:
                line += f"; unexpected at found tokens {c['unexpected_positions'][:12]}"
            if c["missing_positions"]:
                line += f"; missing at expected tokens {c['missing_positions'][:12]}"
            lines.append(line)
    lines.append("divergences:")
    for i, d in enumerate(r["divergences"], 1):
        (ea, eb), (fa, fb) = d["expected_tokens"], d["found_tokens"]
        lines.append(f"  {i}. {d['class']} in {d['region']}: expected tokens {ea}..{eb} {json.dumps(short(d['expected_text']), ensure_ascii=False)}"
                     f" -> found {fa}..{fb} {json.dumps(short(d['found_text']), ensure_ascii=False)}")
        if d["extra_control_tokens"]:
            lines.append(f"     extra control tokens: {' '.join(d['extra_control_tokens'])}")
        if d["missing_control_tokens"]:
            lines.append(f"     missing control tokens: {' '.join(d['missing_control_tokens'])}")
    f = r["first_difference"]
    if f:
        def tok(t):
            return "end of prompt" if t is None else f"{t[0]} {json.dumps(t[1], ensure_ascii=False)}"
        lines.append(f"first difference: expected token {f['expected_index']} = {tok(f['expected_token'])}; "
                     f"found token {f['found_index']} = {tok(f['found_token'])}")
        for side in ("expected", "found"):
            before, after = f[f"{side}_context"]
            t = f[f"{side}_token"]
            mid = "" if t is None else t[1]
            lines.append(f"  {side + ':':9} …{short(before, 60)}⟦{short(mid, 30)}⟧{short(after, 60)}…")
    return "\n".join(lines)


def source_of(args) -> tuple[str, object]:
    given = [(k, v) for k, v in (("prompt", args.prompt), ("ids", args.ids), ("template", args.template),
                                 ("command", args.command)) if v]
    if len(given) != 1:
        raise InputError("give exactly one of --prompt, --ids, --template, --command")
    kind, path = given[0]
    if kind == "prompt":
        return kind, read_text(path)
    if kind == "ids":
        return kind, read_token_ids(path)
    if kind == "template":
        from .hf_template import read_template
        return kind, read_template(path)
    return kind, path


def cmd_check(args) -> int:
    source = source_of(args)
    body = read_json(args.request)
    prep = prepare(body, args.format, args.model_version)
    tok = load_tokenizer(args.tokenizer, prep.version)
    report = compare(prep, tok, backend_output(source, prep, body))
    print(json.dumps(report, ensure_ascii=False) if args.json else format_report(report))
    return 0 if report["identical"] else 1
