"""Generated tokens per second: this engine versus ``transformers``' ``generate()``.

Both run the same tiny random DeepSeek V4 checkpoint (real 129280-token vocabulary,
created once under ``.cache/`` at the repository root) on the same prompts in the
same process: greedy decoding, every prompt generating exactly ``--max-tokens``
tokens. Prints both throughputs and their ratio (the goal is >= 10x), plus the CPU
time each side used (``time.process_time``; on a shared machine the wall-clock
ratio swings with the load of other processes, the CPU-time ratio much less).
Both sides run with the same ``torch`` thread count (``--threads``, printed). This
is a measurement, not a test: nothing here asserts on time.

``--workload large`` runs a second, compute-bound workload instead: a random V4 checkpoint of a few hundred
MB (hidden 1024, 8 layers, 64 routed experts, 16384-token vocabulary; generated under ``.cache/`` on first
use, never committed). It reports decode tokens/s of both sides (prefill excluded: the time of a run with
one new token is subtracted), their ratio, this machine's measured memory read bandwidth, and the fraction
of it that the engine's decode reaches (bytes of weights and KV cache read per decode step / step time).

    .venv/bin/python benchmarks/engine.py [--prompts 32] [--max-tokens 32] [--threads 1] [--repeat 5]
    .venv/bin/python benchmarks/engine.py --workload large [--prompts 8] [--max-tokens 16]

``--workload bandwidth`` runs the bandwidth-bound workload: a random V4 checkpoint of about 1 GB in the weight
formats real checkpoints use (``--weights v4``: MXFP4 experts, FP8 e4m3 projections with 128 x 128 e8m0 block
scales, bfloat16 embedding / head; ``--weights int8``: int8 weight-only projections and experts; hidden 1024,
16 layers of sliding / CSA / HCA attention, 64 routed experts of intermediate 512, top-6;
``deepseek_engine.testing.bandwidth_checkpoint``, generated under ``.cache/`` on first use). At batch 1 and 32,
and at one thread and at one thread per physical core, it reports decode tokens/s of the engine and of
``transformers`` (fed the same weights dequantised), the bytes a decode step reads (every stored weight byte
except the embedding table, routed experts counted only for the expected number of distinct experts the batch's
tokens pick, as ``llama-bench`` counts model bytes, plus the KV rows attention reads), the machine's bandwidth
measured in the same run (a STREAM triad, one thread per physical core) and the fraction reached.

    .venv/bin/python benchmarks/engine.py --workload bandwidth [--weights v4|int8] [--batches 1,32]

``--workload v41`` runs DeepSeek V4.1 (the tiny checkpoint of ``write_tiny_v41``: hidden 32, 6 layers,
1024-token vocabulary, under ``.cache/``) three ways in one process, same prompts, greedy: the per-sequence
reference path (``DeepseekV41ForCausalLM.forward_sequence``, one sequence and one token at a time, as ``LLM``
served V4.1 before), ``LLM`` (every sequence of a step in one pass per layer), and ``LLM`` on a V4 checkpoint of
the same hidden size, depth and vocabulary. It prints tokens per CPU second of each and the two ratios (goals:
batched >= 30x the reference path, >= 0.5x V4), and checks that all V4.1 outputs agree.

    .venv/bin/python benchmarks/engine.py --workload v41 [--prompts 32] [--max-tokens 32] [--repeat 3]

``--speculative`` runs ``benchmarks/speculative.py`` instead (speculative decoding: plain
greedy vs DSpark fixed-k vs adaptive verification on the tiny V4.1 checkpoint).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
# Measure this checkout's engine, ahead of any installed copy (an editable install from
# another checkout would otherwise be what gets timed).
sys.path.insert(0, str(ROOT / "engine"))
sys.path.insert(0, str(ROOT / "kernels"))

from deepseek_engine import LLM, SamplingParams  # noqa: E402
from deepseek_engine.testing.tiny_checkpoint import ensure_tiny_checkpoint  # noqa: E402

#: The compute-bound workload's model: a few hundred MB of float32 weights.
LARGE_CONFIG = dict(
    hidden_size=1024, moe_intermediate_size=64, num_hidden_layers=8, num_attention_heads=8, head_dim=128,
    q_lora_rank=256, num_experts_per_tok=4, n_routed_experts=64,
    layer_types=["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                 "compressed_sparse_attention"] * 2,
    mlp_layer_types=["hash_moe"] + ["moe"] * 7,
    compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
    o_groups=4, o_lora_rank=128, index_n_heads=4, index_head_dim=64, index_topk=16,
    partial_rotary_factor=0.5, sliding_window=128, max_position_embeddings=4096,
    hc_sinkhorn_iters=20, bos_token_id=0, eos_token_id=1,
)
LARGE_VOCAB = 16384


def make_prompts(n: int, vocab: int, lo: int, hi: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    # Stay clear of the special tokens at the top of the vocabulary.
    return [[rng.randrange(2, min(vocab, 128000)) for _ in range(rng.randint(lo, hi))] for _ in range(n)]


@torch.inference_mode()
def run_transformers(folder: Path, prompts: list[list[int]], max_tokens: int) -> tuple[float, float, list[list[int]]]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    width = max(map(len, prompts))
    # Left padding, so every row's last prompt token sits in the last column.
    ids = torch.zeros(len(prompts), width, dtype=torch.long)
    mask = torch.zeros(len(prompts), width, dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    # No end-of-sequence token: generation runs to max_new_tokens and EOS stays an ordinary
    # token, as with the engine's ignore_eos (min_new_tokens would forbid it instead).
    model.generation_config.eos_token_id = None
    kwargs = dict(attention_mask=mask, max_new_tokens=max_tokens, do_sample=False, pad_token_id=0)
    model.generate(ids[:2, -8:], attention_mask=mask[:2, -8:], max_new_tokens=2, do_sample=False, pad_token_id=0)
    start, cpu = time.perf_counter(), time.process_time()
    out = model.generate(ids, **kwargs)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return elapsed, cpu, out[:, width:].tolist()


def run_engine(folder: Path, prompts: list[list[int]], max_tokens: int, args) -> tuple[float, float, list[list[int]]]:
    llm = LLM(folder, dtype="float32", max_model_len=args.max_model_len, max_num_seqs=len(prompts),
              max_num_batched_tokens=args.max_num_batched_tokens)
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    llm.generate(prompts[:2], SamplingParams(temperature=0, max_tokens=2))  # warm-up
    start, cpu = time.perf_counter(), time.process_time()
    outs = llm.generate(prompts, params)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return elapsed, cpu, [o.token_ids for o in outs]


def read_bandwidth(mib: int = 512, repeat: int = 5) -> tuple[float, float]:
    """Bytes per second this machine reads from memory: the fastest of ``repeat`` sums over ``mib`` MiB, per
    wall-clock second and per CPU second (on a shared machine the CPU-time figure is the steadier one)."""
    x = torch.ones(mib * (1 << 20) // 4)
    wall = cpu = float("inf")
    for _ in range(repeat):
        start, cpu0 = time.perf_counter(), time.process_time()
        float(x.sum())
        wall, cpu = min(wall, time.perf_counter() - start), min(cpu, time.process_time() - cpu0)
    return x.numel() * 4 / wall, x.numel() * 4 / max(cpu, 1e-9)


def decode_bytes_per_step(config, batch: int, context: int) -> float:
    """Bytes a decode step of ``batch`` sequences at ``context`` tokens reads: every dense weight, the routed
    experts the batch's tokens choose (expected number of distinct ones), the head, and each sequence's
    sliding window, compressed entries and indexer entries (float32)."""
    c = config
    h, _, e, k, inter = c.hidden_size, c.num_hidden_layers, c.n_routed_experts, c.num_experts_per_tok, \
        c.moe_intermediate_size
    d, heads, qa = c.head_dim, c.num_attention_heads, c.q_lora_rank
    attn = h * qa + qa * heads * d + h * d + heads * d * c.o_lora_rank + c.o_groups * c.o_lora_rank * h
    comp = 2 * h * 2 * d  # compressor kv + gate (CSA windows overlap: twice the head width)
    idx = c.q_lora_rank * c.index_n_heads * c.index_head_dim + 2 * h * 2 * c.index_head_dim + h * c.index_n_heads
    hc = 2 * (2 + c.hc_mult) * c.hc_mult * c.hc_mult * h
    shared = 3 * h * inter
    router = e * h
    distinct = e * (1 - (1 - k / e) ** batch)
    experts = distinct * 3 * h * inter
    weights = 0.0
    kv = 0.0
    for kind in c.layer_types:
        weights += attn + hc + shared + router + experts
        kv += min(context, c.sliding_window) * d
        if kind != "sliding_attention":
            rate = c.compress_rate(c.layer_types.index(kind))
            weights += comp
            kv += context // rate * d
            if kind == "compressed_sparse_attention":
                weights += idx
                kv += context // rate * c.index_head_dim
    weights += c.vocab_size * h  # the head
    return 4.0 * (weights + batch * kv)


def run_large(args) -> None:
    """The compute-bound workload (``--workload large``)."""
    from deepseek_engine.models import load_config

    folder = ensure_tiny_checkpoint(args.checkpoint or ROOT / ".cache" / "large-deepseek-v4", vocab_size=LARGE_VOCAB,
                                    config=LARGE_CONFIG)
    size = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
    prompts = make_prompts(args.prompts, LARGE_VOCAB, args.min_len, args.max_len, seed=0)
    n = args.max_tokens
    print(f"large workload: checkpoint {folder} ({size / 2**20:.0f} MiB), {args.prompts} prompts of "
          f"{args.min_len}-{args.max_len} tokens, {n} new tokens each, {args.threads} threads")
    # per side: [wall, CPU] seconds of the runs with 1 and with n new tokens (fastest of --repeat)
    best = {side: [[float("inf")] * 2 for _ in range(2)] for side in ("engine", "transformers")}
    for _ in range(max(1, args.repeat)):
        for i, tokens in enumerate((1, n)):
            runs = [("engine", lambda: run_engine(folder, prompts, tokens, args))]
            if not args.skip_transformers:
                runs.append(("transformers", lambda: run_transformers(folder, prompts, tokens)))
            for side, run in runs:
                wall, cpu, _ = run()
                best[side][i] = [min(best[side][i][0], wall), min(best[side][i][1], cpu)]
    steps = n - 1
    # seconds per decode step (prefill removed), wall-clock and CPU
    decode = {side: [(t[1][j] - t[0][j]) / steps for j in (0, 1)] for side, t in best.items()}
    bw_wall, bw_cpu = read_bandwidth()
    config = load_config(folder)
    context = (args.min_len + args.max_len) // 2 + n // 2
    moved = decode_bytes_per_step(config, args.prompts, context)
    wall, cpu = decode["engine"]
    print(f"deepseek_engine       decode {args.prompts / wall:9.1f} tok/s wall ({wall * 1e3:.1f} ms per step of "
          f"{args.prompts} sequences), {args.prompts / cpu:9.1f} tok/s per CPU second")
    print(f"memory: measured read bandwidth {bw_wall / 1e9:.1f} GB/s wall, {bw_cpu / 1e9:.1f} GB/s per CPU second; "
          f"a decode step reads about {moved / 2**20:.0f} MiB of weights and cache: "
          f"{moved / wall / bw_wall:.1%} of the bandwidth (wall), {moved / cpu / bw_cpu:.1%} (CPU time)")
    if not args.skip_transformers:
        t_wall, t_cpu = decode["transformers"]
        print(f"transformers generate decode {args.prompts / t_wall:9.1f} tok/s wall, {args.prompts / t_cpu:9.1f} "
              f"tok/s per CPU second; ratio {t_wall / wall:.2f}x wall-clock, {t_cpu / cpu:.2f}x CPU time")


def stream_triad(threads: int, mib: int = 256, repeat: int = 5) -> float:
    """Bytes per second of a STREAM triad ``a = b + s * c`` over three float32 arrays of ``mib`` MiB each, run with
    ``threads`` torch threads (STREAM's count: two arrays read and one written per element, 12 bytes), fastest
    of ``repeat``."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    n = mib * (1 << 20) // 4
    a, b, c = torch.empty(n), torch.ones(n), torch.full((n,), 2.0)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        torch.add(b, c, alpha=3.0, out=a)
        best = min(best, time.perf_counter() - start)
    torch.set_num_threads(previous)
    return 3 * n * 4 / best


def stored_bytes(folder: Path) -> dict[str, int]:
    """Bytes of every stored tensor of a safetensors checkpoint folder (from the shards' headers)."""
    import json
    import struct

    out: dict[str, int] = {}
    for shard in folder.glob("*.safetensors"):
        with shard.open("rb") as fh:
            (length,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(length))
        for name, meta in header.items():
            if name != "__metadata__":
                out[name] = meta["data_offsets"][1] - meta["data_offsets"][0]
    return out


def bandwidth_step_bytes(folder: Path, config, batch: int, context: int, kv_bytes: int = 4) -> tuple[float, float, float]:
    """(weight bytes, KV bytes, routed-expert bytes) a decode step of ``batch`` sequences at ``context`` tokens
    reads. Weights: every stored byte (scales included) except the embedding table (a step reads one row per
    token) and the routed experts, which count only the expected number of distinct experts the batch picks per
    layer, ``E * (1 - (1 - k / E) ** batch)``. KV (``kv_bytes`` per value: the engine's float32 pool): each
    sequence's window rows, compressed entries and the indexer's entries, per layer."""
    c = config
    sizes = stored_bytes(folder)
    experts = sum(v for k, v in sizes.items() if ".ffn.experts." in k)
    dense = sum(v for k, v in sizes.items() if ".ffn.experts." not in k and not k.startswith("embed."))
    e, k = c.n_routed_experts, c.num_experts_per_tok
    active = experts * (1 - (1 - k / e) ** batch)  # bytes of every expert times the fraction picked
    kv = 0.0
    for i, kind in enumerate(c.layer_types):
        kv += min(context, c.sliding_window) * c.head_dim
        rate = c.compress_rate(i)
        if rate:
            kv += context // rate * c.head_dim
            if kind == "compressed_sparse_attention":
                kv += context // rate * c.index_head_dim
    return dense + active, batch * kv * kv_bytes, active


def engine_decode_seconds(llm, prompts: list[list[int]], new_tokens: int) -> float:
    """Seconds per decode step of ``llm`` generating ``new_tokens`` for each prompt (prefill steps excluded:
    timed from the first step after every sequence has its first token)."""
    from deepseek_engine import SamplingParams

    params = SamplingParams(temperature=0, max_tokens=new_tokens, ignore_eos=True)
    for p in prompts:
        llm.add_request(p, params)
    sched = llm.scheduler
    # prefill (and prefill chunks): until every sequence runs and has its first token
    while sched.waiting or any(not s.output_token_ids for s in sched.running):
        llm.step()
    start, cpu, steps = time.perf_counter(), time.process_time(), 0
    while llm.has_unfinished_requests():
        llm.step()
        steps += 1
    return (time.perf_counter() - start) / max(steps, 1), (time.process_time() - cpu) / max(steps, 1)


def transformers_decode_seconds(model, prompts: list[list[int]], new_tokens: int, repeat: int) -> float:
    """Wall and CPU seconds per decode step of ``transformers`` ``generate()`` (the run with one new token
    subtracted)."""
    ids = torch.tensor(prompts)  # equal lengths: no padding
    model.generation_config.eos_token_id = None
    best = [[float("inf")] * 2, [float("inf")] * 2]
    for _ in range(repeat):
        for j, n in enumerate((1, new_tokens)):
            start, cpu = time.perf_counter(), time.process_time()
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                           do_sample=False, pad_token_id=0)
            best[j] = [min(best[j][0], time.perf_counter() - start), min(best[j][1], time.process_time() - cpu)]
    return tuple((best[1][i] - best[0][i]) / (new_tokens - 1) for i in (0, 1))


def run_bandwidth(args) -> None:
    """The bandwidth-bound workload (``--workload bandwidth``)."""
    import gc
    import os

    from deepseek_engine.core.threads import physical_cores
    from deepseek_engine.models import load_config
    from deepseek_engine.testing.bandwidth_checkpoint import (
        BANDWIDTH_VOCAB,
        ensure_bandwidth_checkpoint,
        load_transformers,
    )

    folder = ensure_bandwidth_checkpoint(args.checkpoint or ROOT / ".cache" / f"bandwidth-deepseek-v4-{args.weights}",
                                         args.weights)
    config = load_config(folder)
    size = sum(stored_bytes(folder).values())
    cores = physical_cores()
    thread_counts = sorted({1, cores})
    batches = [int(b) for b in args.batches.split(",")]
    n = args.max_tokens
    context = args.min_len + n // 2
    print(f"bandwidth workload: {folder.name} ({size / 2**30:.2f} GiB stored, weights {args.weights}), hidden "
          f"{config.hidden_size}, {config.num_hidden_layers} layers, {config.n_routed_experts} experts of "
          f"{config.moe_intermediate_size}, top-{config.num_experts_per_tok}; prompts of {args.min_len} tokens, "
          f"{n} new tokens; {cores} physical cores, threads {thread_counts}; load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    triad = {t: stream_triad(t) for t in thread_counts}
    print("STREAM triad: " + ", ".join(f"{triad[t] / 1e9:.1f} GB/s at {t} thread(s)" for t in thread_counts))
    prompts = {b: make_prompts(b, BANDWIDTH_VOCAB, args.min_len, args.min_len, seed=b) for b in batches}
    header = (f"{'side':>12} {'threads':>7} {'batch':>5} {'tok/s':>8} {'ms/step':>8} {'MiB/step':>9} {'GB/s':>6} "
              f"{'of triad':>8} {'same-t':>6} {'tok/CPU-s':>9} {'GB/CPU-s':>8}")
    print(header, flush=True)

    def report(side: str, t: int, b: int, times: tuple[float, float]) -> None:
        step, cpu = times
        weights, kv, _ = bandwidth_step_bytes(folder, config, b, context)
        rate = (weights + kv) / step
        print(f"{side:>12} {t:>7} {b:>5} {b / step:>8.2f} {step * 1e3:>8.1f} {(weights + kv) / 2**20:>9.1f} "
              f"{rate / 1e9:>6.2f} {rate / triad[cores]:>8.1%} {rate / triad[t]:>6.1%} {b / cpu:>9.2f} "
              f"{(weights + kv) / cpu / 1e9:>8.2f}", flush=True)

    ours: dict[tuple[int, int], tuple[float, float]] = {}
    llm = LLM(folder, max_model_len=args.max_model_len, max_num_seqs=max(batches),
              max_num_batched_tokens=max(args.max_num_batched_tokens, max(batches) * args.min_len),
              enable_prefix_caching=False)
    llm.generate([prompts[batches[0]][0]], SamplingParams(temperature=0, max_tokens=2))  # warm-up
    for t in thread_counts:
        torch.set_num_threads(t)
        for b in batches:
            ours[t, b] = min(engine_decode_seconds(llm, prompts[b], n) for _ in range(max(1, args.repeat)))
            report("engine", t, b, ours[t, b])
    del llm
    gc.collect()
    if args.skip_transformers:
        return
    model = load_transformers(folder)
    for t in thread_counts:
        torch.set_num_threads(t)
        for b in batches:
            theirs = transformers_decode_seconds(model, prompts[b], n, max(1, args.repeat))
            report("transformers", t, b, theirs)
            print(f"{'':>12} engine / transformers at {t} thread(s), batch {b}: {theirs[0] / ours[t, b][0]:.2f}x "
                  f"wall-clock, {theirs[1] / ours[t, b][1]:.2f}x CPU time", flush=True)
    print("bytes per step: stored weight bytes except the embedding, routed experts x expected distinct fraction, "
          "plus float32 KV rows read; 'of triad': against the triad at one thread per physical core, 'same-t': "
          "against the triad at the row's thread count; per CPU second: the steadier figures on a shared machine")


#: The V4 twin of the tiny V4.1 checkpoint: same hidden size, depth and vocabulary (``--workload v41``).
V4_TWIN_LAYERS = ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                  "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention"]


def v41_checkpoints() -> tuple[Path, Path]:
    """The tiny V4.1 checkpoint and its V4 twin under ``.cache/`` (written on first use)."""
    from deepseek_engine.testing.tiny_checkpoint import TINY_CONFIG
    from deepseek_engine.testing.tiny_checkpoint_v41 import TINY_V41_TEXT, write_tiny_v41

    v41 = ROOT / ".cache" / "tiny-deepseek-v41"
    if not (v41 / "config.json").is_file():
        tmp = v41.with_name(v41.name + ".partial")
        write_tiny_v41(tmp)
        tmp.rename(v41)
    depth = TINY_V41_TEXT["num_hidden_layers"]
    twin = dict(TINY_CONFIG, hidden_size=TINY_V41_TEXT["hidden_size"], num_hidden_layers=depth,
                layer_types=V4_TWIN_LAYERS[:depth], mlp_layer_types=["hash_moe"] + ["moe"] * (depth - 1))
    v4 = ensure_tiny_checkpoint(ROOT / ".cache" / "tiny-deepseek-v4-twin-of-v41", vocab_size=1024, config=twin)
    return v41, v4


def run_reference_v41(folder: Path, prompts: list[list[int]], max_tokens: int) -> tuple[float, list[list[int]]]:
    """Greedy decoding through the per-sequence model: CPU seconds and the tokens."""
    from deepseek_engine.models.loader import load_model

    m = load_model(folder)
    cpu = time.process_time()
    outs = []
    for p in prompts:
        cache = m.new_cache(len(p) + max_tokens, 16)
        logits = m.forward_sequence(torch.tensor(p), torch.arange(len(p)), cache)[-1]
        toks = []
        for _ in range(max_tokens):
            toks.append(int(torch.argmax(logits)))
            if len(toks) < max_tokens:
                logits = m.forward_sequence(torch.tensor(toks[-1:]), torch.tensor([cache.num_tokens]), cache)[-1]
        outs.append(toks)
    return time.process_time() - cpu, outs


def run_v41(args) -> None:
    v41, v4 = v41_checkpoints()
    prompts = make_prompts(args.prompts, 1024, args.min_len, args.max_len, seed=0)
    total = args.prompts * args.max_tokens
    print(f"{args.prompts} prompts of {args.min_len}-{args.max_len} tokens, {args.max_tokens} new tokens each, "
          f"greedy, {args.threads} threads; V4.1 {v41.name}, V4 twin {v4.name}")
    batched = v4_cpu = ref = float("inf")
    ref_ids: list[list[int]] = []
    for i in range(max(1, args.repeat)):
        _, cpu, ids = run_engine(v41, prompts, args.max_tokens, args)
        batched = min(batched, cpu)
        _, cpu, _ = run_engine(v4, prompts, args.max_tokens, args)
        v4_cpu = min(v4_cpu, cpu)
        if i == 0 or not args.skip_reference_repeats:
            cpu, ref_ids = run_reference_v41(v41, prompts, args.max_tokens)
            ref = min(ref, cpu)
    print(f"V4.1 per-sequence reference {total / ref:9.1f} tok/CPU-s ({ref:.2f} s CPU)")
    print(f"V4.1 LLM (batched)          {total / batched:9.1f} tok/CPU-s ({batched:.2f} s CPU)")
    print(f"V4 LLM, same shape          {total / v4_cpu:9.1f} tok/CPU-s ({v4_cpu:.2f} s CPU)")
    print(f"batched / reference: {ref / batched:.1f}x (goal >= 30x); batched / V4: {v4_cpu / batched:.2f}x "
          f"(goal >= 0.5x); fastest of {args.repeat}")
    print(f"identical greedy outputs (batched vs reference): {sum(a == b for a, b in zip(ids, ref_ids))}/{len(prompts)}")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if "--speculative" in argv:  # plain vs DSpark fixed-k vs adaptive verification (benchmarks/speculative.py)
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from speculative import main as speculative_main

        return speculative_main([a for a in argv if a != "--speculative"])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", choices=("v4", "int8"), default="v4",
                    help="bandwidth: the checkpoint's weight formats (v4: MXFP4 experts, FP8 projections, bf16 "
                         "embedding and head; int8: int8 weight-only projections and experts)")
    ap.add_argument("--batches", default="1,32", help="bandwidth: the batch sizes (comma-separated)")
    ap.add_argument("--workload", choices=("tiny", "large", "bandwidth", "v41"), default="tiny",
                    help="tiny: the tiny checkpoint (default); large: the compute-bound random checkpoint; "
                         "v41: DeepSeek V4.1 batched vs its per-sequence path vs V4 of the same shape")
    ap.add_argument("--skip-reference-repeats", action="store_true",
                    help="v41: time the (slow) per-sequence reference path once only")
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=32)
    # Equal lengths by default: transformers then needs no padding, and both engines
    # must produce the same greedy tokens (left padding shifts DeepSeek V4's
    # compression windows, so padded rows legitimately differ).
    ap.add_argument("--min-len", type=int, default=64)
    ap.add_argument("--max-len", type=int, default=64)
    ap.add_argument("--vocab-size", type=int, default=129280,
                    help="vocabulary of the tiny checkpoint (default: the real tokenizer's 129280)")
    ap.add_argument("--max-model-len", type=int, default=1024)
    ap.add_argument("--max-num-batched-tokens", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads for both engines (default 1: steadiest on a shared machine)")
    ap.add_argument("--checkpoint", type=Path, help="checkpoint folder (default: .cache/tiny-deepseek-v4[-VOCAB])")
    ap.add_argument("--skip-transformers", action="store_true")
    ap.add_argument("--repeat", type=int, default=5,
                    help="time each side this many times (alternating, fresh engine each time, so no prefix-cache "
                         "hits) and report the fastest run of each (default 5: on these shared machines either side's "
                         "single runs vary by up to 50%%, the fastest of five much less)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.workload == "bandwidth":
        run_bandwidth(args)
        return
    if args.workload == "large":
        run_large(args)
        return
    if args.workload == "v41":
        run_v41(args)
        return

    default = ROOT / ".cache" / ("tiny-deepseek-v4" + ("" if args.vocab_size == 129280 else f"-{args.vocab_size}"))
    folder = ensure_tiny_checkpoint(args.checkpoint or default, vocab_size=args.vocab_size)
    prompts = make_prompts(args.prompts, args.vocab_size, args.min_len, args.max_len, seed=0)
    total = args.prompts * args.max_tokens
    print(f"{args.prompts} prompts of {args.min_len}-{args.max_len} tokens, {args.max_tokens} new tokens each, "
          f"{args.threads} threads, checkpoint {folder}")

    ours = ours_cpu = theirs = theirs_cpu = float("inf")
    their_ids: list[list[int]] = []
    for _ in range(max(1, args.repeat)):
        wall, cpu, ours_ids = run_engine(folder, prompts, args.max_tokens, args)
        ours, ours_cpu = min(ours, wall), min(ours_cpu, cpu)
        if not args.skip_transformers:
            wall, cpu, their_ids = run_transformers(folder, prompts, args.max_tokens)
            theirs, theirs_cpu = min(theirs, wall), min(theirs_cpu, cpu)
    best = f" (fastest of {args.repeat})" if args.repeat > 1 else ""
    print(f"deepseek_engine       {total / ours:9.1f} tok/s  ({ours:.2f} s wall, {ours_cpu:.2f} s CPU){best}")
    if args.skip_transformers:
        return
    print(f"transformers generate {total / theirs:9.1f} tok/s  ({theirs:.2f} s wall, {theirs_cpu:.2f} s CPU){best}")
    print(f"speed-up: {theirs / ours:.2f}x wall-clock, {theirs_cpu / ours_cpu:.2f}x CPU time, "
          f"{args.threads} threads each (goal >= 10x)")
    same = sum(a == b for a, b in zip(ours_ids, their_ids))
    print(f"identical greedy outputs: {same}/{len(prompts)} prompts")


if __name__ == "__main__":
    main()
