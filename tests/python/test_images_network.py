"""URL images against the network cases recorded from the official package.

`tests/conformance/images/network_cases.json` (recorded by `generate_images.py --network`) holds
the resolver's retries (which failures are retried, how many attempts, the server's hits), the
fetcher's default size limit and statuses of 500 and more, and proxy handling from the
environment (a recording forward proxy on 127.0.0.1), each with the destination-filter calls.
Every case runs through the same runner the recorder used and must give the official outcome;
only `waits` (the measured seconds between retries) is left out of the comparison, because the
suite asserts no wall-clock times. The Rust test `retry_schedule.rs` checks our back-off schedule
against those recorded waits instead.

Our resolver replays the cases with short retry waits (`retry_waits`, the runner's
`REPLAY_RETRY_WAITS`); one test here checks that the default resolver keeps the official schedule's
attempts. Cases without proxy variables run concurrently, each against its own local server; cases
with proxy variables change the process environment, so they run one after another.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from image_case_runner import proxy_environment, run_case
from image_http_server import serve

CORPUS = Path(__file__).resolve().parents[1] / "conformance" / "images"
CASES = json.loads((CORPUS / "network_cases.json").read_text())
INPUTS = CORPUS / "inputs"


def _without_waits(outcome: dict) -> dict:
    return {k: v for k, v in outcome.items() if k != "waits"}


def _run_alone(case: dict) -> dict:
    server = serve(INPUTS)
    try:
        return run_case(case, INPUTS, server)
    finally:
        server.shutdown()
        server.proxy.shutdown()


def test_network_cases_without_proxy_variables_match_official():
    cases = [c for c in CASES if "env" not in c]
    with ThreadPoolExecutor(max_workers=len(cases)) as pool:
        outcomes = list(pool.map(_run_alone, cases))
    differing = [
        f"{c['name']}: ours {_without_waits(o)} official {_without_waits(c['official'])}"
        for c, o in zip(cases, outcomes)
        if _without_waits(o) != _without_waits(c["official"])
    ]
    assert not differing, "\n".join(differing)


@pytest.fixture(scope="module")
def server():
    s = serve(INPUTS)
    yield s
    s.shutdown()
    s.proxy.shutdown()


@pytest.mark.parametrize("case", [c for c in CASES if "env" in c], ids=lambda c: c["name"])
def test_proxy_case_matches_official(case, server):
    ours = run_case(case, INPUTS, server)
    assert _without_waits(ours) == _without_waits(case["official"])


def test_corpus_covers_retries_and_proxies():
    retried = [c for c in CASES if c["op"] == "resolve_url" and len(c["official"]["hits"]) >= 4]
    proxied = [c for c in CASES if c["official"].get("proxy_hits")]
    assert len(CASES) >= 45 and len(retried) >= 8 and len(proxied) >= 6, (len(CASES), len(retried), len(proxied))


def test_public_destinations_only_ignores_the_proxy_and_never_retries_a_refusal(server):
    """Ours: the deny filter refuses loopback even when a proxy is configured (a filtered fetcher
    uses no proxy), and the resolver does not retry the refusal."""
    import deepseek_recipe as d

    with proxy_environment({"HTTP_PROXY": server.proxy.url, "ALL_PROXY": server.proxy.url}):
        fetcher = d.ReqwestImageFetcher().with_public_destinations_only()
        server.hits.clear()
        server.proxy.hits.clear()
        resolver = d.ImageResolver(fetcher, d.OpenCvImagePreprocessor())
        quota = d.ImageQuota()
        with pytest.raises(d.ImageError) as err:
            resolver.resolve([d.UrlImageSource(server.base + "/status/500", "high", path="p")], quota)
    assert err.value.kind == "DestinationRejected" and not err.value.is_retryable
    assert server.hits == [] and server.proxy.hits == []
    assert (quota.image_count(), quota.byte_size()) == (0, 0)


def test_the_default_resolver_retries_on_the_official_schedule(server):
    """Without `retry_waits`: 4 attempts of a 500, 0.3 s, 0.6 s and 1 s apart (at least that long in all)."""
    import time

    import deepseek_recipe as d

    server.hits.clear()
    resolver = d.ImageResolver(d.ReqwestImageFetcher(), d.OpenCvImagePreprocessor())
    start = time.monotonic()
    with pytest.raises(d.ImageError) as err:
        resolver.resolve([d.UrlImageSource(server.base + "/status/500", "high", path="p")], d.ImageQuota())
    assert time.monotonic() - start >= 1.9
    assert err.value.is_retryable and server.hits == ["/status/500"] * 4


@pytest.mark.parametrize("waits,hits", [([], 1), ([0.0], 2), ([0.001] * 16, 17)])
def test_retry_waits_set_the_attempts(server, waits, hits):
    import deepseek_recipe as d

    server.hits.clear()
    resolver = d.ImageResolver(d.ReqwestImageFetcher(), d.OpenCvImagePreprocessor(), retry_waits=waits)
    with pytest.raises(d.ImageError):
        resolver.resolve([d.UrlImageSource(server.base + "/status/503", "high", path="p")], d.ImageQuota())
    assert len(server.hits) == hits


@pytest.mark.parametrize("waits,message", [([0.1] * 17, "at most 16"), ([-1.0], "not a wait"),
                                           ([float("nan")], "not a wait"), ([61.0], "not a wait")])
def test_retry_waits_out_of_bounds_are_refused(waits, message):
    import deepseek_recipe as d

    with pytest.raises(ValueError, match=message):
        d.ImageResolver(d.ReqwestImageFetcher(), d.OpenCvImagePreprocessor(), retry_waits=waits)
