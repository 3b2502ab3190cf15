"""Run one image case against whichever `deepseek_recipe` is importable.

Used by the fixture recorder inside the official side venv and by our tests, so both run the
same code. A case is a dict (see `generate_images.py`); the outcome is a JSON-able dict:
`{"ok": ...}` or `{"error": {"class", "kind", "retryable", "message"}}`. The local server's
address is written as `{base}` in URLs and messages, its proxy's as `{proxy}`.

Network cases (`fetch`, `resolve_url`) run with the proxy variables of the environment cleared,
then set to the case's `env` (if any) around the fetcher's construction (or only after it, with
`env_after_construction`) and the call; they report the requests the server and the proxy saw and
the destination-filter calls (the server's hits sorted when a case has several URLs, since the
official resolver fetches them concurrently). `resolve_url` also reports `waits`, the seconds
between the server's hits (timing evidence only: tests do not compare it).
"""

from __future__ import annotations

import base64
import contextlib
import os
import urllib.parse
from pathlib import Path

import deepseek_recipe as d


def _error(e: BaseException, base: str) -> dict:
    return {"error": {
        "class": type(e).__name__,
        "kind": getattr(e, "kind", None),
        "retryable": getattr(e, "is_retryable", None),
        "message": str(e).replace(base, "{base}"),
    }}


def _data_url(spec: dict, inputs: Path) -> str:
    raw = (inputs / spec["input"]).read_bytes() if "input" in spec else b""
    mime = spec.get("mime", "image/png")
    enc = spec.get("encoding", "b64")
    if enc == "pct":
        return f"data:{mime}," + "".join(f"%{b:02X}" for b in raw)
    body = base64.b64encode(raw).decode()
    if enc == "b64nopad":
        body = body.rstrip("=")
    elif enc == "urlsafe":
        body = base64.urlsafe_b64encode(raw).decode()
    elif enc == "ws":
        body = "\n".join(body[i:i + 76] for i in range(0, len(body), 76)) + " \t"
    elif enc == "b64pct":
        body = urllib.parse.quote(body, safe="")
    return f"data:{mime};base64,{body}{spec.get('suffix_of_b64', '')}"


def _source(spec: dict, inputs: Path, base: str):
    """One source. Large inputs are made here rather than stored: `pad` appends that many zero
    bytes to a bytes input; a data URL with `body` = [char, n] has `char * n` (then `suffix`) after
    `url`; a URL
    with `length` is padded with `a` to that many bytes."""
    detail, path = spec.get("detail", "high"), spec.get("path", "")
    t = spec["type"]
    if t == "bytes":
        data = (inputs / spec["input"]).read_bytes() if spec.get("input") else b""
        return d.BytesImageSource(data + bytes(spec.get("pad", 0)), detail, path=path)
    if t == "data_url":
        url = spec["url"] if "url" in spec else _data_url(spec, inputs)
        if "body" in spec:
            char, n = spec["body"]
            url += char * n + spec.get("suffix", "")
        return d.DataUrlImageSource(url, detail, path=path)
    url = spec["url"].replace("{base}", base)
    if "length" in spec:
        url += "a" * (spec["length"] - len(url.encode()))
    return d.UrlImageSource(url, detail, path=path)


def _sources(call: list, inputs: Path, base: str) -> list:
    """The sources of one call; a spec with `repeat` stands for that many copies."""
    return [_source(s, inputs, base) for s in call for _ in range(s.get("repeat", 1))]


def _filter(name: str | None, seen: list):
    if name == "allow":
        return lambda host, addr: seen.append([host, addr]) or True
    if name == "deny":
        return lambda host, addr: (seen.append([host, addr]), False)[1]
    if name == "raise":
        def f(host, addr):
            raise RuntimeError("boom")
        return f
    if name == "int":
        return lambda host, addr: 1
    return None


PROXY_VARIABLES = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy",
                   "NO_PROXY", "no_proxy", "REQUEST_METHOD")


@contextlib.contextmanager
def proxy_environment(values: dict):
    """Set exactly `values` among the proxy variables for the duration; restore afterwards."""
    saved = {k: os.environ.get(k) for k in PROXY_VARIABLES}
    for k in PROXY_VARIABLES:
        os.environ.pop(k, None)
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _network_call(case: dict, server, call):
    """Build the case's fetcher under its environment and run `call(fetcher, seen)`; return the
    outcome with the server's and the proxy's hits and the filter calls."""
    base = server.base if server else "http://127.0.0.1:0"
    proxy = getattr(server, "proxy", None)
    env = {k: v.replace("{proxy}", proxy.url if proxy else "").replace("{base}", base)
           for k, v in case.get("env", {}).items()}
    after = case.get("env_after_construction", False)
    seen: list = []

    def make():
        fetcher = (d.ReqwestImageFetcher.with_max_bytes(case["max_bytes"]) if case.get("max_bytes") is not None
                   else d.ReqwestImageFetcher())
        if case.get("filter"):
            fetcher = fetcher.with_destination_filter(_filter(case["filter"], seen))
        return fetcher

    if server:
        server.hits.clear()
        server.hit_times.clear()
        server.counts.clear()
    if proxy:
        proxy.hits.clear()
    with proxy_environment({}):
        fetcher = make() if after else None
        with proxy_environment(env):
            fetcher = fetcher or make()
            try:
                out = call(fetcher)
            except Exception as e:  # noqa: BLE001 - the error is the outcome
                out = _error(e, base)
    out["hits"] = list(server.hits) if server else []
    if len(case.get("urls", [])) > 1:  # the official resolver fetches sources concurrently
        out["hits"].sort()
    out["filter_calls"] = seen
    if "env" in case:
        out["proxy_hits"] = [[m, t.replace(base, "{base}")] for m, t in proxy.hits] if proxy else []
    if case["op"] == "resolve_url" and server:
        times = server.hit_times
        out["waits"] = [round(b - a, 3) for a, b in zip(times, times[1:])]
    return out


def _convert(case: dict) -> dict:
    """Convert a request body (`format`, `body`); report the image sources or the 400 message."""
    import json

    cls = {"chat": d.ChatCompletionRequest, "responses": d.ResponsesRequest, "messages": d.MessagesRequest}[case["format"]]
    try:
        request = cls(json.dumps(case["body"])).convert(d.ConversionOptions())
    except d.ConversionError as e:
        return {"error": json.loads(e.body)["error"]["message"]}
    sources = [s for m in request.conversation.messages for s in (getattr(m, "image_sources", None) or [])]
    return {"ok": [[s.kind, s.data_url or s.url, s.path] for s in sources]}


def _request_body(case: dict, inputs: Path, base: str) -> dict:
    """A request of `case["format"]` whose one user message carries `case["parts"]` (source specs:
    data URLs and URLs), `repeat` times over."""
    urls = []
    for spec in case["parts"]:
        if spec["type"] == "data_url":
            urls.append(_data_url(spec, inputs))
        else:
            url = spec["url"].replace("{base}", base)
            urls.append(url + "a" * (spec["length"] - len(url.encode())) if "length" in spec else url)
    urls = urls * case.get("repeat", 1)
    model = case.get("model", "DeepSeek-V4.1-Flash")
    if case["format"] == "chat":
        parts = [{"type": "image_url", "image_url": {"url": u}} for u in urls]
        return {"model": model, "messages": [{"role": "user", "content": parts + [{"type": "text", "text": "?"}]}]}
    if case["format"] == "responses":
        parts = [{"type": "input_image", "image_url": u} for u in urls]
        return {"model": model, "input": [{"role": "user", "content": parts + [{"type": "input_text", "text": "?"}]}]}
    blocks = []
    for u in urls:
        head, _, data = u.partition(";base64,")
        if u.startswith("data:") and data:
            blocks.append({"type": "image", "source": {"type": "base64", "media_type": head[5:] or "image/png", "data": data}})
        else:
            blocks.append({"type": "image", "source": {"type": "url", "url": u}})
    return {"model": model, "max_tokens": 10, "messages": [{"role": "user", "content": blocks + [{"type": "text", "text": "?"}]}]}


def _convert_resolve(case: dict, inputs: Path, base: str) -> dict:
    """Convert the case's request, then resolve its image sources with one resolver and quota."""
    import json

    cls = {"chat": d.ChatCompletionRequest, "responses": d.ResponsesRequest, "messages": d.MessagesRequest}[case["format"]]
    try:
        request = cls(_request_body(case, inputs, base)).convert(d.ConversionOptions())
    except d.ConversionError as e:
        return {"conversion_error": json.loads(e.body)["error"]["message"]}
    sources = [s for m in request.conversation.messages for s in (getattr(m, "image_sources", None) or [])]
    quota = d.ImageQuota()
    try:
        mm = _resolver(d.ReqwestImageFetcher()).resolve(sources, quota)
        out = {"ok": {"sizes": [[i.width, i.height] for i in mm.images], "adjustment": mm.image_token_adjustment()}}
    except Exception as e:  # noqa: BLE001 - the error is the outcome
        out = _error(e, base)
    out["quota"] = [quota.image_count(), quota.byte_size()]
    return out


#: The retry waits our resolver replays the cases with: the official schedule's shape (3 waits, 4 attempts) at
#: a hundredth of its length, since the cases compare attempts, hits and errors, never times (the official
#: waits themselves are pinned by the Rust test `retry_schedule.rs`, against the recorded ones).
REPLAY_RETRY_WAITS = [0.003, 0.006, 0.01]


def _resolver(fetcher):
    try:
        return d.ImageResolver(fetcher, d.OpenCvImagePreprocessor(), retry_waits=REPLAY_RETRY_WAITS)
    except TypeError:  # the official package (the recorder's side): its one schedule
        return d.ImageResolver(fetcher, d.OpenCvImagePreprocessor())


def run_case(case: dict, inputs: Path, server=None, keep: dict | None = None) -> dict:
    """Run `case`; official WebP outputs of `keep_webp` cases go into `keep[name]`."""
    base = server.base if server else "http://127.0.0.1:0"
    op = case["op"]
    try:
        if op == "tokens":
            w, h = case["size"]
            return {"ok": {"adjustment": d.MultiModalData([d.ImageInfo(b"", w, h)]).image_token_adjustment()}}
        if op == "options":
            o = d.PreprocessOptions(*case["options"])
            return {"ok": [o.detail, o.max_dimension_px, o.low_detail_max_dimension_px]}
        if op == "preprocess":
            data = (inputs / case["input"]).read_bytes() if case.get("input") else b""
            info = d.OpenCvImagePreprocessor().preprocess(data, d.PreprocessOptions(*case["options"]))
            if keep is not None and case.get("keep_webp"):
                keep[case["name"]] = info.data
            tokens = d.MultiModalData([info]).image_token_adjustment() + 1
            return {"ok": {"width": info.width, "height": info.height, "tokens": tokens,
                           "riff": info.data[:4] == b"RIFF" and info.data[8:12] == b"WEBP"}}
        if op == "resolve":
            fetcher = (d.ReqwestImageFetcher.with_max_bytes(case["max_bytes"]) if "max_bytes" in case
                       else d.ReqwestImageFetcher())
            resolver = _resolver(fetcher)
            quota = d.ImageQuota()
            calls = []
            if server:
                server.hits.clear()
            for call in case["calls"]:
                sources = _sources(call, inputs, base)
                try:
                    mm = resolver.resolve(sources, quota)
                    calls.append({"ok": {"sizes": [[i.width, i.height] for i in mm.images],
                                         "adjustment": mm.image_token_adjustment()}})
                except Exception as e:  # noqa: BLE001 - the error is the outcome
                    calls.append(_error(e, base))
                calls[-1]["quota"] = [quota.image_count(), quota.byte_size()]
            if case.get("hits"):
                return {"ok": {"calls": calls}, "hits": sorted(server.hits) if server else []}
            return {"ok": {"calls": calls}}
        if op == "convert":
            return _convert(case)
        if op == "convert_resolve":
            return _convert_resolve(case, inputs, base)
        if op == "fetch":
            return _network_call(case, server, lambda f: {"ok": {"len": len(f.fetch(case["url"].replace("{base}", base)))}})
        if op == "resolve_url":
            def resolve(fetcher):
                resolver = _resolver(fetcher)
                quota = d.ImageQuota()
                sources = [d.UrlImageSource(u.replace("{base}", base), "high", path=f"messages.{i}.content[0]")
                           for i, u in enumerate(case["urls"])]
                try:
                    mm = resolver.resolve(sources, quota)
                    out = {"ok": {"sizes": [[i.width, i.height] for i in mm.images],
                                  "adjustment": mm.image_token_adjustment()}}
                except Exception as e:  # noqa: BLE001
                    out = _error(e, base)
                out["quota"] = [quota.image_count(), quota.byte_size()]
                return out
            return _network_call(case, server, resolve)
        raise ValueError(f"unknown op {op}")
    except Exception as e:  # noqa: BLE001
        return _error(e, base)
