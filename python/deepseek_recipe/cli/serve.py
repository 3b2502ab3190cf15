"""`deepseek-recipe serve --backend vllm=URL | sglang=URL`: the HTTP front end over an existing fleet.

The in-process engine has its own command (`deepseek-engine serve MODEL_DIR`); both run the same
ASGI application (`deepseek_recipe.server`).
"""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    from ..server.config import add_server_arguments

    p = sub.add_parser("serve", help="HTTP server (OpenAI / Anthropic APIs) over a vLLM or SGLang fleet",
                       description="Serve Chat Completions, Responses and Messages over a vLLM 0.33 "
                                   "`--tokens-only` server or an SGLang 0.5.23 server; the codec renders "
                                   "prompts and parses outputs, the fleet only sees token IDs.")
    p.add_argument("--backend", required=True, metavar="vllm=URL|sglang=URL",
                   help="the fleet server: vllm=http://host:port (vllm serve MODEL --tokens-only) or "
                        "sglang=http://host:port")
    p.add_argument("--model-version", choices=["v4", "v41"], default="v4",
                   help="the served model's prompt template and output parser (default v4)")
    add_server_arguments(p)


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from ..server.config import config_from_args
        from ..server.fleet import make_fleet_backend
        from ..server.run import run_server
    except ImportError as err:
        print(f"error: the server needs its extra: pip install 'deepseek-recipe[server]' ({err})", file=sys.stderr)
        return 2
    try:
        config = config_from_args(args, args.model_version)
        backend = make_fleet_backend(args.backend, args.served_model_name)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        run_server(backend, config, log_level=args.log_level)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
