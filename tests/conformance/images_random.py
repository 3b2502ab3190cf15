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
# Truncated JPEGs (baseline and progressive) and other cut files, then headers claiming huge sides.
TRUNCATED = ["cut30_photo.jpg", "cut70_photo.jpg", "cut97_photo.jpg", "cut30_progressive.jpg", "cut70_progressive.jpg",
             "cut97_progressive.jpg", "no_eoi_photo.jpg", "no_eoi_progressive.jpg", "cut30_still.gif", "cut70_still.gif",
             "cut97_still.gif", "cut30_lossy.webp", "cut70_lossy.webp", "cut97_lossy.webp", "truncated.jpg"]
HUGE = ["claims_100000x100000.png", "claims_65535x65535.png", "claims_65535x65535.gif", "claims_2147483648x1.png",
        "claims_4294967295x1.png", "claims_8193x10.gif", "claims_8193x10.jpg", "claims_9000x9000.jpg", "claims_9000x1.png",
        "claims_9000x1_bad_ihdr_crc.png"]
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
    if c < 0.65:
        return {"type": "bytes", "input": r.choice(FAILING)}
    if c < 0.75:
        return {"type": "bytes", "input": r.choice(TRUNCATED + HUGE)}
    if c < 0.9:
        return {"type": "bytes", "input": r.choice(WIDE)}
    if c < 0.95:
        return {"type": "bytes", "input": ""}
    # Over or near the 32 MiB per-image limit (zero bytes after a small image).
    return {"type": "bytes", "input": "size_1x1.png", "pad": r.choice([32 * MIB - 200, 32 * MIB, 32 * MIB + 1, 22 * MIB])}


def _data_url(r):
    c = r.random()
    spec = {"type": "data_url", "input": r.choice(CHEAP_OK + WIDE[:2] + FAILING[:4] + TRUNCATED[:3] + HUGE[:3])}
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
        return {"type": "url", "url": "{base}/" + r.choice(
            ["img/size_1x1.png", "img/junk.bin", "status/404", "redirect-status/1/404", "img/missing.png",
             "img/claims_8193x1.png", "redirect-status/3/403", "redirect-status/1/410", "redirect-status/2/429",
             "redirect-status/1/304", "redirect/2/size_2x1.png", "img/" + r.choice(TRUNCATED + HUGE + WIDE)])}
    if c < 0.4:
        # Retried (about 2 s): an error status from 500 at the end of redirects, too many redirects.
        return {"type": "url", "url": "{base}/" + r.choice(["redirect-status/2/500", "redirect-status/1/503",
                                                           "redirect-status/11/404"])}
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
        # (100,000 sources cost seconds to build on either side, and behave as 601 do: rarely.)
        n = r.choice([13, 14, 15, 16, 30] + ([599, 600, 601] if heavy else [601, 602, 650]))
        if r.random() < 0.03:
            n = 100000
        head = {"type": "bytes", "input": r.choice(["size_1x1.png"] * 3 + ["junk.bin", "size_8192x1.png"]),
                "path": r.choice(PATHS), "repeat": n}
        return [head] + [_source(r) for _ in range(r.randint(0, 2))]
    if c < 0.22:
        # Cumulative quotas: a share of the 600 images or of the 64 MiB in each of several calls.
        # (Each image a call accepts costs a decode and a WebP encode officially: large counts
        # that the quota keeps are rare.)
        if r.random() < 0.5:
            return [{"type": "bytes", "input": "size_1x1.png", "path": r.choice(PATHS),
                     "repeat": r.choice([1, 5, 14, 15] * 8 + [299, 300, 301])}]
        return [{"type": "bytes", "input": "size_1x1.png", "path": r.choice(PATHS),
                 "pad": r.choice([16 * MIB, 21 * MIB, 22 * MIB - 100, 32 * MIB - 100]), "repeat": r.choice([1, 1, 2, 3])}]
    if c < 0.27:
        # Many images of every kind in one call (over 14, so the 4,096 side limit applies).
        return [_source(r) for _ in range(r.randint(10, 30))]
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


def _run_side(python, record, cases, inputs, tmp, tag, env=None):
    """Start one recorder process (`record`, `_record_images.py`) on `cases`; return the process
    and the file it writes its outcomes into."""
    import json
    import subprocess
    from pathlib import Path

    spec = Path(tmp) / f"{tag}.json"
    spec.write_text(json.dumps(cases))
    proc = subprocess.Popen([str(python), str(record), str(spec), str(inputs), tmp], env=env)
    return proc, spec


def run_differential(cases, jobs=2):
    """Run `cases` in both packages, each side split into `jobs` recorder processes (each with
    its own local server, all started at once, so that retry waits overlap and each process
    pays its start once for many cases); return the cases with `official` and `ours` outcomes."""
    import json
    import sys
    import tempfile
    from pathlib import Path

    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here))
    from official_venv import ensure_official_venv, official_env

    official_python = ensure_official_venv()
    inputs, record = here / "images" / "inputs", here / "_record_images.py"
    jobs = max(1, min(jobs, len(cases)))
    chunks = [cases[k::jobs] for k in range(jobs)]
    with tempfile.TemporaryDirectory() as tmp:
        running = []
        for k, chunk in enumerate(chunks):
            running.append(("official", _run_side(official_python, record, chunk, inputs, tmp, f"official{k}",
                                                  official_env())))
            running.append(("ours", _run_side(sys.executable, record, chunk, inputs, tmp, f"ours{k}")))
        outcomes = {"official": {}, "ours": {}}
        for side, (proc, spec) in running:
            if proc.wait() != 0:
                raise RuntimeError(f"{side} recorder failed with status {proc.returncode}")
            for case in json.loads(spec.read_text()):
                outcomes[side][case["name"]] = case["official"]
    return [dict(c, official=outcomes["official"][c["name"]], ours=outcomes["ours"][c["name"]]) for c in cases]


def _seeds(text):
    """`7`, `101-120` or `1,5,9`: the seeds to run."""
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


if __name__ == "__main__":
    import argparse
    import json
    import time

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("n", type=int, nargs="?", default=200, help="cases per seed")
    ap.add_argument("seeds", nargs="?", default="1", help="a seed, a range A-B or a list A,B,C")
    ap.add_argument("--jobs", type=int, default=2, help="recorder processes per side (default 2)")
    args = ap.parse_args()
    seeds = _seeds(args.seeds)
    cases = [c for seed in seeds for c in random_cases(seed, args.n)]
    start = time.monotonic()
    done = run_differential(cases, args.jobs)
    bad = {seed: 0 for seed in seeds}
    for case in done:
        ours, official = case["ours"], case["official"]
        if "hits" in official:
            ours["hits"], official["hits"] = sorted(set(ours["hits"])), sorted(set(official["hits"]))
        if ours != official:
            bad[int(case["name"].split()[1])] += 1
            short = {k: v for k, v in case.items() if k not in ("official", "ours")}
            print("=" * 80)
            print(json.dumps(short)[:1200])
            print("  expected", json.dumps(official)[:1500])
            print("  actual  ", json.dumps(ours)[:1500])
    for seed in seeds:
        print(f"seed {seed}: {bad[seed]} of {args.n} differ")
    print(f"{sum(bad.values())} of {len(done)} differ ({len(seeds)} seeds, {time.monotonic() - start:.0f} s)")
