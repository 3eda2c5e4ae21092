"""Prefill and decode throughput of jaxlab.lm vs llama.cpp (llama-cpp-python), same GGUF.

Same GGUF file, same thread count. jaxlab runs three weight formats: float32
(dequantised once at load; XLA dots), and `weights="int8"` / `"int4"` (integer
levels with per-block-of-32 scales, exact for the file's Q4_1/Q8_0 blocks,
dequantised inside the matmul by the C++ kernel of `kernels/lm` for up to 64
rows, by dequantise + XLA dot beyond). llama.cpp runs its quantised kernels
(which also quantise activations to 8 bits). Tokens per second = tokens / median
time: prefill `prefill_tokens` / t, decode `decode_tokens * B` / t (each decode
call also prefills a 16-token prompt, <3% of its work). llama-cpp-python has no
batched decoding API, so batch 32 is measured for jaxlab only and compared with
llama.cpp's batch-1 tokens/s. Models: SmolLM2-135M (Q4_1) always; Qwen2.5-Coder-0.5B
(Q4_K_M) when this jaxlab knows it and its wheels are installed (`models` config).
`score` items/s when `jaxlab.lm.score` exists: `score_items` multiple-choice items of 4
options with ~`score_words`-word prompts, float32, two prompt sets: distinct prompts
(`score_items_s`) and a shared few-shot preamble (three quarters of each prompt) followed
by a distinct question (`score_fewshot_items_s`); each scored by the batched path
(default: a prefix common to a batch's prompts runs once) and by the per-item path
(`share_prefix=False`: every prompt runs whole), interleaved in one run, with the ratio.
Install the peer with `make peers` (llama-cpp-python, built from source).
"""

from __future__ import annotations

import os

import numpy as np

from experiments._harness import Bench

NAME = "lm_speed"
PAPER = "LM"  # the shared runtime P6 P7 P8 P13 P14 P17 P19 build on
DESCRIPTION = (
    "SmolLM2-135M (and Qwen2.5-Coder-0.5B) prefill (512 tokens), decode "
    "(128 tokens; batch 1 float32/int8/int4, batch 32) tokens/s vs llama.cpp"
)
QUICK = {
    "prefill_tokens": 512,
    "decode_tokens": 128,
    "batch": 32,
    "warmup": 1,
    "repeats": 3,
    "models": ["smollm2", "qwen2.5-coder-0.5b-instruct"],
    "score_items": 8,
    "score_words": 200,
}
FULL = {**QUICK, "warmup": 2, "repeats": 7}
TINY = {  # the smoke tier: SmolLM2, every weight format, job and (when installed) llama.cpp
    "prefill_tokens": 16,
    "decode_tokens": 4,
    "batch": 2,
    "warmup": 0,
    "repeats": 1,
    "models": ["smollm2"],
    "score_items": 2,
    "score_words": 24,
}

_SHORT = {"smollm2": "smollm2", "qwen2.5-coder-0.5b-instruct": "qwen05"}


def _threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _model_impls(lm, name, tag, config, notes):
    n_pre, n_dec, batch = config["prefill_tokens"], config["decode_tokens"], config["batch"]
    try:
        models = {w: lm.load(name, weights=w) for w in ("float32", "int8", "int4")}
    except (FileNotFoundError, ValueError) as e:
        notes.append(f"{name}: not measured ({str(e).splitlines()[0][:160]}).")
        return {}
    model, tok = models["float32"]
    rng = np.random.default_rng(0)
    # real words, so that neither engine sees degenerate input
    words = tok.encode(" ".join(["the cat sat on a mat and looked at the stars"] * 64))
    long_prompt = (words * (n_pre // len(words) + 1))[:n_pre]
    short = [list(words[:16]) for _ in range(batch)]
    for row in short:
        row[-1] = int(rng.integers(100, 1000))
    tokens = np.asarray([long_prompt], np.int32)

    def decode(m, rows):
        return lambda: lm.generate(m, rows, max_new_tokens=n_dec).tokens

    impls = {
        f"jaxlab_{tag}_prefill_float32": lambda: lm.prefill(model, tokens)[0],
        f"jaxlab_{tag}_prefill_int8": lambda: lm.prefill(models["int8"][0], tokens)[0],
    }
    for w, (m, _) in models.items():
        impls[f"jaxlab_{tag}_decode_b1_{w}"] = decode(m, short[:1])
    impls[f"jaxlab_{tag}_decode_b{batch}_float32"] = decode(model, short)
    impls[f"jaxlab_{tag}_decode_b{batch}_int8"] = decode(models["int8"][0], short)
    if hasattr(lm, "score") and config.get("score_items"):
        impls.update(_score_impls(lm, model, tok, tag, config))
    try:
        from llama_cpp import Llama
    except ImportError:
        notes.append("llama-cpp-python is not installed: peer not measured (make peers).")
        return impls
    llm = Llama(
        model_path=str(lm.model_path(name)),
        n_ctx=n_pre + n_dec + 32,
        n_batch=n_pre,
        n_threads=_threads(),
        n_threads_batch=_threads(),
        verbose=False,
    )

    def llama_prefill():
        llm.reset()
        llm.eval(long_prompt)
        return np.asarray(llm.scores[llm.n_tokens - 1])

    def llama_decode():
        llm.reset()
        out = []
        for t in llm.generate(short[0], top_k=1, temp=0.0, reset=True):
            out.append(t)
            if len(out) == n_dec:
                break
        return np.asarray(out)

    impls[f"llamacpp_{tag}_prefill"] = llama_prefill
    impls[f"llamacpp_{tag}_decode_b1"] = llama_decode
    return impls


_WORDS = [
    "the",
    "cat",
    "sat",
    "on",
    "a",
    "mat",
    "and",
    "looked",
    "at",
    "stars",
    "while",
    "river",
    "water",
    "ran",
    "past",
    "old",
    "stone",
    "bridges",
    "under",
    "grey",
    "winter",
    "skies",
    "as",
    "children",
    "played",
    "near",
    "quiet",
    "houses",
    "with",
    "red",
    "doors",
    "small",
    "gardens",
    "tall",
    "trees",
    "and",
    "long",
    "roads",
    "that",
    "led",
    "over",
    "green",
    "hills",
    "toward",
    "distant",
    "towns",
    "where",
    "people",
    "sold",
    "bread",
    "fish",
    "apples",
    "and",
    "warm",
    "coats",
    "every",
    "morning",
]


def _text(rng, n_words: int) -> str:
    return " ".join(rng.choice(_WORDS, size=n_words))


def _score_impls(lm, model, tok, tag, config):
    """`score` rows: distinct prompts and a shared few-shot preamble, batched vs per item."""
    rng = np.random.default_rng(1)
    n, n_words = config["score_items"], config["score_words"]
    options = [[" the stars", " a dog", " the mat and the cat", " blue"]] * n
    distinct = [_text(rng, n_words) + "\nAnswer:" for _ in range(n)]
    shots = _text(rng, 3 * n_words // 4)
    fewshot = [f"{shots}\nQuestion: {_text(rng, n_words // 4)}\nAnswer:" for _ in range(n)]
    impls = {}
    for kind, prompts in (("distinct", distinct), ("fewshot", fewshot)):
        for path, share in (("batched", True), ("per_item", False)):
            impls[f"jaxlab_{tag}_score_{kind}_{path}_float32"] = lambda p=prompts, s=share: (
                lm.score(model, tok, p, options, share_prefix=s).sum
            )
    return impls


def _fields(tags, config, impls):
    n_pre, n_dec, batch = config["prefill_tokens"], config["decode_tokens"], config["batch"]
    fields = {}
    for tag in tags:
        j = f"jaxlab_{tag}_"
        if j + "decode_b1_float32" not in impls:
            continue
        for w in ("float32", "int8", "int4"):
            fields[f"{tag}_decode_b1_{w}_tok_s"] = lambda m, k=j + f"decode_b1_{w}": n_dec / m[k]
        for w in ("float32", "int8"):
            fields[f"{tag}_decode_b{batch}_{w}_tok_s"] = lambda m, k=j + f"decode_b{batch}_{w}": (
                n_dec * batch / m[k]
            )
        fields[f"{tag}_decode_b{batch}_tok_s"] = (
            lambda m, a=j + f"decode_b{batch}_float32", b=j + f"decode_b{batch}_int8": (
                n_dec * batch / min(m[a], m[b])
            )
        )
        for w in ("float32", "int8"):
            fields[f"{tag}_prefill_{w}_tok_s"] = lambda m, k=j + f"prefill_{w}": n_pre / m[k]
        for kind, name in (("distinct", "score"), ("fewshot", "score_fewshot")):
            new, old = j + f"score_{kind}_batched_float32", j + f"score_{kind}_per_item_float32"
            if new not in impls:
                continue
            n_items = config["score_items"]
            fields[f"{tag}_{name}_items_s"] = lambda m, k=new, n=n_items: n / m[k]
            fields[f"{tag}_{name}_per_item_items_s"] = lambda m, k=old, n=n_items: n / m[k]
            fields[f"{tag}_{name}_ratio_vs_per_item"] = lambda m, a=new, b=old: m[b] / m[a]
        peer = f"llamacpp_{tag}_"
        if peer + "decode_b1" not in impls:
            continue
        fields[f"{tag}_llamacpp_decode_b1_tok_s"] = lambda m, k=peer + "decode_b1": n_dec / m[k]
        fields[f"{tag}_llamacpp_prefill_tok_s"] = lambda m, k=peer + "prefill": n_pre / m[k]
        for w in ("float32", "int8", "int4"):
            fields[f"{tag}_decode_b1_{w}_ratio_vs_llamacpp"] = (
                lambda m, a=j + f"decode_b1_{w}", b=peer + "decode_b1": m[b] / m[a]
            )
        # headline ratios: the best jaxlab path for each job
        fields[f"{tag}_decode_b1_ratio_vs_llamacpp"] = lambda m, j=j, b=peer + "decode_b1": (
            m[b] / min(m[j + "decode_b1_int8"], m[j + "decode_b1_int4"])
        )
        fields[f"{tag}_prefill_ratio_vs_llamacpp"] = lambda m, j=j, b=peer + "prefill": (
            m[b] / min(m[j + "prefill_float32"], m[j + "prefill_int8"])
        )
        fields[f"{tag}_decode_b{batch}_vs_llamacpp_b1"] = lambda m, j=j, b=peer + "decode_b1": (
            batch * m[b] / min(m[j + f"decode_b{batch}_float32"], m[j + f"decode_b{batch}_int8"])
        )
    first = tags[0] if tags else None
    if first is not None:  # the unprefixed fields: SmolLM2
        for k in (
            "decode_b1_ratio_vs_llamacpp",
            "prefill_ratio_vs_llamacpp",
            f"decode_b{batch}_tok_s",
        ):
            if f"{first}_{k}" in fields:
                fields[k if k != f"decode_b{batch}_tok_s" else "decode_b32_tok_s"] = fields[
                    f"{first}_{k}"
                ]
    return fields


def setup(config: dict, key) -> Bench:
    import jaxlab.lm as lm

    notes = [
        f"threads={_threads()} for both engines; jaxlab float32 = dequantised once at "
        "load; int8/int4 = exact GGUF levels, dequantised in the matmul."
    ]
    impls, tags = {}, []
    for name in config["models"]:
        tag = _SHORT.get(name, name.replace("-", "_").replace(".", ""))
        got = _model_impls(lm, name, tag, config, notes)
        if got:
            impls.update(got)
            tags.append(tag)
    ours = tuple(k for k in impls if k.startswith("jaxlab"))
    size = {
        "prefill_tokens": config["prefill_tokens"],
        "decode_tokens": config["decode_tokens"],
        "batch": config["batch"],
        "threads": _threads(),
        "models": tags,
        "score_items": config.get("score_items", 0),
        "score_words": config.get("score_words", 0),
        "items_s": "score_items / median_s (4 options per item)",
        "tok_s": "prefill: prefill_tokens / median_s; decode_bB: decode_tokens * B / median_s",
    }
    pairs = tuple(
        (o, p)
        for o in ours
        for p in impls
        for t in tags
        if p.startswith(f"llamacpp_{t}_")
        and o.startswith(f"jaxlab_{t}_")
        and o[len(f"jaxlab_{t}_") :].startswith(p[len(f"llamacpp_{t}_") :])
    )
    return Bench(
        impls=impls,
        ours=ours,
        size=size,
        notes=" ".join(notes),
        pairs=pairs,
        fields=_fields(tags, config, impls),
        interleave=True,
    )
