"""The image request limits and their order against the cases recorded from the official package
(`tests/conformance/images/limit_cases.json`, see `docs/image-deviations.md`): count, URL length,
per-image and total bytes with the quota, data-URL sizes before decoding, which failure is named,
the fetch budget, redirects ending on error statuses. Plus: the limits hold in bounded memory
(100,000 sources, a data URL far over the limit), and the image entry points word argument type
errors as officially."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from image_case_runner import run_case
from image_http_server import serve

CORPUS = Path(__file__).resolve().parents[1] / "conformance" / "images"
CASES = json.loads((CORPUS / "limit_cases.json").read_text())


@pytest.fixture(scope="module")
def server():
    s = serve(CORPUS / "inputs")
    yield s
    s.shutdown()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_limit_case_matches_official(case, server):
    ours, official = run_case(case, CORPUS / "inputs", server), case["official"]
    if "hits" in official:
        # Several failing downloads: the official resolver cancels the others when one fails,
        # so whether they reached the server is a race; which paths were asked is not.
        ours["hits"], official = sorted(set(ours["hits"])), {**official, "hits": sorted(set(official["hits"]))}
    assert ours == official


def test_corpus_covers_every_limit():
    def calls(case):
        ok = case["official"].get("ok")
        return ok.get("calls", []) if isinstance(ok, dict) else []
    kinds = {c.get("error", {}).get("kind") for case in CASES for c in calls(case)}
    assert {"TooManyImages", "UrlTooLong", "ImageTooLarge", "TotalSizeTooLarge", "InvalidDataUrl", "Fetch",
            "FetchStatus", "EmptyImage", "InvalidUrl"} <= kinds, kinds


BOUNDED = textwrap.dedent(r'''
    import sys
    sys.path.insert(0, HERE)
    from peak_memory import peak_rss_bytes, reset_peak
    import deepseek_recipe as d
    r = d.ImageResolver(d.ReqwestImageFetcher(), d.OpenCvImagePreprocessor())
    many = [d.BytesImageSource(b"x", path="m")] * 100_000
    huge = [d.DataUrlImageSource("data:image/png;base64," + "A" * (1 << 30), path="u")]
    out = []
    for sources in (many, huge):
        reset_peak()
        before = peak_rss_bytes()
        try:
            r.resolve(sources, d.ImageQuota())
        except d.ImageError as e:
            out.append([e.kind, (peak_rss_bytes() - before) >> 20])
    print(out)
''').replace("HERE", repr(str(Path(__file__).resolve().parent)))


def test_limits_are_checked_in_bounded_memory():
    """100,000 images are refused by their count, a 1 GiB data URL (768 MiB decoded) by the
    size its length allows, each before any source is copied or decoded: resolving adds a few MB
    at most, whatever the input's size."""
    out = subprocess.run([sys.executable, "-c", BOUNDED], capture_output=True, text=True, check=True).stdout
    (many_kind, many_mb), (huge_kind, huge_mb) = eval(out)  # noqa: S307 - our own child's output
    assert (many_kind, huge_kind) == ("TooManyImages", "ImageTooLarge")
    assert many_mb < 16 and huge_mb < 16, out


def test_argument_types_are_worded_as_officially():
    import deepseek_recipe as d

    f, p = d.ReqwestImageFetcher(), d.OpenCvImagePreprocessor()
    r = d.ImageResolver(f, p)
    for call, message in [
        (lambda: f.fetch(1), "argument 'url': 'int' object cannot be cast as 'str'"),
        (lambda: d.PreprocessOptions(b"high", 1, 1), "argument 'detail': 'bytes' object cannot be cast as 'str'"),
        (lambda: p.preprocess(1, d.PreprocessOptions("high", 1, 1)), "argument 'data': 'int' object cannot be cast as 'Sequence'"),
        (lambda: p.preprocess(b"", 1), "argument 'options': 'int' object cannot be cast as 'PreprocessOptions'"),
        (lambda: d.MultiModalData([1]), "argument 'images': 'int' object cannot be cast as 'ImageInfo'"),
        (lambda: r.resolve([1], d.ImageQuota()), "argument 'sources': 'int' object cannot be cast as 'ImageSource'"),
        (lambda: r.resolve(None, d.ImageQuota()), "argument 'sources': 'NoneType' object cannot be cast as 'Sequence'"),
        (lambda: r.resolve([], 1), "argument 'quota': 'int' object cannot be cast as 'ImageQuota'"),
        (lambda: d.ImageResolver(1, p), "argument 'fetcher': 'int' object cannot be cast as 'ReqwestImageFetcher'"),
        (lambda: d.ImageResolver(f, 1),
         "argument 'preprocessor': 'int' object cannot be cast as 'OpenCvImagePreprocessor'"),
    ]:
        with pytest.raises(TypeError) as e:
            call()
        assert str(e.value) == message
