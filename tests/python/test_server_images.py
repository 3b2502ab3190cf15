"""Images through the server (V4.1): fetched by the codec's resolver, from public addresses only
unless ``allow_private_image_urls``; counted in usage and in ``count_tokens`` alike; a refused or
broken image is a 400 in the API's envelope."""

import base64
import json
import os
import struct
import zlib

import deepseek_recipe as dr
import httpx
import pytest
from deepseek_recipe.server.app import create_app
from deepseek_recipe.server.config import ServerConfig
from server_support import LiveServer, ScriptedBackend
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route


def png(w=32, h=32) -> bytes:
    raw = b"".join(b"\x00" + b"\xff\x80\x00" * w for _ in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


@pytest.fixture(scope="module")
def v41_tokenizer():
    """The stock vocabulary plus the two control tokens V4.1 checkpoints add."""
    src = json.load(open(os.environ["DEEPSEEK_TOKENIZER_JSON"]))
    for content, i in (("<｜System｜>", 129280), ("<｜deepseek_image｜>", 129281)):
        src["added_tokens"].append({"id": i, "content": content, "single_word": False, "lstrip": False,
                                    "rstrip": False, "normalized": False, "special": True})
    return dr.Tokenizer.from_str(json.dumps(src))


@pytest.fixture(scope="module")
def image_host():
    async def image(request):
        return Response(png(), media_type="image/png")
    with LiveServer(Starlette(routes=[Route("/cat.png", image)])) as host:
        yield host


def chat(url):
    return {"model": "tiny", "thinking": {"type": "disabled"},
            "messages": [{"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                                      {"type": "image_url", "image_url": {"url": url}}]}]}


def messages(url):
    return {"model": "tiny", "max_tokens": 20, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": url}}, {"type": "text", "text": "What is this?"}]}]}


def test_images(v41_tokenizer, image_host):
    data_url = "data:image/png;base64," + base64.b64encode(png()).decode()
    private = image_host.url + "/cat.png"
    for allow in (False, True):
        backend = ScriptedBackend()
        config = ServerConfig(model_version="v41", allow_private_image_urls=allow)
        with LiveServer(create_app(backend, config, tokenizer=v41_tokenizer)) as s:
            r = httpx.post(s.url + "/v1/chat/completions", json=chat(data_url), timeout=30)
            assert r.status_code == 200, r.text
            ids = len(backend.requests[-1].prompt_token_ids)
            assert r.json()["usage"]["prompt_tokens"] > ids  # each image counts its tokens
            r = httpx.post(s.url + "/v1/chat/completions", json=chat(private), timeout=30)
            assert r.status_code == (200 if allow else 400), r.text
            r = httpx.post(s.url + "/v1/messages", json=messages(private), timeout=30)
            assert r.status_code == (200 if allow else 400)
            if allow:
                billed = r.json()["usage"]["input_tokens"]
                body = {k: v for k, v in messages(private).items() if k != "max_tokens"}
                counted = httpx.post(s.url + "/v1/messages/count_tokens", json=body, timeout=30).json()
                assert counted == {"input_tokens": billed}
            else:
                assert r.json()["type"] == "error"
            r = httpx.post(s.url + "/v1/chat/completions", json=chat("data:image/png;base64,AAAA"), timeout=30)
            assert r.status_code == 400 and "error" in r.json()
