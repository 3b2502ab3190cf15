"""Run one image case against whichever `deepseek_recipe` is importable.

Used by the fixture recorder inside the official side venv and by our tests, so both run the
same code. A case is a dict (see `generate_images.py`); the outcome is a JSON-able dict:
`{"ok": ...}` or `{"error": {"class", "kind", "retryable", "message"}}`. The local server's
address is written as `{base}` in URLs and messages.
"""

from __future__ import annotations

import base64
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
    return f"data:{mime};base64,{body}"


def _source(spec: dict, inputs: Path, base: str):
    detail, path = spec.get("detail", "high"), spec.get("path", "")
    t = spec["type"]
    if t == "bytes":
        return d.BytesImageSource((inputs / spec["input"]).read_bytes() if spec.get("input") else b"", detail, path=path)
    if t == "data_url":
        url = spec["url"] if "url" in spec else _data_url(spec, inputs)
        return d.DataUrlImageSource(url, detail, path=path)
    return d.UrlImageSource(spec["url"].replace("{base}", base), detail, path=path)


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
            resolver = d.ImageResolver(d.ReqwestImageFetcher(), d.OpenCvImagePreprocessor())
            quota = d.ImageQuota()
            calls = []
            for call in case["calls"]:
                sources = [_source(s, inputs, base) for s in call]
                try:
                    mm = resolver.resolve(sources, quota)
                    calls.append({"ok": {"sizes": [[i.width, i.height] for i in mm.images],
                                         "adjustment": mm.image_token_adjustment()}})
                except Exception as e:  # noqa: BLE001 - the error is the outcome
                    calls.append(_error(e, base))
                calls[-1]["quota"] = [quota.image_count(), quota.byte_size()]
            return {"ok": {"calls": calls}}
        if op == "fetch":
            fetcher = (d.ReqwestImageFetcher.with_max_bytes(case["max_bytes"]) if case.get("max_bytes") is not None
                       else d.ReqwestImageFetcher())
            seen: list = []
            if case.get("filter"):
                fetcher = fetcher.with_destination_filter(_filter(case["filter"], seen))
            if server:
                server.hits.clear()
            try:
                body = fetcher.fetch(case["url"].replace("{base}", base))
                out = {"ok": {"len": len(body)}}
            except Exception as e:  # noqa: BLE001
                out = _error(e, base)
            out["hits"] = list(server.hits) if server else []
            out["filter_calls"] = seen
            return out
        raise ValueError(f"unknown op {op}")
    except Exception as e:  # noqa: BLE001
        return _error(e, base)
