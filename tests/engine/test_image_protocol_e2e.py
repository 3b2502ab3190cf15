"""Requests with real images, end to end through the codec and a tiny DeepSeek V4.1 checkpoint.

The checkpoint is the seeded tiny V4.1 model written with the real tokenizer and vocabulary
(`write_tiny_v41`, as in `test_v41_model.py`). The requests carry committed images from the
official conformance inputs (`tests/conformance/images/inputs/`): Chat requests as data URLs
(high and low detail) or a URL on a local HTTP server, a Messages request as a base64 block
(thinking off: with thinking on, V4.1 Messages prompts open with `<｜System｜>`, which the 0.3.0
tokenizer lacks, so they fail to encode, as the official package's do). The test resolves and
preprocesses the images with our image API itself, checks that the engine's protocol path counts
the same image tokens (which equal the official package's recorded token counts) with one image
placeholder per image in the prompt, then serves all requests in one batch and checks the parsed
responses: their usage includes the image tokens and their completions are the engine's greedy
tokens. The engine is text-only: the placeholders go in as token IDs and the pixels are not used.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import deepseek_recipe as dr
import pytest
from deepseek_engine import LLM, SamplingParams
from deepseek_engine.entrypoints.protocol_api import ProtocolEngine, ProtocolError
from deepseek_engine.testing.tiny_checkpoint_v41 import write_tiny_v41
from encoding_spec import tokenizer_path
from image_http_server import serve

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "tests" / "conformance" / "images"

IMAGE_PLACEHOLDER_ID = 129279  # `<｜image｜>` in the real vocabulary
MODEL = "DeepSeek-V4.1-Flash"
MAX_TOKENS = 2  # each step of the tiny real-vocabulary model takes about a second on a CPU
OFFICIAL = {c["name"]: c["official"] for c in json.loads((IMAGES / "cases.json").read_text())}


def official_adjustment(case: str) -> int:
    """Image tokens beyond the placeholder, as the official package counted them."""
    return OFFICIAL[case]["ok"]["tokens"] - 1


def data_url(name: str, mime: str) -> str:
    return f"data:{mime};base64," + base64.b64encode((IMAGES / "inputs" / name).read_bytes()).decode()


def chat(parts: list, **kw) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": parts}], "max_tokens": MAX_TOKENS,
            "temperature": 0, "thinking": {"type": "disabled"}, **kw}


@pytest.fixture(scope="module")
def llm(tmp_path_factory) -> LLM:
    folder = tmp_path_factory.mktemp("v41_images") / "ckpt"
    write_tiny_v41(folder, tokenizer_json=tokenizer_path(), vocab_size=129280, vision=True, seed=1)
    return LLM(str(folder), max_model_len=512)


@pytest.fixture(scope="module")
def server():
    s = serve(IMAGES / "inputs")
    yield s
    s.shutdown()
    s.proxy.shutdown()


REQUESTS = {"chat.completions": "ChatCompletionRequest", "messages": "MessagesRequest"}
USAGE = {"chat.completions": ("prompt_tokens", "completion_tokens"), "messages": ("input_tokens", "output_tokens")}


def our_image_tokens(api: str, body: dict, fetcher=None) -> tuple[list, int]:
    """Resolve a body's images with our image API directly: (sizes, token adjustment)."""
    conv = getattr(dr, REQUESTS[api])(body).convert(dr.ConversionOptions())
    sources = [s for m in conv.conversation.messages for s in m.image_sources]
    resolver = dr.ImageResolver(fetcher or dr.ReqwestImageFetcher().with_public_destinations_only(),
                                dr.OpenCvImagePreprocessor())
    quota = dr.ImageQuota()
    images = resolver.resolve(sources, quota)
    assert quota.image_count() == len(sources) and all(i.data[:4] == b"RIFF" for i in images.images)
    return [(i.width, i.height) for i in images.images], images.image_token_adjustment()


def test_chat_requests_with_images_end_to_end(llm, server):
    one = chat([{"type": "text", "text": "What is in this picture?"},
                {"type": "image_url", "image_url": {"url": data_url("rgb.png", "image/png")}}])
    two = chat([{"type": "image_url", "image_url": {"url": data_url("photo_1024x768.jpg", "image/jpeg"),
                                                    "detail": "low"}},
                {"type": "text", "text": "and"},
                {"type": "image_url", "image_url": {"url": data_url("shot_390x844.png", "image/png")}}])
    url = chat([{"type": "text", "text": "Look:"},
                {"type": "image_url", "image_url": {"url": server.base + "/img/rgb.png"}}])
    png = base64.b64encode((IMAGES / "inputs" / "rgb.png").read_bytes()).decode()
    messages = {"model": MODEL, "max_tokens": MAX_TOKENS, "temperature": 0, "thinking": {"type": "disabled"},
                "messages": [{"role": "user", "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}},
                    {"type": "text", "text": "Describe it."}]}]}
    open_fetcher = dr.ReqwestImageFetcher()  # the local server is on loopback
    expected = [  # API, body, sizes, official token adjustment, number of images
        ("chat.completions", one, [(630, 476)], official_adjustment("format png_rgb"), 1),
        ("chat.completions", two, [(630, 476), (392, 854)],
         official_adjustment("format photo_1024x768 low") + official_adjustment("format shot_390x844"), 2),
        ("chat.completions", url, [(630, 476)], official_adjustment("format png_rgb"), 1),
        ("messages", messages, [(630, 476)], official_adjustment("format png_rgb"), 1),
    ]
    engine = ProtocolEngine(llm, image_fetcher=open_fetcher)
    prepared = []
    for api, body, sizes, adjustment, n_images in expected:
        # Our image API alone gives the official sizes and token counts...
        assert our_image_tokens(api, body, open_fetcher) == (sizes, adjustment)
        # ...and the engine's protocol path counts the same tokens, one placeholder per image.
        prep = engine.prepare(api, body)
        assert prep.image_tokens == adjustment
        assert prep.prompt_ids.count(IMAGE_PLACEHOLDER_ID) == n_images
        prepared.append(prep)
    server.hits.clear()
    greedy = llm.generate([p.prompt_ids for p in prepared], SamplingParams(temperature=0, max_tokens=MAX_TOKENS))
    responses = engine.run([(api, body) for api, body, *_ in expected])
    assert server.hits == ["/img/rgb.png"]  # the URL image, fetched once by the engine's resolver
    for (api, *_), prep, out, resp in zip(expected, prepared, greedy, responses):
        assert isinstance(resp, dict), resp
        if api == "chat.completions":
            assert resp["object"] == "chat.completion" and resp["model"] == MODEL
            message = resp["choices"][0]["message"]
            assert message["role"] == "assistant" and isinstance(message["content"], str)
            assert resp["choices"][0]["finish_reason"] in ("length", "stop")
        else:
            assert resp["type"] == "message" and resp["role"] == "assistant"
            assert resp["stop_reason"] in ("max_tokens", "end_turn")
        prompt_key, completion_key = USAGE[api]
        assert resp["usage"][prompt_key] == len(prep.prompt_ids) + prep.image_tokens
        assert resp["usage"][completion_key] == len(out.token_ids)


def test_default_engine_refuses_loopback_image_urls(llm, server):
    body = chat([{"type": "image_url", "image_url": {"url": server.base + "/img/rgb.png"}}])
    server.hits.clear()
    with pytest.raises(ProtocolError) as err:
        ProtocolEngine(llm).prepare("chat.completions", body)
    assert err.value.status_code == 400 and "Failed to download image" in err.value.message
    assert server.hits == []
