"""`render` and `encode`: a request or conversation → the canonical prompt or its token IDs."""

from __future__ import annotations

import json
import sys

from .inputs import load_tokenizer, prepare, read_json

ANSI_ON, ANSI_OFF = "\x1b[1;35m", "\x1b[0m"


def highlight(prompt: str, ranges, style: str) -> str:
    """`prompt` with the template's control tokens marked (`ansi` colour or `[[...]]`)."""
    if style == "none":
        return prompt
    on, off = (ANSI_ON, ANSI_OFF) if style == "ansi" else ("[[", "]]")
    out, pos = [], 0
    for start, end in ranges:
        out += [prompt[pos:start], on, prompt[start:end], off]
        pos = end
    out.append(prompt[pos:])
    return "".join(out)


def highlight_style(choice: str) -> str:
    if choice != "auto":
        return choice
    return "ansi" if sys.stdout.isatty() else "brackets"


def cmd_render(args) -> int:
    prep = prepare(read_json(args.request), args.format, args.model_version)
    rendered = prep.encoding().render_conversation(prep.conversation)
    if args.json:
        print(json.dumps({"format": prep.fmt, "model_version": prep.version, "prompt": rendered.prompt,
                          "special_ranges": [list(r) for r in rendered.special_ranges],
                          "images": len(rendered.image_sources)}, ensure_ascii=False))
    elif args.highlight == "none":
        sys.stdout.write(rendered.prompt)  # exactly the prompt, for piping into other tools
    else:
        print(highlight(rendered.prompt, rendered.special_ranges, highlight_style(args.highlight)))
    return 0


def cmd_encode(args) -> int:
    prep = prepare(read_json(args.request), args.format, args.model_version)
    tok = load_tokenizer(args.tokenizer, prep.version)
    try:
        ids = prep.encoding(tok).encode(prep.conversation)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"format": prep.fmt, "model_version": prep.version, "count": len(ids), "token_ids": ids}))
    else:
        print(json.dumps(ids))
    return 0
