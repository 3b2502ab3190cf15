"""The image API against the cases recorded from the official package.

Every case of `tests/conformance/images/cases.json` runs through the same runner the recorder
used (`image_case_runner.py`), with a local HTTP server on 127.0.0.1 for the URL cases; the
outcome must equal the official one (sizes, token adjustments, quotas, error class / kind /
retryability / message, server hits, destination-filter calls). Cases where we deliberately
differ are listed in `DEVIATIONS` and checked for our behaviour instead (see
`docs/image-deviations.md`). Pixels are compared by the Rust test `conformance_images.rs`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from image_case_runner import run_case
from image_http_server import serve

CORPUS = Path(__file__).resolve().parents[1] / "conformance" / "images"
CASES = json.loads((CORPUS / "cases.json").read_text())

# Official results we do not reproduce on purpose (docs/image-deviations.md): option values of
# 2^31 and more are refused; an animated PNG with damaged compressed data is an error, not
# whatever the official decoder salvages (or a crash).
DEVIATIONS = {"options ['high', 2147483648, 1]", "format apng_corrupt"}


@pytest.fixture(scope="module")
def server():
    s = serve(CORPUS / "inputs")
    yield s
    s.shutdown()


@pytest.mark.parametrize("case", [c for c in CASES if c["name"] not in DEVIATIONS], ids=lambda c: c["name"])
def test_case_matches_official(case, server):
    ours = run_case(case, CORPUS / "inputs", server)
    assert ours == case["official"]


def test_corpus_is_broad():
    ops = {}
    for c in CASES:
        ops[c["op"]] = ops.get(c["op"], 0) + 1
    assert len(CASES) >= 200 and ops["preprocess"] >= 100 and ops["fetch"] >= 30, ops


def test_option_values_from_2_31_are_rejected():
    import deepseek_recipe as d

    with pytest.raises(ValueError, match="max_dimension_px must be at most 2147483647"):
        d.PreprocessOptions("high", 2**31, 1)
    with pytest.raises(ValueError, match="low_detail_max_dimension_px"):
        d.PreprocessOptions("low", 1, 2**31)
    assert d.PreprocessOptions("high", 2**31 - 1, 0).max_dimension_px == 2**31 - 1


def test_corrupt_animated_png_is_an_error():
    case = next(c for c in CASES if c["name"] == "format apng_corrupt")
    ours = run_case(case, CORPUS / "inputs")
    assert ours["error"]["kind"] in ("Decode", "EmptyImage") and ours["error"]["class"] == "ImageError"


def test_public_destinations_only_refuses_loopback_on_every_hop(server):
    import deepseek_recipe as d

    png = (CORPUS / "inputs" / "rgb.png").read_bytes()
    open_fetcher = d.ReqwestImageFetcher()
    assert open_fetcher.fetch(server.base + "/img/rgb.png") == png  # official default: no filter
    guarded = open_fetcher.with_public_destinations_only()
    for url in [server.base + "/img/rgb.png", server.base + "/redirect/2/rgb.png",
                server.base.replace("127.0.0.1", "localhost") + "/img/rgb.png"]:
        server.hits.clear()
        with pytest.raises(d.ImageError) as err:
            guarded.fetch(url)
        assert err.value.kind == "DestinationRejected" and not err.value.is_retryable
        assert server.hits == []
