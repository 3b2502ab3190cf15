"""Random image requests for the image stage's limits, official vs ours.

    python tests/conformance/images_random.py N [SEED]

Each case is run by `image_case_runner.run_case` in both packages (the official one in its side
venv, each side with its own local image server): `resolve` cases call `ImageResolver.resolve`
directly, one to three calls sharing a quota; `convert_resolve` cases convert a Chat, Responses
or Messages body and resolve the converted request's image sources. The sources mix what the
limits are about: image counts around 14, 15, 600 and 601 (cheap sources, so that a case costs
little), images at and over the side limits (header-only files claiming their size), inline
bytes and data URLs at and over 32 MiB and totals over 64 MiB, base64 bodies with missing, extra
or stray padding, whitespace, escapes and other alphabets, URLs at and over 8,192 bytes, other
schemes, and downloads that fail (404, a redirect ending on 404 or 500). Strict: every
difference is printed; the last line counts them.
"""

from __future__ import annotations

import random

# Inputs of tests/conformance/images/inputs/ by what they cost to resolve.
CHEAP_OK = ["size_1x1.png", "size_2x1.png", "size_40x30.png", "still.gif", "gray.png", "palette.png"]
FAILING = ["junk.bin", "truncated.png", "truncated.jpg", "header_only.png", "zero.png", "image.bmp",
           "claims_8193x1.png", "claims_1x8193.png", "claims_2147483647x1.png", "claims_65535x65535.jpg",
           "claims_9000x9000.gif", "claims_8192x8192.png", "cut30_photo.jpg", "no_eoi_photo.jpg"]
# Left out: anim_corrupt.png, whose damaged pixels the official decoder salvages or crashes on
# (docs/image-deviations.md, "Malformed files never crash the process").
# Sides over 4,096 (refused in requests of more than 14 images) that decode cheaply.
WIDE = ["size_8192x1.png", "size_1x8192.png", "size_8192x10.png", "size_3000x10.png"]
PATHS = ["m", "", "messages.0.content[1]", "input[2]"]
BODY_SUFFIXES = ["", "=", "==", "===", "====", "A", "A=", "AA", "AA=", " ", "\n", "%3D", "@"]
MIB = 1 << 20


def _bytes(r):
    c = r.random()
    if c < 0.5:
        return {"type": "bytes", "input": r.choice(CHEAP_OK)}
    if c < 0.75:
        return {"type": "bytes", "input": r.choice(FAILING)}
    if c < 0.9:
        return {"type": "bytes", "input": r.choice(WIDE)}
    if c < 0.95:
        return {"type": "bytes", "input": ""}
    # Over or near the 32 MiB per-image limit (zero bytes after a small image).
    return {"type": "bytes", "input": "size_1x1.png", "pad": r.choice([32 * MIB - 200, 32 * MIB, 32 * MIB + 1, 22 * MIB])}


def _data_url(r):
    c = r.random()
    spec = {"type": "data_url", "input": r.choice(CHEAP_OK + WIDE[:2] + FAILING[:4])}
    if c < 0.5:
        spec["encoding"] = r.choice(["b64", "b64", "b64nopad", "urlsafe", "ws", "b64pct", "pct"])
        spec["mime"] = r.choice(["image/png"] * 6 + ["image/PNG", "image/jpg", "image/gif", "image/bmp", "text/plain", ""])
        return spec
    if c < 0.85:
        # The base64 of an image, then something after it (extra or broken padding, junk).
        return {"type": "data_url", "input": spec["input"], "suffix_of_b64": r.choice(BODY_SUFFIXES)}
    # Long bodies: the size the body can decode to is checked before decoding.
    n = r.choice([4 * (32 * MIB // 3), 4 * (32 * MIB // 3) + 4, 45 * MIB, 1000])
    return {"type": "data_url", "url": "data:image/png;base64,", "body": ["A", n], "suffix": r.choice(["", "=", "=="])}


def _url(r):
    c = r.random()
    if c < 0.35:
        return {"type": "url", "url": "{base}/" + r.choice(["img/size_1x1.png", "img/junk.bin", "status/404",
                                                          "redirect-status/1/404", "img/missing.png", "img/claims_8193x1.png"])}
    if c < 0.4:
        return {"type": "url", "url": "{base}/redirect-status/2/500"}  # retried: about 2 s
    if c < 0.8:
        return {"type": "url", "url": r.choice(["{base}/img/size_1x1.png?", "http://127.0.0.1:9/a?", "HTTP://x/"]),
                "length": r.choice([8191, 8192, 8193, 9000])}
    return {"type": "url", "url": r.choice(["ftp://x/a.png", "httpx://a", "http:/x", " http://x/a.png", "file:///etc/passwd",
                                            "data:image/png;base64,AAAA", ""])}


def _source(r):
    c = r.random()
    spec = _bytes(r) if c < 0.55 else _data_url(r) if c < 0.8 else _url(r)
    spec["path"] = r.choice(PATHS)
    spec["detail"] = r.choice(["high", "high", "low", "auto", "original"])
    return spec


def _call(r, heavy):
    c = r.random()
    if c < 0.15:
        # Many images: counts at and around the limits, of a cheap source, then perhaps others.
        n = r.choice([13, 14, 15, 16, 30] + ([599, 600, 601] if heavy else [601, 100000]))
        head = {"type": "bytes", "input": r.choice(["size_1x1.png"] * 3 + ["junk.bin", "size_8192x1.png"]),
                "path": r.choice(PATHS), "repeat": n}
        return [head] + [_source(r) for _ in range(r.randint(0, 2))]
    return [_source(r) for _ in range(r.randint(1, 5))]


def _chat_part(spec):
    return {"type": "image_url", "image_url": {"url": spec}}


def _convert_case(r):
    """A request of one format whose image parts come from the source generator (data URLs and
    URLs only: those a request can carry), converted and then resolved."""
    fmt = r.choice(["chat", "responses", "messages"])
    parts = []
    for _ in range(r.randint(1, 4)):
        s = _data_url(r) if r.random() < 0.7 else _url(r)
        if s.get("type") == "data_url" and "body" in s:
            s = {"type": "data_url", "input": "size_1x1.png", "suffix_of_b64": r.choice(BODY_SUFFIXES)}
        parts.append(s)
    repeat = r.choice([1, 1, 1, 5, 15])
    return {"op": "convert_resolve", "format": fmt, "parts": parts, "repeat": repeat,
            "model": r.choice(["DeepSeek-V4.1-Flash"] * 3 + ["DeepSeek-V4-Pro"])}


def random_cases(seed: int, n: int):
    r = random.Random(seed)
    cases = []
    for i in range(n):
        if r.random() < 0.25:
            case = _convert_case(r)
        else:
            heavy = r.random() < 0.02
            case = {"op": "resolve", "calls": [_call(r, heavy) for _ in range(r.choice([1, 1, 1, 2, 3]))]}
        case["name"] = f"random {seed} {i}"
        cases.append(case)
    return cases


if __name__ == "__main__":
    import json
    import sys
    import tempfile
    from pathlib import Path

    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here))
    from image_case_runner import run_case
    from image_http_server import serve
    from official_venv import run_in_official

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    cases = random_cases(seed, n)
    inputs = here / "images" / "inputs"
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "cases.json"
        spec.write_text(json.dumps(cases))
        run_in_official(here / "_record_images.py", str(spec), str(inputs), tmp, capture=False)
        expected = json.loads(spec.read_text())
    server = serve(inputs)
    bad = 0
    for case in expected:
        ours, official = run_case(case, inputs, server), case["official"]
        if "hits" in official:
            ours["hits"], official["hits"] = sorted(set(ours["hits"])), sorted(set(official["hits"]))
        if ours != official:
            bad += 1
            short = {k: v for k, v in case.items() if k != "official"}
            print("=" * 80)
            print(json.dumps(short)[:1200])
            print("  expected", json.dumps(official)[:1500])
            print("  actual  ", json.dumps(ours)[:1500])
    server.shutdown()
    print(f"{bad} of {len(expected)} differ")
