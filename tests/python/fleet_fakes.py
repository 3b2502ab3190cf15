"""Local stand-ins for a vLLM 0.33 ``--tokens-only`` server and an SGLang 0.5.23 server: the wire
shapes of their generate, abort, health and models endpoints as their code defines them
(``vllm/entrypoints/serve/disagg``; SGLang's ``/generate`` with ``input_ids`` and its output
processor), answering every request from a script of token IDs. They check the request fields
they are sent against the fields those servers accept."""

from __future__ import annotations

import asyncio
import json

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

VLLM_SAMPLING_FIELDS = {"n", "presence_penalty", "frequency_penalty", "repetition_penalty", "temperature", "top_p",
                        "top_k", "min_p", "seed", "stop", "stop_token_ids", "ignore_eos", "max_tokens", "min_tokens",
                        "logprobs", "prompt_logprobs", "detokenize", "skip_special_tokens",
                        "spaces_between_special_tokens", "include_stop_str_in_output"}
VLLM_REQUEST_FIELDS = {"request_id", "token_ids", "features", "sampling_params", "model", "stream",
                       "stream_options", "cache_salt", "priority", "kv_transfer_params"}
SGLANG_SAMPLING_FIELDS = {"max_new_tokens", "temperature", "top_p", "top_k", "min_p", "stop", "stop_token_ids",
                          "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim",
                          "sampling_seed", "n", "json_schema", "regex", "ebnf", "frequency_penalty",
                          "presence_penalty", "repetition_penalty", "min_new_tokens"}
SGLANG_REQUEST_FIELDS = {"text", "input_ids", "sampling_params", "stream", "rid", "return_logprob",
                         "top_logprobs_num", "logprob_start_len", "token_ids_logprob", "return_text_in_logprobs",
                         "image_data", "lora_path", "custom_logit_processor"}


class FleetScript:
    """What the fake server generates: token IDs, stop or length, how many IDs per frame."""

    def __init__(self, output: list[int], eos: int, cached_tokens: int = 0, chunk: int = 2, delay_s: float = 0.0,
                 status: int = 200, trim_stop: bool = False, incremental: bool = False) -> None:
        self.output, self.eos, self.cached_tokens, self.chunk, self.delay_s = output, eos, cached_tokens, chunk, delay_s
        self.status, self.trim_stop, self.incremental = status, trim_stop, incremental
        self.requests: list[dict] = []
        self.aborts: list = []
        self.disconnected: list[str] = []
        self.healthy = True

    def tokens(self, max_tokens: int, ignore_eos: bool) -> tuple[list[int], str]:
        out = self.output[:max_tokens]
        if len(out) < max_tokens and not ignore_eos:
            return out + [self.eos], "stop"
        return out, "length"


def _check(fields: set[str], given: dict, what: str) -> None:
    unknown = set(given) - fields
    if unknown:
        raise ValueError(f"{what}: unknown fields {sorted(unknown)}")


def _lp(token: int, k: int) -> dict:
    return {"token": f"token_id:{token}", "logprob": -0.25, "bytes": None,
            "top_logprobs": [{"token": f"token_id:{token + j}", "logprob": -0.25 - j, "bytes": None}
                             for j in range(max(k, 1))]}


def vllm_app(script: FleetScript) -> Starlette:
    async def generate(request: Request) -> Response:
        body = await request.json()
        try:
            _check(VLLM_REQUEST_FIELDS, body, "GenerateRequest")
            _check(VLLM_SAMPLING_FIELDS, body["sampling_params"], "SamplingParams")
            assert all(isinstance(t, int) for t in body["token_ids"])
        except (ValueError, KeyError, AssertionError) as err:
            return JSONResponse({"error": {"message": str(err), "type": "BadRequestError", "param": None,
                                           "code": 400}}, status_code=400)
        script.requests.append({"body": body, "x_request_id": request.headers.get("x-request-id")})
        if script.status != 200:
            return JSONResponse({"error": {"message": "busy", "type": "ServiceUnavailableError", "param": None,
                                           "code": script.status}}, status_code=script.status,
                                headers={"Retry-After": "7"} if script.status == 503 else None)
        sp = body["sampling_params"]
        out, finish = script.tokens(sp.get("max_tokens", 16), sp.get("ignore_eos", False))
        k = sp.get("logprobs")
        rid = f"generate-tokens-{request.headers.get('x-request-id') or body['request_id']}"
        prompt = len(body["token_ids"])

        async def frames():
            try:
                for i in range(0, len(out), script.chunk):
                    part = out[i:i + script.chunk]
                    last = i + script.chunk >= len(out)
                    choice = {"index": 0, "logprobs": {"content": [_lp(t, k) for t in part]} if k is not None else None,
                              "finish_reason": finish if last else None, "token_ids": part}
                    if script.delay_s:
                        await asyncio.sleep(script.delay_s)
                    yield f"data: {json.dumps({'request_id': rid, 'choices': [choice]})}\n\n"
                if (body.get("stream_options") or {}).get("include_usage"):
                    usage = {"prompt_tokens": prompt, "completion_tokens": len(out), "total_tokens": prompt + len(out),
                             "prompt_tokens_details": {"cached_tokens": script.cached_tokens}}
                    yield f"data: {json.dumps({'request_id': rid, 'choices': [], 'usage': usage})}\n\n"
                yield "data: [DONE]\n\n"
            except asyncio.CancelledError:
                script.disconnected.append(rid)
                raise

        if not body.get("stream"):
            choice = {"index": 0, "logprobs": None, "finish_reason": finish, "token_ids": out}
            return JSONResponse({"request_id": rid, "choices": [choice], "prompt_logprobs": None,
                                 "kv_transfer_params": None})
        return StreamingResponse(frames(), media_type="text/event-stream")

    async def abort(request: Request) -> Response:
        body = await request.json()
        if body.get("request_ids") is None:
            return JSONResponse({"detail": "Missing 'request_ids' in request body"}, status_code=400)
        script.aborts.extend(body["request_ids"])
        return Response(status_code=200)

    return Starlette(routes=[Route("/inference/v1/generate", generate, methods=["POST"]),
                             Route("/abort_requests", abort, methods=["POST"]),
                             Route("/health", _health(script)), Route("/v1/models", _models("vllm-model"))])


def sglang_app(script: FleetScript) -> Starlette:
    async def generate(request: Request) -> Response:
        body = await request.json()
        try:
            _check(SGLANG_REQUEST_FIELDS, body, "GenerateReqInput")
            _check(SGLANG_SAMPLING_FIELDS, body["sampling_params"], "SamplingParams")
            assert all(isinstance(t, int) for t in body["input_ids"])
        except (ValueError, KeyError, AssertionError) as err:
            return JSONResponse({"error": {"message": str(err)}}, status_code=400)
        script.requests.append({"body": body})
        if script.status != 200:
            return JSONResponse({"error": {"message": "busy"}}, status_code=script.status)
        sp = body["sampling_params"]
        out, finish = script.tokens(sp.get("max_new_tokens", 128), sp.get("ignore_eos", False))
        rid = body.get("rid")
        prompt = len(body["input_ids"])
        k = body.get("top_logprobs_num", 0)
        visible = out[:-1] if finish == "stop" and script.trim_stop else out

        async def frames():
            try:
                sent = 0
                for i in range(0, len(out), script.chunk):
                    end = min(i + script.chunk, len(out))
                    last = end >= len(out)
                    upto = visible[:end]
                    meta = {"id": rid, "prompt_tokens": prompt, "completion_tokens": end,
                            "cached_tokens": script.cached_tokens, "weight_version": "default",
                            "finish_reason": ({"type": "stop", "matched": script.eos} if finish == "stop"
                                              else {"type": "length", "length": end}) if last else None}
                    ids = upto[sent:] if script.incremental else upto
                    if body.get("return_logprob"):
                        lo = i if script.incremental else 0
                        meta["output_token_logprobs"] = [[-0.25, t, None] for t in out[lo:end]]
                        meta["output_top_logprobs"] = [[[-0.25 - j, t + j, None] for j in range(k)] for t in out[lo:end]]
                    sent = len(upto)
                    if script.delay_s:
                        await asyncio.sleep(script.delay_s)
                    yield f"data: {json.dumps({'output_ids': ids, 'meta_info': meta})}\n\n"
                yield "data: [DONE]\n\n"
            except asyncio.CancelledError:
                script.disconnected.append(rid)
                raise

        return StreamingResponse(frames(), media_type="text/event-stream")

    async def abort(request: Request) -> Response:
        body = await request.json()
        script.aborts.append(body.get("rid"))
        return Response(status_code=200)

    return Starlette(routes=[Route("/generate", generate, methods=["POST"]),
                             Route("/abort_request", abort, methods=["POST"]),
                             Route("/health", _health(script)), Route("/v1/models", _models("sglang-model"))])


def _health(script: FleetScript):
    async def health(request: Request) -> Response:
        return Response(status_code=200 if script.healthy else 503)
    return health


def _models(name: str):
    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": name, "object": "model", "created": 0,
                                                         "owned_by": "x", "max_model_len": 4096}]})
    return models
