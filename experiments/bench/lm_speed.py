"""Prefill and decode throughput of jaxlab.lm vs llama.cpp (llama-cpp-python) on SmolLM2.

Same GGUF file, same thread count. jaxlab dequantises to float32 and runs XLA;
llama.cpp runs its quantised (Q4_1) kernels. Tokens per second = tokens / median
time: prefill `prefill_tokens` / t, decode `decode_tokens * batch` / t. Each
decode call also prefills a 16-token prompt (<3% of its work). llama-cpp-python
has no batched decoding API, so batch 8 is measured for jaxlab only. Install the
peer with `pip install llama-cpp-python` (it builds llama.cpp from source).
"""

from __future__ import annotations

import os

import numpy as np

from experiments._harness import Bench

NAME = "lm_speed"
PAPER = "LM"  # the shared runtime P6 P7 P8 P13 P14 P17 P19 build on
DESCRIPTION = "SmolLM2-135M prefill (512 tokens) and decode (128 tokens, batch 1/8) tokens/s"
QUICK = {"prefill_tokens": 512, "decode_tokens": 128, "batch": 8, "warmup": 1, "repeats": 3}
FULL = {"prefill_tokens": 512, "decode_tokens": 128, "batch": 8, "warmup": 2, "repeats": 7}


def _threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def setup(config: dict, key) -> Bench:
    import jaxlab.lm as lm

    n_pre, n_dec, batch = config["prefill_tokens"], config["decode_tokens"], config["batch"]
    model, tok = lm.load("smollm2")
    rng = np.random.default_rng(0)
    # real words, so that neither engine sees degenerate input
    words = tok.encode(" ".join(["the cat sat on a mat and looked at the stars"] * 64))
    long_prompt = (words * (n_pre // len(words) + 1))[:n_pre]
    short = [words[:16] for _ in range(batch)]
    for row in short:
        row[-1] = int(rng.integers(100, 1000))

    tokens = np.asarray([long_prompt], np.int32)

    impls = {
        "jaxlab_prefill": lambda: lm.prefill(model, tokens)[0],
        "jaxlab_decode_b1": lambda: lm.generate(model, short[:1], max_new_tokens=n_dec).tokens,
        f"jaxlab_decode_b{batch}": lambda: lm.generate(model, short,
                                                       max_new_tokens=n_dec).tokens,
    }
    notes = [f"threads={_threads()}; jaxlab weights float32 (dequantised Q4_1/Q8_0)."]
    try:
        from llama_cpp import Llama
    except ImportError:
        notes.append("llama-cpp-python is not installed: peer not measured "
                     "(pip install llama-cpp-python).")
    else:
        llm = Llama(model_path=str(lm.model_path("smollm2")), n_ctx=n_pre + n_dec + 32,
                    n_batch=n_pre, n_threads=_threads(), n_threads_batch=_threads(),
                    verbose=False)

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

        impls["llamacpp_prefill"] = llama_prefill
        impls["llamacpp_decode_b1"] = llama_decode
        notes.append("llama.cpp via llama-cpp-python on the same GGUF (Q4_1 kernels).")
    ours = tuple(k for k in impls if k.startswith("jaxlab"))
    size = {"prefill_tokens": n_pre, "decode_tokens": n_dec, "batch": batch,
            "threads": _threads(),
            "tok_s": "prefill: prefill_tokens / median_s; decode_bB: decode_tokens * B / median_s"}
    return Bench(impls=impls, ours=ours, size=size, notes=" ".join(notes))
