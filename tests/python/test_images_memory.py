"""Peak memory of preprocessing one 8192×8192 16-bit PNG (under 1 MB on disk), measured in a
subprocess: the official package needs about 1 GB for it; ours decodes row by row into an 8-bit
buffer and must stay under 400 MB (see docs/image-deviations.md)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

LIMIT_MB = 400

SCRIPT = textwrap.dedent(r'''
    import struct, sys, zlib
    sys.path.insert(0, HERE)
    from peak_memory import peak_rss_bytes, reset_peak
    import deepseek_recipe as d
    w = h = 8192
    def chunk(t, b):
        return struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b) & 0xFFFFFFFF)
    comp = zlib.compressobj(9)
    row = b"\x00" + bytes(range(256)) * (w * 6 // 256)
    idat = b"".join(comp.compress(row) for _ in range(h)) + comp.flush()
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0))
           + chunk(b"IDAT", idat) + chunk(b"IEND", b""))
    del idat, comp
    reset_peak()
    before = peak_rss_bytes() // 1024
    info = d.OpenCvImagePreprocessor().preprocess(png, d.PreprocessOptions("high", 8192, 512))
    after = peak_rss_bytes() // 1024
    print(len(png), before, after, info.width, info.height)
''').replace("HERE", repr(str(Path(__file__).resolve().parent)))


def test_16_bit_8192_png_peak_memory():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True).stdout.split()
    size, before_kb, after_kb, w, h = map(int, out)
    assert size < 2_000_000
    assert (w, h) == (1302, 1302)
    assert after_kb / 1024 < LIMIT_MB, f"peak RSS {after_kb / 1024:.0f} MB (before preprocessing {before_kb / 1024:.0f} MB)"
