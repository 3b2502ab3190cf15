"""Record the image fixtures from the official deepseek-recipe 0.2.0.

Run from the repository root with our own Python (it needs Pillow and numpy to draw the
inputs); the cases run inside the official side venv (see `official_venv.py`):

    python tests/conformance/generate_images.py            # everything
    python tests/conformance/generate_images.py --network  # only images/network_cases.json
    python tests/conformance/generate_images.py --limits   # only images/limit_cases.json

Writes
* `images/inputs/`: the input files (formats, sizes around every threshold, malformed files);
* `images/cases.json`: every case with the official outcome (sizes, token counts, errors,
  quotas, fetch hits and destination-filter calls against a local server on 127.0.0.1);
* `images/official/NAME.webp`: the official output of the pixel-comparison cases;
* `images/network_cases.json`: the resolver's retries and back-off, the fetcher's default size
  limit, statuses of 500 and more, and proxy handling (`HTTP_PROXY` and friends against a
  recording proxy on 127.0.0.1), with the server's hits, the proxy's hits and the
  destination-filter calls of each case. These need only the committed inputs.
* `images/limit_cases.json`: the request limits (count, URL length, per-image and total bytes,
  data-URL sizes, the fetch budget) and the order they are checked in; also only the committed
  inputs (large payloads are made by the runner).
"""

from __future__ import annotations

import io
import json
import shutil
import struct
import sys
import zlib
from pathlib import Path

try:  # drawing the inputs needs them; `--network` does not
    import numpy as np
    from PIL import Image
except ImportError:
    np = Image = None

HERE = Path(__file__).resolve().parent
OUT = HERE / "images"
INPUTS = OUT / "inputs"
OFFICIAL = OUT / "official"


# ---------------------------------------------------------------------------------------------
# Inputs


def photo(w: int, h: int, seed: int) -> np.ndarray:
    """A photo-like RGB picture: smooth colour fields, edges and a little noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.zeros((h, w, 3), np.float32)
    for c in range(3):
        fx, fy, ph = rng.uniform(1, 6, 3)
        img[..., c] = 128 + 90 * np.sin(x / max(w, 1) * fx * 6.28 + ph) * np.cos(y / max(h, 1) * fy * 6.28)
    for _ in range(6):
        cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(3, max(4, min(w, h) / 3))
        mask = (x - cx) ** 2 + (y - cy) ** 2 < r * r
        img[mask] = rng.uniform(0, 255, 3)
    img += rng.normal(0, 6, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def screenshot(w: int, h: int, seed: int) -> np.ndarray:
    """A screenshot-like picture: flat panels, thin lines and text-like dashes."""
    rng = np.random.default_rng(seed)
    img = np.full((h, w, 3), 245, np.uint8)
    img[: max(1, h // 12)] = (40, 60, 90)
    for _ in range(40):
        x0, y0 = rng.integers(0, max(1, w - 2)), rng.integers(0, max(1, h - 2))
        img[y0:y0 + rng.integers(1, 4), x0:x0 + rng.integers(5, max(6, w // 4))] = rng.integers(0, 80, 3)
    return img


def save(name: str, data: bytes) -> str:
    (INPUTS / name).write_bytes(data)
    return name


def pil_bytes(img: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def flat_png(w: int, h: int, value: int = 0x50) -> bytes:
    """A grey PNG written by hand (tiny even for huge sizes)."""
    def chunk(t, b):
        return struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b) & 0xFFFFFFFF)
    comp = zlib.compressobj(9)
    row = b"\x00" + bytes([value]) * w
    raw = b"".join(comp.compress(row) for _ in range(h)) + comp.flush()
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", raw) + chunk(b"IEND", b""))


def make_inputs() -> dict:
    if INPUTS.exists():
        shutil.rmtree(INPUTS)
    INPUTS.mkdir(parents=True)
    f = {}
    p = photo(320, 240, 1)
    rgb = Image.fromarray(p)
    f["png_rgb"] = save("rgb.png", pil_bytes(rgb, "PNG"))
    f["png_gray"] = save("gray.png", pil_bytes(rgb.convert("L"), "PNG"))
    f["png_la"] = save("gray_alpha.png", pil_bytes(rgb.convert("LA"), "PNG"))
    rgba = rgb.convert("RGBA")
    alpha = np.tile(np.linspace(0, 255, 320, dtype=np.uint8), (240, 1))
    rgba.putalpha(Image.fromarray(alpha))
    f["png_rgba"] = save("rgba.png", pil_bytes(rgba, "PNG"))
    f["png_palette"] = save("palette.png", pil_bytes(rgb.convert("P", palette=Image.ADAPTIVE, colors=64), "PNG"))
    pal = rgb.convert("P", palette=Image.ADAPTIVE, colors=16)
    f["png_palette_trns"] = save("palette_trns.png", pil_bytes(pal, "PNG", transparency=3))
    a16 = (np.asarray(p).astype(np.uint16) * 257 + np.arange(320, dtype=np.uint16)[None, :, None] % 200)
    f["png_gray16"] = save("gray16.png", png16_rgb(a16[..., :1]))
    f["png_rgb16"] = save("rgb16.png", png16_rgb(a16))
    frames = [Image.fromarray(photo(200, 150, s)) for s in (2, 3, 4)]
    f["apng"] = save("anim.png", pil_bytes(frames[0], "PNG", save_all=True, append_images=frames[1:], duration=100))
    apng = bytearray((INPUTS / "anim.png").read_bytes())
    idat = apng.find(b"IDAT")
    apng[idat + 40: idat + 48] = b"\xff" * 8
    f["apng_corrupt"] = save("anim_corrupt.png", bytes(apng))
    f["jpeg"] = save("photo.jpg", pil_bytes(rgb, "JPEG", quality=90))
    f["jpeg_progressive"] = save("progressive.jpg", pil_bytes(rgb, "JPEG", quality=85, progressive=True))
    f["jpeg_gray"] = save("gray.jpg", pil_bytes(rgb.convert("L"), "JPEG", quality=90))
    f["jpeg_exif"] = save("exif_rotated.jpg", pil_bytes(Image.fromarray(photo(300, 200, 9)), "JPEG", quality=90,
                                                          exif=exif_orientation(6)))
    f["gif"] = save("still.gif", pil_bytes(rgb.convert("P", palette=Image.ADAPTIVE), "GIF"))
    f["gif_anim"] = save("anim.gif", pil_bytes(frames[0].convert("P"), "GIF", save_all=True,
                                               append_images=[fr.convert("P") for fr in frames[1:]], duration=100, loop=0))
    f["gif_transparent"] = save("transparent.gif", pil_bytes(pal, "GIF", transparency=3))
    f["webp_lossy"] = save("lossy.webp", pil_bytes(rgb, "WEBP", quality=80))
    f["webp_lossless"] = save("lossless.webp", pil_bytes(rgb, "WEBP", lossless=True))
    f["webp_alpha"] = save("alpha.webp", pil_bytes(rgba, "WEBP", quality=80))
    f["webp_anim"] = save("anim.webp", pil_bytes(frames[0], "WEBP", save_all=True, append_images=frames[1:], duration=100))
    f["bmp"] = save("image.bmp", pil_bytes(rgb, "BMP"))
    f["tiff"] = save("image.tiff", pil_bytes(rgb, "TIFF"))
    f["junk"] = save("junk.bin", b"hello, not an image" * 4)
    f["png_truncated"] = save("truncated.png", (INPUTS / "rgb.png").read_bytes()[:300])
    f["png_header_only"] = save("header_only.png", (INPUTS / "rgb.png").read_bytes()[:33])
    f["jpeg_truncated"] = save("truncated.jpg", (INPUTS / "photo.jpg").read_bytes()[:500])
    f["gif_truncated"] = save("truncated.gif", (INPUTS / "still.gif").read_bytes()[:40])
    f["webp_truncated"] = save("truncated.webp", (INPUTS / "lossy.webp").read_bytes()[:60])
    f["gif_magic_only"] = save("magic.gif", b"GIF89a")
    f["png_zero"] = save("zero.png", png_with_size(flat_png(1, 1), 0, 0))
    for i, (w, h) in enumerate([(1920, 1080), (1080, 1920), (1024, 768), (4032, 3024)]):
        f[f"photo_{w}x{h}"] = save(f"photo_{w}x{h}.jpg", pil_bytes(Image.fromarray(photo(w, h, 20 + i)), "JPEG", quality=85))
    for i, (w, h) in enumerate([(1280, 800), (2560, 1440), (390, 844)]):
        f[f"shot_{w}x{h}"] = save(f"shot_{w}x{h}.png", pil_bytes(Image.fromarray(screenshot(w, h, 30 + i)), "PNG"))
    for w, h in [(40, 30), (3000, 40), (40, 3000), (700, 300), (200, 900)]:
        f[f"pic_{w}x{h}"] = save(f"pic_{w}x{h}.png", pil_bytes(Image.fromarray(photo(w, h, w + h)), "PNG"))
    return f


def png_with_size(data: bytes, w: int, h: int) -> bytes:
    """Rewrite the IHDR size of a PNG (and its CRC)."""
    ihdr = bytearray(data[8:33])
    ihdr[8:16] = struct.pack(">II", w, h)
    ihdr[21:25] = struct.pack(">I", zlib.crc32(bytes(ihdr[4:21])) & 0xFFFFFFFF)
    return data[:8] + bytes(ihdr) + data[33:]


def png16_rgb(a: np.ndarray) -> bytes:
    """A 16-bit PNG (grey or RGB) written by hand from an (h, w, 1|3) array."""
    h, w, channels = a.shape
    def chunk(t, b):
        return struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + a[y].astype(">u2").tobytes() for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 2 if channels == 3 else 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def exif_orientation(value: int) -> bytes:
    ex = Image.Exif()
    ex[0x0112] = value
    return ex.tobytes()


# ---------------------------------------------------------------------------------------------
# Cases

SIZES = [(1, 1), (2, 1), (1, 2), (14, 14), (15, 15), (40, 30), (543, 544), (544, 544), (545, 545), (546, 546),
         (532, 560), (520, 560), (546, 532), (640, 480), (800, 600), (1000, 1000), (1260, 1260), (1261, 1261),
         (1302, 1302), (1303, 1303), (1920, 1080), (1080, 1920), (3000, 10), (10, 3000), (8192, 10), (10, 8192),
         (8192, 1), (1, 8192), (8193, 10), (5000, 5000), (2000, 500), (1, 1000), (1000, 1)]


def cases(f: dict) -> list:
    out = []

    def add(name, **case):
        out.append({"name": name, **case})

    for w, h in SIZES:
        name = f"size_{w}x{h}.png"
        if not (INPUTS / name).exists():
            save(name, flat_png(w, h))
        add(f"size {w}x{h}", op="preprocess", input=name, options=["high", 8192, 512])
    for det in ["low", "high", "original", "auto"]:
        for w, h in [(800, 600), (2000, 500), (513, 100), (512, 512), (100, 5000)]:
            name = f"size_{w}x{h}.png"
            if not (INPUTS / name).exists():
                save(name, flat_png(w, h))
            add(f"detail {det} {w}x{h}", op="preprocess", input=name, options=[det, 8192, 512])
    for mx, low in [(100, 512), (545, 512), (544, 512), (0, 0), (8192, 0), (8192, 1), (8192, 256), (8192, 1000),
                    (2 ** 31 - 1, 512)]:
        add(f"options max={mx} low={low}", op="preprocess", input="size_800x600.png", options=["low", mx, low])
    for key, name in f.items():
        keep = not key.startswith(("photo_4032", "shot_2560"))
        add(f"format {key}", op="preprocess", input=name, options=["high", 8192, 512], keep_webp=keep)
        if key.startswith(("photo", "shot", "pic", "png_rgb")):
            add(f"format {key} low", op="preprocess", input=name, options=["low", 8192, 512], keep_webp=True)
    add("empty bytes", op="preprocess", input="", options=["high", 8192, 512])
    for o in [["x", 1, 1], ["high", -1, 1], ["high", 2 ** 31, 1], ["high", 2 ** 32, 1], ["high", 1, 2 ** 40],
              ["auto", 0, 0]]:
        add(f"options {o}", op="options", options=o)
    for w, h in [(0, 0), (0, 5), (5, 0), (1, 1), (3, 4), (640, 480), (1024, 1024), (4000, 3000), (16809, 11841),
                 (1, 100000), (100000, 1), (1, 2000), (2000, 1), (10 ** 6, 10 ** 6), (158, 10000), (10000, 158),
                 (2 ** 31, 1), (16384, 16384)]:
        add(f"tokens {w}x{h}", op="tokens", size=[w, h])
    png = f["png_rgb"]
    b = lambda **kw: {"type": "bytes", "input": png, "path": "messages.0.content[1]", **kw}  # noqa: E731
    du = lambda **kw: {"type": "data_url", "input": png, "path": ".messages[0]", **kw}  # noqa: E731
    add("resolve bytes", op="resolve", calls=[[b()]])
    add("resolve no path", op="resolve", calls=[[{"type": "bytes", "input": f["junk"]}]])
    add("resolve details", op="resolve", calls=[[b(detail=d) for d in ["low", "high", "original", "auto"]]])
    for enc in ["b64", "b64nopad", "urlsafe", "ws", "pct", "b64pct"]:
        add(f"data url {enc}", op="resolve", calls=[[du(encoding=enc)]])
    for mime in ["image/png", "image/jpeg", "image/gif", "image/webp", "image/jpg", "IMAGE/PNG", "image/bmp",
                 "image/svg+xml", "text/plain", "", "application/octet-stream", "image/png;charset=utf-8"]:
        add(f"data url mime {mime!r}", op="resolve", calls=[[du(mime=mime)]])
    for url in ["data:image/png;base64,@@@@", "data:image/png;base64,", "data:image/png;base64", "http://x/y.png",
                "DATA:image/png;base64,iVBORw0KGgo=", "data:image/png;base64,iVBORw0KGgo", "not a url", "",
                "data:,", "data:image/png;base64,====", " data:image/png;base64,iVBORw0KGgo="]:
        add(f"data url raw {url!r}", op="resolve", calls=[[{"type": "data_url", "url": url, "path": "p"}]])
    add("resolve junk then good", op="resolve", calls=[[b(), {"type": "bytes", "input": f["junk"], "path": "m.1"}], [b()]])
    add("quota across calls", op="resolve", calls=[[b(), b()], [b()], [{"type": "bytes", "input": f["jpeg"], "path": "x"}]])
    add("resolve many", op="resolve", calls=[[b() for _ in range(40)]])
    add("resolve too large dims", op="resolve", calls=[[{"type": "bytes", "input": "size_8193x10.png", "path": "q"}]])
    for u in ["ftp://x/y.png", "file:///etc/passwd", "not a url", "", "http://", "{base}/img/" + png,
              "{base}/status/404", "{base}/status/500", "{base}/redirect/3/" + png]:
        add(f"resolve url {u!r}", op="resolve", calls=[[{"type": "url", "url": u, "path": "messages.0.content[0]"}]])
    for route in ["img/" + png, "status/200", "status/204", "status/301", "status/400", "status/403", "status/404",
                  "status/408", "status/429", "status/500", "status/502", "status/503", "status/504",
                  "redirect/1/" + png, "redirect/5/" + png, "redirect/6/" + png, "redirect/11/" + png, "nolocation",
                  "nolength/" + png, "img/missing.png"]:
        add(f"fetch {route}", op="fetch", url="{base}/" + route)
    size = (INPUTS / png).stat().st_size
    for mb in [0, size - 1, size, size + 1]:
        for route in ["img/", "nolength/"]:
            add(f"fetch max_bytes={mb} {route}", op="fetch", url="{base}/" + route + png, max_bytes=mb)
    for flt in ["allow", "deny", "raise", "int"]:
        add(f"fetch filter {flt}", op="fetch", url="{base}/redirect/2/" + png, filter=flt)
    add("fetch filter allow direct", op="fetch", url="{base}/img/" + png, filter="allow")
    add("fetch bad urls", op="fetch", url="ftp://x/")
    add("fetch not a url", op="fetch", url="not a url")
    return out


DEAD = "http://127.0.0.1:1"  # nothing listens on port 1: connection refused
PNG = "rgb.png"
LIMIT = 32 * 1024 * 1024


def network_cases() -> list:
    out = []

    def add(name, **case):
        out.append({"name": name, **case})

    # The resolver's retries: which failures, how many attempts, and the waits between them.
    for route in ["status/500", "status/599", "status/600", "status/429", "status/408", "status/404",
                  f"flaky/1/{PNG}", f"flaky/3/{PNG}", f"flaky/4/{PNG}", f"truncated/{PNG}", "hang",
                  f"redirect/6/{PNG}", "nolocation", "img/junk.bin", f"zeros/{LIMIT}", f"zeros/{LIMIT + 1}",
                  f"zeros-nolength/{LIMIT + 1}"]:
        add(f"resolve_url {route}", op="resolve_url", urls=["{base}/" + route])
    add("resolve_url connection refused", op="resolve_url", urls=[DEAD + "/x.png"])
    for mb, route in [(10, "img/"), (10, "nolength/")]:
        add(f"resolve_url max_bytes={mb} {route}", op="resolve_url", urls=["{base}/" + route + PNG], max_bytes=mb)
    for flt, route in [("deny", f"img/{PNG}"), ("allow", "status/500"), ("raise", f"img/{PNG}"),
                       ("allow", f"redirect/2/{PNG}")]:
        add(f"resolve_url filter {flt} {route}", op="resolve_url", urls=["{base}/" + route], filter=flt)
    add("resolve_url two sources, one failing", op="resolve_url", urls=["{base}/img/" + PNG, "{base}/status/502"])
    # The fetcher alone: one attempt, the default size limit, statuses of 500 and more.
    for route in [f"zeros/{LIMIT}", f"zeros/{LIMIT + 1}", f"zeros-nolength/{LIMIT + 1}", "status/600",
                  "status/999", f"flaky/1/{PNG}", f"truncated/{PNG}", "hang"]:
        add(f"fetch {route}", op="fetch", url="{base}/" + route)
    # Proxies from the environment.
    img = "{base}/img/" + PNG
    for label, env, url, extra in [
        ("HTTP_PROXY", {"HTTP_PROXY": "{proxy}"}, img, {}),
        ("http_proxy", {"http_proxy": "{proxy}"}, img, {}),
        ("ALL_PROXY", {"ALL_PROXY": "{proxy}"}, img, {}),
        ("HTTPS_PROXY, http url", {"HTTPS_PROXY": "{proxy}"}, img, {}),
        ("HTTPS_PROXY, https url", {"HTTPS_PROXY": "{proxy}"}, "https://127.0.0.1:1/x.png", {}),
        ("NO_PROXY=127.0.0.1", {"HTTP_PROXY": "{proxy}", "NO_PROXY": "127.0.0.1"}, img, {}),
        ("no_proxy=127.0.0.1", {"HTTP_PROXY": "{proxy}", "no_proxy": "127.0.0.1"}, img, {}),
        ("NO_PROXY=*", {"HTTP_PROXY": "{proxy}", "NO_PROXY": "*"}, img, {}),
        ("NO_PROXY=localhost", {"HTTP_PROXY": "{proxy}", "NO_PROXY": "localhost"}, img, {}),
        ("NO_PROXY=127.0.0.0/8", {"HTTP_PROXY": "{proxy}", "NO_PROXY": "127.0.0.0/8"}, img, {}),
        ("set after construction", {"HTTP_PROXY": "{proxy}"}, img, {"env_after_construction": True}),
        ("with destination filter", {"HTTP_PROXY": "{proxy}"}, img, {"filter": "allow"}),
        ("redirects", {"HTTP_PROXY": "{proxy}"}, "{base}/redirect/2/" + PNG, {}),
        ("status 500", {"HTTP_PROXY": "{proxy}"}, "{base}/status/500", {}),
        ("unreachable proxy", {"HTTP_PROXY": DEAD}, img, {}),
        ("unparsable proxy", {"HTTP_PROXY": "::not a url::"}, img, {}),
        ("CGI REQUEST_METHOD", {"HTTP_PROXY": "{proxy}", "REQUEST_METHOD": "GET"}, img, {}),
    ]:
        add(f"proxy {label}", op="fetch", url=url, env=env, **extra)
    add("proxy resolve_url status 503", op="resolve_url", urls=["{base}/status/503"], env={"HTTP_PROXY": "{proxy}"})
    add("proxy resolve_url unreachable proxy", op="resolve_url", urls=[img], env={"HTTP_PROXY": DEAD})
    return out


MIB = 1024 * 1024
TINY = "size_1x1.png"  # 67 bytes
TINY_LEN = 67


def limit_cases() -> list:
    """The request limits and their order: count, URL length, per-image and total bytes (with
    the quota across calls), data-URL sizes before decoding, which failure is named, the
    fetch budget, redirects ending on error statuses. Large inputs are made by the runner
    (`pad`, `body`, `suffix`, `length`, `repeat`), not stored."""
    out = []

    def add(name, calls, **kw):
        out.append({"name": name, "op": "resolve", "calls": calls, **kw})

    def b(path="q", pad=0, input=TINY, **kw):
        return {"type": "bytes", "input": input, "path": path, "pad": pad, **kw}

    def junk(path="q"):
        return {"type": "bytes", "input": "junk.bin", "path": path}

    def du(body, path="q", prefix="data:image/png;base64,"):
        return {"type": "data_url", "url": prefix, "body": body, "path": path}

    def url(u, path="q", **kw):
        return {"type": "url", "url": u, "path": path, **kw}

    full = 32 * MIB - TINY_LEN  # pad of an image of exactly 32 MiB
    mid = 22 * MIB
    long_url = url("http://x/", length=9009)
    missing = "{base}/img/missing.png?"
    # The image count, before anything else.
    add("count 600 junk", [[{**junk(), "repeat": 600}]])
    add("count 601", [[{**b(), "repeat": 601}]])
    add("count 601 no path", [[{**b(path=""), "repeat": 601}]])
    add("count 601 first a long url", [[long_url, {**b("m"), "repeat": 600}]])
    add("count 100000", [[{**b(), "repeat": 100000}]])
    add("count quota 599 + 2", [[{**b(), "repeat": 599}], [b("x"), b("y")]])
    add("count quota 600 + junk", [[{**b(), "repeat": 600}], [junk("x")]])
    # URL length (bytes), before any fetch.
    for n in [8192, 8193, 9000]:
        add(f"url length {n}", [[url(missing, length=n)]], hits=True)
    add("url length 8193 https", [[url("https://x/", length=8193)]])
    add("url length 8194 multibyte", [[url("https://x/" + "é" * 4092)]])
    add("url length no path", [[url("http://x/", path="", length=9000)]])
    add("url invalid no path", [[url("ftp://x/", path="")]])
    add("url invalid and long", [[url("ftp://x/", length=9000)]])
    add("url junk then long", [[junk("a"), {**long_url, "path": "b"}]])
    add("url long then 404", [[{**long_url, "path": "a"}, url("{base}/status/404", "b")]], hits=True)
    add("url 404 then long", [[url("{base}/status/404", "a"), {**long_url, "path": "b"}]], hits=True)
    add("url ftp then long", [[url("ftp://x/", "a"), {**long_url, "path": "b"}]])
    # Per-image bytes, before decoding.
    add("bytes 32 MiB", [[b(pad=full)]])
    add("bytes 32 MiB + 1", [[b(pad=full + 1)]])
    add("bytes 32 MiB + 1 no path", [[b(path="", pad=full + 1)]])
    add("bytes junk then too large", [[junk("a"), b("b", pad=full + 1)]])
    add("bytes too large then long url", [[b("a", pad=full + 1), {**long_url, "path": "b"}]])
    add("bytes 32 MiB, 32 MiB + 1", [[b(pad=full), b(pad=full + 1)]])
    add("bytes with a fetcher limit of 10 MiB", [[b(pad=20 * MIB)]], max_bytes=10 * MIB)
    # The total, with the quota across calls.
    add("total 3 x 22 MiB", [[b("a", pad=mid), b("b", pad=mid), b("c", pad=mid)]])
    add("total no path", [[b("", pad=mid), b("", pad=mid), b("", pad=mid)]])
    add("total exactly 64 MiB", [[b(pad=full), b(pad=full)]])
    for extra in [0.4, 0.6, 1.5]:
        add(f"total 64 MiB + {extra}", [[b("a", pad=full), b("b", pad=full), b("c", pad=int(extra * MIB))]])
    add("total across calls", [[b("a", pad=mid), b("b", pad=mid)], [b("c", pad=mid)], [b("d")]])
    add("total junk then over", [[junk("a"), b("b", pad=mid), b("c", pad=mid), b("d", pad=mid)]])
    add("total over then too large", [[b("a", pad=mid), b("b", pad=mid), b("c", pad=mid), b("d", pad=full + 1)]])
    add("total too large then over", [[b("a", pad=full + 1), b("b", pad=mid), b("c", pad=mid)]])
    add("total 22 22 then too large", [[b("a", pad=mid), b("b", pad=mid), b("c", pad=full + 1)]])
    add("total 600 images over", [[{**b(), "repeat": 600}], [b(pad=mid)]])
    # Data URLs: the size from the body's length, before decoding; then the decoded bytes.
    for n in [44739240, 44739243, 44739244]:
        add(f"data url base64 {n} chars", [[du(["A", n])]])
    add("data url padded over", [[du(["A", 44739242], prefix="data:image/png;base64,==")]])
    add("data url whitespace over", [[{**du(["A", 44739240]), "suffix": " " * 8}]])
    add("data url invalid and over", [[du(["A", 45 * MIB], prefix="data:image/png;base64,@")]])
    add("data url other media type and over", [[du(["A", 45 * MIB], prefix="data:image/bmp;base64,")]])
    add("data url percent over", [[du(["A", 33 * MIB], prefix="data:image/png,")]])
    add("data url percent escapes under", [[du(["%00", 40 * MIB // 3], prefix="data:image/png,")]])
    add("data url total", [[du(["A", 22 * MIB // 3 * 4], path=p) for p in "abc"]])
    # Which failure is named: the earliest source's.
    add("order bad data url then too large", [[du(["@", 2], "a"), b("b", pad=full + 1)]])
    add("order junk then bad data url", [[junk("a"), du(["@", 2], "b")]])
    add("order 404 then bad data url", [[url("{base}/status/404", "a"), du(["@", 2], "b")]], hits=True)
    add("order bad data url then 404", [[du(["@", 2], "a"), url("{base}/status/404", "b")]], hits=True)
    add("order junk then 404 404", [[junk("j"), url("{base}/status/404", "a"), url("{base}/status/404", "b")]],
        hits=True)
    add("order junk then empty", [[junk("a"), b("b", input="")]])
    add("order empty then too large", [[b("a", input=""), b("b", pad=full + 1)]])
    add("order junk then empty body", [[junk("x"), url("{base}/zeros/0", "a")]])
    add("order too large dims then junk", [[b("a", input="size_8193x10.png"), junk("b")]])
    # Image indices: earlier sources with the same path.
    add("index a b a", [[b("a"), b("b"), junk("a")]])
    add("index a a b b", [[b("a"), b("a"), b("b"), junk("b")]])
    add("index no path", [[b(""), b(""), junk("")]])
    # The fetch budget: what the inline images and the quota leave of the total.
    add("fetch budget over", [[b("a", pad=mid), b("b", pad=mid), url(f"{{base}}/zeros/{21 * MIB}", "c")]], hits=True)
    add("fetch budget under", [[b("a", pad=mid), b("b", pad=mid), url(f"{{base}}/zeros/{19 * MIB}", "c")]],
        hits=True)
    add("fetch budget url first", [[url(f"{{base}}/zeros/{21 * MIB}", "c"), b("a", pad=mid), b("b", pad=mid)]],
        hits=True)
    add("fetch budget quota", [[b("a", pad=mid), b("b", pad=mid)], [url(f"{{base}}/zeros/{21 * MIB}", "c")]],
        hits=True)
    add("fetch per-image limit with a larger fetcher limit", [[url(f"{{base}}/zeros/{40 * MIB}", "a")]],
        max_bytes=100 * MIB, hits=True)
    # Redirects that end on an error status.
    for code in [302, 400, 404, 500]:
        add(f"redirect to status {code}", [[url(f"{{base}}/redirect-status/2/{code}")]], hits=True)
    return out


def redirect_fetch_cases() -> list:
    """Which 3xx statuses redirect, and Location values that are not followable."""
    out = []
    for code in [300, 301, 302, 303, 304, 305, 307, 308]:
        for target in ["%2Fstatus%2F404", "%2Fstatus%2F500", "%2Fimg%2Frgb.png", "http%3A%2F%2F%5B%3A%3A1", "ftp%3A%2F%2Fx%2Fy"]:
            out.append({"name": f"fetch moved {code} to {target}", "op": "fetch",
                        "url": f"{{base}}/moved/{code}/{target}"})
    return out


def _jpeg_with_size(data: bytes, w: int, h: int) -> bytes:
    b, i = bytearray(data), 2
    while i < len(b):
        marker, length = b[i + 1], b[i + 2] << 8 | b[i + 3]
        if marker in (0xC0, 0xC1, 0xC2):
            b[i + 5:i + 7], b[i + 7:i + 9] = h.to_bytes(2, "big"), w.to_bytes(2, "big")
            return bytes(b)
        i += 2 + length
    raise ValueError("no SOF marker")


def dimension_cases() -> list:
    """Headers claiming sizes over the limit (checked before any pixel), and truncated files whose
    header reads but whose pixels do not. Writes its small inputs (edits of committed ones)."""
    one = flat_png(1, 1)
    jpg, prog = (INPUTS / "photo.jpg").read_bytes(), (INPUTS / "progressive.jpg").read_bytes()
    gif, webp = (INPUTS / "still.gif").read_bytes(), (INPUTS / "lossy.webp").read_bytes()
    files = {}
    for w, h in [(100000, 100000), (8193, 1), (1, 8193), (2 ** 31 - 1, 1), (65535, 65535), (8192, 8192)]:
        files[f"claims_{w}x{h}.png"] = png_with_size(one, w, h)
    for w, h in [(65535, 65535), (8193, 10), (9000, 9000)]:
        files[f"claims_{w}x{h}.jpg"] = _jpeg_with_size(jpg, w, h)
        g = bytearray(gif)
        g[6:8], g[8:10] = w.to_bytes(2, "little"), h.to_bytes(2, "little")
        files[f"claims_{w}x{h}.gif"] = bytes(g)
    for frac in [0.3, 0.7, 0.97]:
        for name, data in [("photo.jpg", jpg), ("progressive.jpg", prog), ("lossy.webp", webp), ("still.gif", gif)]:
            files[f"cut{int(frac * 100)}_{name}"] = data[: int(len(data) * frac)]
    files["no_eoi_photo.jpg"], files["no_eoi_progressive.jpg"] = jpg[:-2], prog[:-2]
    out = []
    for name, data in files.items():
        save(name, data)
        out.append({"name": f"header {name}", "op": "preprocess", "input": name, "options": ["high", 8192, 512]})
    many = {"type": "bytes", "input": "claims_8192x8192.png", "path": "m"}
    out.append({"name": "resolve header over the limit among many", "op": "resolve", "calls": [[
        {"type": "bytes", "input": "size_1x1.png", "path": "m", "repeat": 14},
        {"type": "bytes", "input": "claims_8193x1.png", "path": "m"}, many]]})
    return out


def conversion_url_cases() -> list:
    """Image URLs at conversion (V4.1 checks them, V4 does not): http(s) length and case, data-URL
    headers, media types and base64 bodies, in each API's part shape."""
    model = "DeepSeek-V4.1-Flash"
    urls = ["http://x/" + "a" * 8183, "http://x/" + "a" * 8184, "https://x/" + "é" * 4092, "HTTP://x/a.png",
            " data:image/png;base64,AAAA", "DATA:image/PNG;base64,AA==", "data:image/png;x;base64,A A\nA",
            "data:image/png;base64,%41AAA", "data:image/png;base64,", "data:image/png;base64,iVBORw0KGgp=",
            "data:image/png;base64,@@@@", "data:image/png;base64,AA=", "data:image/png;base64,AAA==",
            "data:image/png;base64,AA=A", "data:image/png;base64,AAAA%", "data:image/png;base64,A",
            "data:image/png;base64,-_-_", "data:image/bmp;base64,@@", "data:;base64,AAAA", "data:text/plain;base64,AAAA",
            "data:image/png,%89PNG", "data:image/png;BASE64,AAAA", "data:image/png;base64;x,AAAA",
            "data:image/png;base64", "ftp://x/y"]
    out = []
    for i, u in enumerate(urls):
        text = {"type": "text", "text": "look"}
        for version in [model, "DeepSeek-V4-Pro"] if i < 4 else [model]:
            out.append({"name": f"convert chat {version} {u[:40]!r}", "op": "convert", "format": "chat", "body": {
                "model": version, "messages": [{"role": "user", "content": [text, {"type": "image_url", "image_url": {"url": u}}]}]}})
        out.append({"name": f"convert responses {u[:40]!r}", "op": "convert", "format": "responses", "body": {
            "model": model, "input": [{"role": "user", "content": [{"type": "input_text", "text": "x"},
                                                                      {"type": "input_image", "image_url": u}]}]}})
        out.append({"name": f"convert messages {u[:40]!r}", "op": "convert", "format": "messages", "body": {
            "model": model, "max_tokens": 10, "messages": [{"role": "user", "content": [
                {"type": "text", "text": "x"}, {"type": "image", "source": {"type": "url", "url": u}}]}]}})
    out.append({"name": "convert chat tool message long url", "op": "convert", "format": "chat", "body": {
        "model": model, "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                                    "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "image_url", "image_url": {"url": urls[1]}}]}]}})
    return out


def _png_chunks(w: int, h: int, bad: str = "") -> bytes:
    """A `w`x`h` grey PNG (two rows of pixels at most) with a tEXt chunk; `bad` gives one chunk a
    wrong CRC (`ihdr`, `text`, `idat`, `iend`) or the zlib stream a wrong checksum (`adler`)."""
    def chunk(t, data, ok=True):
        crc = zlib.crc32(t + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + t + data + struct.pack(">I", crc if ok else crc ^ 1)
    raw = b"".join(b"\x00" + bytes([16 * (y + 1)]) * min(w, 64) for y in range(min(h, 2)))
    z = zlib.compress(raw)
    if bad == "adler":
        z = z[:-4] + bytes(b ^ 1 for b in z[-4:])
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0), bad != "ihdr")
            + chunk(b"tEXt", b"k\x00v", bad != "text") + chunk(b"IDAT", z, bad != "idat") + chunk(b"IEND", b"", bad != "iend"))


def found_by_random_cases() -> list:
    """Rules found by `images_random.py` and probing the official package (each reproduction
    recorded): more than 14 images allow sides of 4,096 at most; the count grows by runs of one
    path; a URL counts as http when it starts with `http`; PNG sizes are read from a whole IHDR
    chunk with its CRC, any u32 side; PNG checksums as libpng's defaults; base64 padding. Writes
    its small inputs."""
    files = {f"claims_{w}x{h}.png": _png_chunks(w, h) for w, h in [(2 ** 31, 1), (2 ** 32 - 1, 1), (9000, 1)]}
    files["claims_9000x1_bad_ihdr_crc.png"] = _png_chunks(9000, 1, "ihdr")
    for bad in ["ihdr", "text", "idat", "iend", "adler"]:
        files[f"crc_{bad}.png"] = _png_chunks(64, 2, bad)
    files["crc_none.png"] = _png_chunks(64, 2)
    out = []
    for name, data in files.items():
        save(name, data)
        out.append({"name": f"found header {name}", "op": "preprocess", "input": name, "options": ["high", 8192, 512]})

    def add(name, calls):
        out.append({"name": f"found {name}", "op": "resolve", "calls": calls})

    def src(input, path="m", repeat=1, **kw):
        return {"type": "bytes", "input": input, "path": path, "repeat": repeat, **kw}

    wide, tall, tiny, header_only = "size_8192x1.png", "size_1x8192.png", "size_1x1.png", "claims_8192x8192.png"
    add("14 wide", [[src(wide, repeat=14)]])
    add("15 wide", [[src(wide, repeat=15)]])
    add("15 tall", [[src(tall, repeat=15)]])
    add("14 wide then tiny", [[src(wide, repeat=14), src(tiny)]])
    add("tiny then 14 wide", [[src(tiny), src(wide, repeat=14)]])
    add("14 tiny then wide", [[src(tiny, repeat=14), src(wide, "n")]])
    add("10 wide a, 5 wide b", [[src(wide, "a", 10), src(wide, "b", 5)]])
    add("quota 10 tiny then 5 wide", [[src(tiny, repeat=10)], [src(wide, "b", 5)]])
    add("quota 14 tiny then 1 wide", [[src(tiny, repeat=14)], [src(wide, "b")]])
    add("14 header-only 8192", [[src(header_only, repeat=14)]])
    add("15 header-only 8192", [[src(header_only, repeat=15)]])
    add("15 size 3000x10", [[src("size_3000x10.png", repeat=15)]])
    add("count 600 b, a, b", [[src(tiny, "b", 600), src(tiny, "a"), src(tiny, "b")]])
    add("count 50 b, 600 a", [[src(tiny, "b", 50), src(tiny, "a", 600)]])
    add("count 602 q, m", [[src(tiny, "q", 602), src(tiny, "m")]])
    add("count 601 q, no path", [[src(tiny, "q", 601), src(tiny, "")]])
    add("count 600 q, no path", [[src(tiny, "q", 600), src(tiny, "")]])
    add("count quota 599, x x", [[src(tiny, "q", 599)], [src(tiny, "x"), src(tiny, "x")]])
    for url in ["httpx://a", "HTTP:/127.0.0.1:9/a.png", "http", "Http", " http://127.0.0.1:9/", "htt://x", "",
                "data:image/png;base64,AAAA", "httpa" + "a" * 9000]:
        add(f"url {url[:30]!r}", [[{"type": "url", "url": url, "path": "p"}]])
    for suffix in ["", "=", "==", "===", "====", "A", "A=", "AA=", " ", "%3D"]:
        add(f"data url padding {suffix!r}", [[{"type": "data_url", "input": tiny, "suffix_of_b64": suffix, "path": "d"}]])
        add(f"data url nopad padding {suffix!r}", [[{"type": "data_url", "input": "size_40x30.png", "encoding": "b64nopad",
                                                     "suffix_of_b64": suffix, "path": "d"}]])
    for fmt in ["chat", "responses", "messages"]:
        for suffix in ["", "=", "===", "A="]:
            out.append({"name": f"found convert_resolve {fmt} padding {suffix!r}", "op": "convert_resolve", "format": fmt,
                        "parts": [{"type": "data_url", "input": tiny, "suffix_of_b64": suffix}]})
        out.append({"name": f"found convert_resolve {fmt} 15 wide", "op": "convert_resolve", "format": fmt,
                    "parts": [{"type": "data_url", "input": wide}], "repeat": 15})
        out.append({"name": f"found convert_resolve {fmt} 14 wide", "op": "convert_resolve", "format": fmt,
                    "parts": [{"type": "data_url", "input": wide}], "repeat": 14})
        out.append({"name": f"found convert_resolve {fmt} http prefix", "op": "convert_resolve", "format": fmt,
                    "parts": [{"type": "url", "url": "httpx://a"}, {"type": "data_url", "input": tiny}]})
    # images_random.py 1000 309: the inline source that takes the total over 64 MiB does not
    # count in what a download before it may use (4 MiB left after 60: 3 MiB fit, 5 MiB not).
    mib = 1 << 20

    def url(u):
        return {"type": "url", "url": "{base}/" + u, "path": "m"}

    thirty = src(tiny, "p", pad=30 * mib)
    add("total crossing after url 3 MiB", [[url(f"zeros/{3 * mib}"), thirty, thirty, thirty]])
    add("total crossing after url 5 MiB", [[url(f"zeros/{5 * mib}"), thirty, thirty, thirty]])
    add("total crossing, url between", [[thirty, thirty, url(f"zeros/{3 * mib}"), thirty]])
    add("total crossing after tiny url", [[url("img/size_1x1.png"), thirty, thirty, thirty]])
    return out


def record_limits(run_in_official) -> None:
    path = OUT / "limit_cases.json"
    cases = (limit_cases() + redirect_fetch_cases() + conversion_url_cases() + dimension_cases()
             + found_by_random_cases())
    path.write_text(json.dumps(cases, indent=1))
    run_in_official(HERE / "_record_images.py", str(path), str(INPUTS), str(OFFICIAL), capture=False)
    print(f"{len(json.loads(path.read_text()))} limit cases")


def record_network(run_in_official) -> None:
    path = OUT / "network_cases.json"
    path.write_text(json.dumps(network_cases(), indent=1))
    run_in_official(HERE / "_record_images.py", str(path), str(INPUTS), str(OFFICIAL), capture=False)
    print(f"{len(json.loads(path.read_text()))} network cases")


def main() -> int:
    sys.path.insert(0, str(HERE))
    from official_venv import run_in_official

    if "--network" in sys.argv[1:]:
        record_network(run_in_official)
        return 0
    if "--limits" in sys.argv[1:]:
        record_limits(run_in_official)
        return 0
    files = make_inputs()
    spec = cases(files)
    if OFFICIAL.exists():
        shutil.rmtree(OFFICIAL)
    OFFICIAL.mkdir(parents=True)
    spec_path = OUT / "cases.json"
    spec_path.write_text(json.dumps(spec, indent=1))
    run_in_official(HERE / "_record_images.py", str(spec_path), str(INPUTS), str(OFFICIAL), capture=False)
    done = json.loads(spec_path.read_text())
    print(f"{len(done)} cases, {len(list(OFFICIAL.iterdir()))} official WebP outputs, "
          f"{len(list(INPUTS.iterdir()))} inputs")
    record_network(run_in_official)
    record_limits(run_in_official)
    return 0


if __name__ == "__main__":
    sys.exit(main())
