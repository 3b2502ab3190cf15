"""Random-config sweep: this engine against transformers' DeepSeek V4 reference model.

Run with the torch venv (needs ``transformers`` 5.23; not part of the test suite):

    python tests/engine/sweep_reference.py --count 40 --seed 0
    python tests/engine/sweep_reference.py --seed 0 --only 7 --keep sweep-out

Each case draws a random valid ``DeepseekV4Config`` (vocabulary, widths, head
counts, LoRA ranks, output groups, layer / MLP type mixes, compression rates,
indexer sizes and top-k, partial rotary factor, plain / YaRN / nested rope
parameters, sliding window, hyper-connection settings, expert counts and
routing options, ``swiglu_limit``, tied embeddings, token ids), gives every
weight a random value (``make_reference.randomize``) and writes the checkpoint
in one of four layouts: ``save_pretrained``; DeepSeek-native tensor names;
native names quantised (FP8 block scales + MXFP4 experts, via
``make_reference.build_quantized``); or a ``deepseek_v41`` style folder (text
model under ``text_config``, ``model.language_model.`` tensor prefixes, a
vision tensor to skip; or quantised native tensors with a top-level
``quantization_config``).

Then, for prompts of 1..300 tokens (including ones longer than the sliding
window and ones ending just before / on a compression boundary), it compares

* ``LLM(dir).forward_logits(prompt)`` with the reference's uncached float32
  logits (``ATOL`` = 1e-4 on every row),
* ``load_model(dir).forward_full`` (the per-sequence path) on the longest prompt,
* ``LLM.generate`` (greedy, 40 tokens, all generation prompts in one batch;
  then again one at a time: a prompt served from the prefix cache, one sharing
  only its first blocks with an earlier prompt, and a chunked prefill) with the
  reference's ``generate`` (its cached path).  When indexer scores tie exactly,
  the reference's logits for a prompt's first tokens can depend on the prompt's
  length (``torch.topk`` ranks rows as long as the prompt); the shared-prefix
  comparison is then skipped with a note, since reused cache blocks cannot
  follow that;  On a mismatch the
  reference is also decoded without a cache and the smallest top-2 logit gap is
  reported, so near-ties can be told apart from real bugs;
* for some cases, ``LLM(dir, dtype="bfloat16")``: runs, finite, and its arg-max
  agrees with float32 on most rows.

Everything is seeded by ``--seed`` and the case index.  Prints one line per
case and a summary; exits non-zero if any case failed.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "engine"))

import torch  # noqa: E402
from deepseek_engine import LLM, SamplingParams  # noqa: E402
from deepseek_engine.models.loader import load_model  # noqa: E402
from make_reference import build_quantized, full_logits, native_names, randomize  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM  # noqa: E402

ATOL = 1e-4
GEN_TOKENS = 40
SLIDING, CSA, HCA = "sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"


# ----------------------------------------------------------------------------- drawing configs

def draw_case(rng: random.Random) -> tuple[dict, str]:
    """Random ``DeepseekV4Config`` keyword arguments and a checkpoint layout."""
    layout = rng.choices(["pretrained", "native", "quant", "v41", "v41_quant"], weights=[5, 2, 3, 2, 1])[0]
    quant = layout in ("quant", "v41_quant")
    hidden = rng.choice([32, 64]) if quant else rng.choice([16, 20, 24, 32, 40, 48, 64])
    inter = rng.choice([32, 64]) if quant else rng.choice([8, 12, 16, 24, 32])
    head_dim = rng.choice([16, 24, 32, 40, 48, 64])
    heads = rng.choice([1, 2, 3, 4, 5, 8, 16])
    index_head_dim = rng.choice([8, 12, 16, 24, 32, 64])
    rope_dims = [d for d in range(2, min(head_dim, index_head_dim) + 1, 2)]
    rope_dim = rng.choice([rope_dims[-1], rope_dims[0], rng.choice(rope_dims)])
    prf = rope_dim / head_dim
    if int(head_dim * prf) != rope_dim:  # keep the drawn rope width exact under int()
        prf, rope_dim = 0.25, head_dim // 4 if (head_dim // 4) % 2 == 0 else 2
        prf = rope_dim / head_dim
    n_layers = rng.randint(1, 6)
    pattern = rng.choices(["mix", SLIDING, CSA, HCA], weights=[6, 1, 2, 1])[0]
    if pattern == "mix":
        layer_types = [rng.choice([SLIDING, CSA, HCA]) for _ in range(n_layers)]
    else:
        layer_types = [pattern] * n_layers
    if CSA not in layer_types and rng.random() < 0.5:
        index_head_dim = rng.choice([4, 8])  # no indexer is built, so it may be narrower than the rope
    mlp_pattern = rng.choice(["hash_first", "random", "all_hash", "all_moe"])
    if mlp_pattern == "hash_first":
        n_hash = rng.randint(0, n_layers)
        mlp_layer_types = ["hash_moe"] * n_hash + ["moe"] * (n_layers - n_hash)
    elif mlp_pattern == "random":
        mlp_layer_types = [rng.choice(["hash_moe", "moe"]) for _ in range(n_layers)]
    else:
        mlp_layer_types = ["hash_moe" if mlp_pattern == "all_hash" else "moe"] * n_layers
    if rng.random() < 0.12:  # now and then a wider model (real V4 head width, C kernels' long-row paths)
        hidden, inter, head_dim, heads = rng.choice([128, 256]), rng.choice([64, 128]), 128, rng.choice([4, 8])
        index_head_dim = rng.choice([64, 128])
        rope_dim = rng.choice([16, 64])
        prf = rope_dim / head_dim
    n_experts = rng.choice([1, 2, 3, 4, 8, 16])
    vocab = 129280 if rng.random() < 0.15 else rng.choice([64, 100, 128, 300, 1000])
    kwargs = dict(
        vocab_size=vocab, hidden_size=hidden, moe_intermediate_size=inter, num_hidden_layers=n_layers,
        num_attention_heads=heads, num_key_value_heads=rng.choice([1, 1, heads]), head_dim=head_dim,
        q_lora_rank=rng.choice([8, 12, 16, 32]),
        o_groups=rng.choice([g for g in (1, 2, 3, 4, 8) if heads * head_dim % g == 0]),
        o_lora_rank=rng.choice([4, 6, 8, 16, 32]),
        layer_types=layer_types, mlp_layer_types=mlp_layer_types,
        compress_rates={CSA: rng.choice([2, 3, 4, 4, 8, 16]), HCA: rng.choice([2, 3, 4, 8, 16, 32, 128])},
        index_n_heads=rng.choice([1, 2, 4, 8, 16]), index_head_dim=index_head_dim,
        index_topk=rng.choice([1, 2, 4, 8, 32, 512]),
        partial_rotary_factor=prf,
        sliding_window=rng.choice([2, 3, 4, 8, 16, 32, 64, 128, 256]),
        hc_mult=rng.choice([1, 2, 3, 4, 4, 6, 8]), hc_sinkhorn_iters=rng.choice([1, 2, 5, 20]),
        hc_eps=rng.choice([1e-6, 1e-3]),
        n_routed_experts=n_experts, num_experts_per_tok=rng.randint(1, min(n_experts, 4)),
        n_shared_experts=rng.choice([1, 1, 2]),
        routed_scaling_factor=rng.choice([1.0, 1.5, 2.5]),
        norm_topk_prob=rng.choice([True, False]),
        swiglu_limit=rng.choice([10.0, 1.0, 0.3, 100.0]),
        scoring_func=rng.choice(["sqrtsoftplus", "sqrtsoftplus", "sigmoid"]),
        max_position_embeddings=rng.choice([384, 1024, 4096, 65536]),
        rms_norm_eps=rng.choice([1e-6, 1e-5]),
        rope_theta=rng.choice([10000.0, 500.0, 1e6]),
        compress_rope_theta=rng.choice([160000.0, 10000.0, 1000.0]),
        tie_word_embeddings=rng.random() < 0.2,
        bos_token_id=rng.randrange(vocab), eos_token_id=rng.choice([rng.randrange(vocab), [1, 2]]),
    )
    kwargs.update(draw_rope(rng, kwargs["max_position_embeddings"]))
    return kwargs, layout


def draw_yarn(rng: random.Random, max_pos: int) -> dict:
    spec = {"rope_type": "yarn", "factor": rng.choice([2.0, 4.0, 16.0]),
            "original_max_position_embeddings": rng.choice([64, 256, max(64, max_pos // 4)])}
    if rng.random() < 0.5:
        spec["beta_fast"], spec["beta_slow"] = rng.choice([(32, 1), (16, 2), (64, 1)])
    if rng.random() < 0.25:
        spec["mscale"], spec["mscale_all_dim"] = rng.choice([(1.0, 0.5), (0.707, 1.0)])
    if rng.random() < 0.15:
        spec["attention_factor"] = rng.choice([1.0, 0.8])
    if rng.random() < 0.2:
        spec["truncate"] = False
    return spec


def draw_rope(rng: random.Random, max_pos: int) -> dict:
    kind = rng.choice(["none", "flat_yarn", "nested"])
    if kind == "none":
        return {}
    if kind == "flat_yarn":
        return {"rope_parameters": draw_yarn(rng, max_pos)}
    main = {"rope_type": "default", "rope_theta": rng.choice([10000.0, 1000.0])}
    compress = {"rope_type": "default", "rope_theta": rng.choice([160000.0, 5000.0])}
    if rng.random() < 0.6:
        compress = {**draw_yarn(rng, max_pos), "rope_theta": compress["rope_theta"]}
    if rng.random() < 0.3:
        main = {**draw_yarn(rng, max_pos), "rope_theta": main["rope_theta"]}
    return {"rope_parameters": {"main": main, "compress": compress}}


# ----------------------------------------------------------------------------- checkpoints

def save_native(model: DeepseekV4ForCausalLM, folder: Path) -> None:
    folder.mkdir(parents=True)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    save_file({k: v.contiguous() for k, v in native_names(state).items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(model.config.to_json_string())


def save_v41(model: DeepseekV4ForCausalLM, folder: Path) -> None:
    """V4.1-style folder: text config under ``text_config``, language-model tensor prefixes."""
    folder.mkdir(parents=True)
    state = {}
    for k, v in model.state_dict().items():
        name = "model.language_model." + k[len("model."):] if k.startswith("model.") else k
        state[name] = v.detach().clone().contiguous()
    state["model.vision_tower.patch_embed.weight"] = torch.zeros(4, 4)
    save_file(state, str(folder / "model.safetensors"))
    text = json.loads(model.config.to_json_string())
    cfg = {"model_type": "deepseek_v41", "architectures": ["DeepseekV41ForConditionalGeneration"],
           "text_config": text, "vision_config": {"hidden_size": 4}, "image_token_id": 3,
           "tie_word_embeddings": text.get("tie_word_embeddings", False)}
    (folder / "config.json").write_text(json.dumps(cfg, indent=1))


def build_case(kwargs: dict, layout: str, seed: int, folder: Path) -> DeepseekV4ForCausalLM:
    torch.manual_seed(seed)
    model = DeepseekV4ForCausalLM(DeepseekV4Config(**kwargs)).float().eval()
    randomize(model, seed)
    if layout == "pretrained":
        model.save_pretrained(folder)
    elif layout == "native":
        save_native(model, folder)
    elif layout == "v41":
        save_v41(model, folder)
    elif layout == "v41_quant":  # native quantised tensors, V4.1 config with a top-level quantization_config
        build_quantized(model, folder, layer0_file=None)
        text = json.loads((folder / "config.json").read_text())
        cfg = {"model_type": "deepseek_v41", "text_config": text,
               "quantization_config": text.pop("quantization_config")}
        (folder / "config.json").write_text(json.dumps(cfg, indent=1))
    else:
        build_quantized(model, folder, layer0_file=None)
    return model.eval()


# ----------------------------------------------------------------------------- comparisons

@torch.no_grad()
def reference_generate(model, prompt: torch.Tensor) -> list[int]:
    out = model.generate(prompt[None], max_new_tokens=GEN_TOKENS, min_new_tokens=GEN_TOKENS, do_sample=False,
                         eos_token_id=None, pad_token_id=0)
    return out[0, prompt.numel():].tolist()


@torch.no_grad()
def uncached_greedy(model, prompt: torch.Tensor) -> tuple[list[int], float]:
    seq, margin = prompt.clone(), float("inf")
    for _ in range(GEN_TOKENS):
        last = full_logits(model, seq)[-1]
        top2 = last.topk(2).values
        margin = min(margin, float(top2[0] - top2[1]))
        seq = torch.cat([seq, last.argmax().view(1)])
    return seq[prompt.numel():].tolist(), margin


def prefix_consistent(ref, a: torch.Tensor, b: torch.Tensor, k: int) -> bool:
    """Whether the reference gives the first ``k`` rows of prompts ``a`` and ``b`` (same first ``k`` tokens) alike."""
    return bool(torch.allclose(full_logits(ref, a)[:k], full_logits(ref, b)[:k], atol=ATOL, rtol=0))


def check_generation(result: dict, ref, label: str, prompt: torch.Tensor, got: list[int], want: list[int]) -> None:
    if got == want:
        return
    plain, margin = uncached_greedy(ref, prompt)
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    result["problems"].append(
        f"generate ({label}) prompt {prompt.numel()}: first diff at step {first} (ours {got[first:first + 4]}"
        f" ref {want[first:first + 4]}); ref uncached {'==' if plain == want else '!='} ref cached, "
        f"ours {'==' if plain == got else '!='} ref uncached, min top-2 margin {margin:.3g}")


def prompt_lengths(rng: random.Random, kwargs: dict) -> tuple[list[int], list[int]]:
    """Prefill lengths (always 300 and 1) and generation prompt lengths."""
    window = kwargs["sliding_window"]
    rates = kwargs["compress_rates"]
    special = [window + 1, rates[CSA] * 3 - 1, rates[HCA], rates[HCA] + 1, rng.randint(2, 299)]
    special = [n for n in special if 1 < n < 300]
    prefill = [300, 1] + rng.sample(special, min(2, len(special)))
    gen = [rng.randint(1, 300), max(1, min(299, window - rng.randint(0, 10)))]
    return prefill, gen


def compare_case(index: int, seed: int, keep: Path | None, bf16: bool) -> dict:
    rng = random.Random(seed * 100003 + index)
    kwargs, layout = draw_case(rng)
    case_seed = rng.randrange(2**31)
    result = {"index": index, "layout": layout, "config": kwargs, "problems": []}
    tmp = Path(tempfile.mkdtemp(prefix=f"sweep{index}_"))
    folder = (keep / f"case_{index}") if keep else tmp / "ckpt"
    if folder.exists():
        shutil.rmtree(folder)
    t0 = time.time()
    try:
        ref = build_case(kwargs, layout, case_seed, folder)
        vocab = kwargs["vocab_size"]
        g = torch.Generator().manual_seed(case_seed)
        prefill, gen = prompt_lengths(rng, kwargs)
        llm = LLM(folder)
        worst = 0.0
        longest = torch.randint(2, vocab, (300,), generator=g)
        for n in prefill:
            ids = longest[:n] if n == 300 else torch.randint(2, vocab, (n,), generator=g)
            want = full_logits(ref, ids)
            got = llm.forward_logits(ids.tolist())
            err = (got - want).abs().amax(dim=-1)
            worst = max(worst, float(err.max()))
            bad = (err > ATOL).nonzero().flatten().tolist()
            if bad:
                result["problems"].append(f"forward_logits len {n}: rows {bad[:6]}.. max err {float(err.max()):.3g}")
        single = load_model(folder)
        got = single.forward_full(longest)
        err = float((got - full_logits(ref, longest)).abs().max())
        worst = max(worst, err)
        if err > ATOL:
            result["problems"].append(f"forward_full len 300: max err {err:.3g}")
        result["max_logit_err"] = worst

        # Token 0 is avoided: it is the pad id given to ``generate``, which would mask it out.
        gen_prompts = [torch.randint(2, vocab, (n,), generator=g) for n in gen]
        outs = llm.generate([p.tolist() for p in gen_prompts],
                            SamplingParams(temperature=0.0, max_tokens=GEN_TOKENS, ignore_eos=True))
        wants = [reference_generate(ref, p) for p in gen_prompts]
        for label, p, out, want in zip(["batched"] * len(outs), gen_prompts, outs, wants):
            check_generation(result, ref, label, p, out.token_ids, want)
        # Again, one at a time: the first prompt is now served from the prefix cache, the
        # second shares only its first blocks; a small token budget splits prefills into chunks.
        k = gen_prompts[1].numel() // 2
        shared = torch.cat([gen_prompts[1][:k], torch.randint(2, vocab, (rng.randint(1, 40),), generator=g)])
        chunked = LLM(folder, max_num_batched_tokens=rng.choice([16, 48, 100]))
        for label, engine, p, want in [("prefix-cached", llm, gen_prompts[0], wants[0]),
                                       ("shared-prefix", llm, shared, None),
                                       ("chunked", chunked, gen_prompts[1], wants[1])]:
            if label == "shared-prefix" and not prefix_consistent(ref, gen_prompts[1], shared, k):
                # Exactly tied indexer scores are ranked over rows as long as the whole prompt, so
                # the reference's shared rows depend on what follows them; reused cache blocks cannot.
                result.setdefault("notes", []).append("reference not prefix-consistent (indexer ties): "
                                                      "shared-prefix generation not compared")
                continue
            out = engine.generate([p.tolist()], SamplingParams(temperature=0.0, max_tokens=GEN_TOKENS,
                                                               ignore_eos=True))[0]
            check_generation(result, ref, label, p, out.token_ids, want or reference_generate(ref, p))
        if bf16:
            llm16 = LLM(folder, dtype="bfloat16")
            ids = longest[:200].tolist()
            got16 = llm16.forward_logits(ids)
            want = full_logits(ref, longest[:200])
            agree = float((got16.argmax(-1) == want.argmax(-1)).float().mean())
            result["bf16_argmax_agreement"] = agree
            if not torch.isfinite(got16).all() or agree < 0.5:
                result["problems"].append(f"bf16: finite={bool(torch.isfinite(got16).all())} agreement {agree:.2f}")
            outs16 = llm16.generate([ids], SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True))
            if len(outs16[0].token_ids) != 8:
                result["problems"].append("bf16 generate returned a wrong token count")
    except Exception as exc:  # report, keep sweeping
        result["problems"].append(f"exception: {type(exc).__name__}: {exc}")
        result["traceback"] = traceback.format_exc()
    finally:
        if keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    result["seconds"] = round(time.time() - t0, 1)
    return result


def summarize_config(kwargs: dict, layout: str) -> str:
    short = {SLIDING: "S", CSA: "C", HCA: "H"}
    lt = "".join(short[t] for t in kwargs["layer_types"])
    mt = "".join("h" if t == "hash_moe" else "m" for t in kwargs["mlp_layer_types"])
    rp = kwargs.get("rope_parameters") or {}
    rope = "nested" if "main" in rp else rp.get("rope_type", "none")
    return (f"{layout:10s} V={kwargs['vocab_size']} H={kwargs['hidden_size']} hd={kwargs['head_dim']} "
            f"nh={kwargs['num_attention_heads']} L={lt}/{mt} r={kwargs['compress_rates'][CSA]}/"
            f"{kwargs['compress_rates'][HCA]} win={kwargs['sliding_window']} topk={kwargs['index_topk']} "
            f"rope={rope} prf={kwargs['partial_rotary_factor']:.3g} hc={kwargs['hc_mult']} "
            f"E={kwargs['n_routed_experts']}/{kwargs['num_experts_per_tok']} {kwargs['scoring_func']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", type=str, default="", help="comma-separated case indices")
    ap.add_argument("--keep", type=Path, default=None, help="keep checkpoints under this folder")
    ap.add_argument("--json", type=Path, default=None, help="write all results here")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    indices = [int(i) for i in args.only.split(",") if i] or list(range(args.count))
    results, failed = [], 0
    for i in indices:
        r = compare_case(i, args.seed, args.keep, bf16=(i % 5 == 0))
        results.append(r)
        status = "FAIL" if r["problems"] else "ok  "
        failed += bool(r["problems"])
        print(f"[{i:3d}] {status} {r['seconds']:5.1f}s err={r.get('max_logit_err', float('nan')):.2g} "
              f"{summarize_config(r['config'], r['layout'])}", flush=True)
        for p in r["problems"]:
            print(f"        - {p}", flush=True)
        for note in r.get("notes", []):
            print(f"        (note: {note})", flush=True)
        if "traceback" in r:
            print("        " + r["traceback"].strip().splitlines()[-3], flush=True)
    print(f"{len(results) - failed}/{len(results)} cases passed (seed {args.seed})")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
