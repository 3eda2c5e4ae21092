"""Reading a local Hugging Face model folder (Llama, Qwen2, Gemma-3 text) into a `Transformer`.

A folder holds `config.json`, the weights as `model.safetensors` or as shards
`model-0000i-of-0000n.safetensors` listed by `model.safetensors.index.json`,
`tokenizer.json`, and optionally `tokenizer_config.json` (special tokens, chat
template), `chat_template.jinja` and `generation_config.json` (extra stop ids).

The result has the parameter structure and values the GGUF path gives for the same
weights, so `forward`, `generate`, `score` and `collect` are unchanged. Two
conventions differ between the formats and are converted here, as llama.cpp's
`convert_hf_to_gguf.py` converts them:

- Llama Q/K projections: Hugging Face rotates pairs (j, j + hd/2) ("rotate_half");
  llama.cpp permutes the rows of `q_proj`/`k_proj` within each head,
  `W.reshape(H, 2, hd/2, d).swapaxes(1, 2)`, so that interleaved pairs (2j, 2j+1)
  rotate the same coordinates. The same permutation is applied here and the model
  uses `rope_style="interleaved"`, as for a Llama GGUF (Qwen2 and Gemma-3 keep the
  "half" pairing unpermuted in both formats).
- Gemma-3 RMSNorm weights: Hugging Face computes `x_hat * (1 + w)`; GGUF (and this
  model) stores `1 + w`, so 1 is added to every Gemma-3 norm weight.

`rope_scaling` of type "linear" or "llama3" (Llama 3.1-3.3) becomes per-pair frequency
divisors (`LMConfig.rope_freq_factors`, as llama.cpp's `rope_freqs.weight`; Gemma-3:
global layers only, as transformers scales only its global rotary embedding); other
types are refused by name.

Tensors are read one at a time with `safetensors.safe_open(framework="numpy")` (the
files are memory-mapped; a tensor is copied out, converted to the parameter dtype and
written into its slot of a preallocated layer-stacked array), so the model is never
held twice. Before any tensor is read the folder is validated: sizes in `config.json`
bounded, the parameter bytes checked against available memory, every file a regular
file inside the folder, the set of tensor names exactly the set the architecture needs
(missing and extra tensors named), every shape and dtype (F32, BF16, F16) as the config
implies, and a sharded index consistent with its shards.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab._core import check_memory, check_size, parse_json

from ._config import LMConfig, gemma3_config, llama_family_config
from ._model import Layers, Transformer, model_dtype
from ._rope_scaling import hf_rope_factors
from ._shard import weight_placer
from ._tokenizer import Tokenizer

__all__ = ["hf_tensor_shapes", "is_hf_folder", "load_hf", "config_from_hf"]

_ARCHS = {"llama": "llama", "qwen2": "qwen2", "gemma3_text": "gemma3"}
_JSON_LIMIT = 64 << 20  # config / index / tokenizer_config (tokenizer.json: below)
_TOKENIZER_LIMIT = 256 << 20
_FILE_DTYPES = {"F32": 4, "BF16": 2, "F16": 2}
_INDEX = "model.safetensors.index.json"
_SINGLE = "model.safetensors"
# caps on config sizes (far above any released model of these families), checked
# before anything is sized by them
_CAPS = {
    "vocab_size": 1 << 22,
    "hidden_size": 1 << 16,
    "num_hidden_layers": 1024,
    "num_attention_heads": 1024,
    "num_key_value_heads": 1024,
    "head_dim": 4096,
    "intermediate_size": 1 << 20,
    "max_position_embeddings": 1 << 26,
}
# per-layer tensors: HF suffix -> `Layers` field
_LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm",
    "self_attn.q_proj.weight": "wq",
    "self_attn.k_proj.weight": "wk",
    "self_attn.v_proj.weight": "wv",
    "self_attn.o_proj.weight": "wo",
    "mlp.gate_proj.weight": "w_gate",
    "mlp.up_proj.weight": "w_up",
    "mlp.down_proj.weight": "w_down",
}
# buffers some checkpoints carry that are not parameters (recomputed from the config)
_IGNORED = re.compile(r"model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq")


def is_hf_folder(path: Any) -> bool:
    """Whether `path` is a folder with a `config.json` (a Hugging Face model folder).

    **Arguments:**
        path: anything; a value that is not a path gives False.

    **Returns:**
        True for a folder that holds a `config.json`, else False (never raises).
    """
    try:
        p = Path(path)
        return p.is_dir() and (p / "config.json").exists()
    except (TypeError, OSError):
        return False


class _Folder:
    """A model folder: bounded reads of fixed member names, each a regular file inside it."""

    def __init__(self, path: Path):
        if not path.is_dir():
            raise ValueError(f"Hugging Face folder {str(path)!r} is not a folder")
        self.path = path
        self.root = path.resolve()

    def where(self, name: str | None = None) -> str:
        base = f"Hugging Face folder {str(self.path)!r}"
        return base if name is None else f"{base}: {name}"

    def file(self, name: str, *, required: bool = True) -> Path | None:
        """The member `name`: a plain file name (no folders, no '..'), resolving to a
        regular file inside the folder (a link into the Hub cache's blobs is fine)."""
        if (
            not isinstance(name, str)
            or not name
            or name in (".", "..")
            or "/" in name
            or "\\" in name
            or "\x00" in name
        ):
            raise ValueError(f"{self.where()}: {name!r} is not a plain file name in the folder")
        p = self.path / name
        if not p.exists() and not p.is_symlink():
            if required:
                raise ValueError(f"{self.where(name)} is missing")
            return None
        if not p.is_file():
            raise ValueError(f"{self.where(name)} is not a regular file")
        real = p.resolve()
        if not (real.parent == self.root or p.is_symlink()):
            raise ValueError(f"{self.where(name)} resolves outside the folder ({real})")
        return p

    def read(self, name: str, limit: int, *, required: bool = True) -> bytes | None:
        p = self.file(name, required=required)
        if p is None:
            return None
        size = p.stat().st_size
        if size > limit:
            raise ValueError(f"{self.where(name)} has {size} bytes, more than the limit {limit}")
        return p.read_bytes()

    def json(self, name: str, *, required: bool = True) -> Any:
        raw = self.read(name, _JSON_LIMIT, required=required)
        if raw is None:
            return None
        return parse_json(raw, where=self.where(name), max_bytes=_JSON_LIMIT)


def _int(cfg: dict, key: str, where: str, default: Any = None) -> int:
    v = cfg.get(key)
    v = default if v is None else v
    if v is None:
        raise ValueError(f"{where} lacks {key!r}")
    return check_size(f"{where} {key}", v, cap=_CAPS[key], why="the reader's cap")


def _float(cfg: dict, key: str, where: str, default: Any, low: float) -> float:
    v = cfg.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= low:
        raise ValueError(f"{where}: {key} must be a finite number > {low}, got {v!r}")
    return float(v)


def _flag(cfg: dict, key: str, where: str, default: bool) -> bool:
    v = cfg.get(key, default)
    if not isinstance(v, bool):
        raise ValueError(f"{where}: {key} must be true or false, got {v!r}")
    return v


def _require(cfg: dict, key: str, where: str, allowed: tuple, default: Any) -> None:
    v = cfg.get(key, default)
    if v not in allowed:
        raise ValueError(f"{where}: {key}={v!r} is not supported (supported: {list(allowed)})")


def config_from_hf(cfg: Any, where: str = "config.json") -> LMConfig:
    """`LMConfig` from a parsed Hugging Face `config.json` (model_type llama, qwen2,
    gemma3_text).

    **Arguments:**
        cfg: the parsed JSON object.
        where: names the source in error messages.

    **Returns:**
        the `LMConfig` (Llama: interleaved RoPE pairs, as the loader permutes Q/K;
        Gemma-3: per-layer windows and RoPE bases from `layer_types` or
        `sliding_window_pattern`, attention scale `query_pre_attn_scalar ** -0.5`).

    **Raises:**
        ValueError: an unsupported architecture or option (RoPE scaling other than
            linear or llama3, logit soft-capping, biases Llama does not have,
            sliding-window Qwen2), a missing or out-of-range size, or sizes that
            disagree (the message names the key).
    """
    if not isinstance(cfg, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(cfg).__name__}")
    mt = cfg.get("model_type")
    if mt not in _ARCHS:
        hint = " (multimodal Gemma-3: load its text-only part)" if mt == "gemma3" else ""
        raise ValueError(
            f"{where}: model_type {mt!r} is not supported{hint}; supported: {sorted(_ARCHS)}"
        )
    arch = _ARCHS[mt]
    d = _int(cfg, "hidden_size", where)
    n_layers = _int(cfg, "num_hidden_layers", where)
    n_heads = _int(cfg, "num_attention_heads", where)
    n_kv = _int(cfg, "num_key_value_heads", where, n_heads)
    if cfg.get("head_dim") is None and d % n_heads:
        raise ValueError(
            f"{where}: hidden_size={d} is not a multiple of num_attention_heads={n_heads} "
            "(and no head_dim is given)"
        )
    head_dim = _int(cfg, "head_dim", where, d // n_heads)
    if n_heads % n_kv:
        raise ValueError(
            f"{where}: num_attention_heads={n_heads} is not a multiple of "
            f"num_key_value_heads={n_kv}"
        )
    if head_dim % 2:
        raise ValueError(f"{where}: head_dim={head_dim} must be even for RoPE")
    if cfg.get("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError(f"{where}: partial_rotary_factor != 1 is not supported")
    common: dict[str, Any] = dict(
        vocab_size=_int(cfg, "vocab_size", where),
        d_model=d,
        n_layers=n_layers,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim=head_dim,
        d_ff=_int(cfg, "intermediate_size", where),
        norm_eps=_float(cfg, "rms_norm_eps", where, None, 0.0),
        context_length=_int(cfg, "max_position_embeddings", where, 2048),
        tied_embeddings=_flag(cfg, "tie_word_embeddings", where, arch == "gemma3"),
        name=str(cfg.get("_name_or_path", "") or ""),
    )
    if arch in ("llama", "qwen2"):
        base = _float(cfg, "rope_theta", where, 10000.0, 1.0)
        factors = hf_rope_factors(cfg.get("rope_scaling"), head_dim, base, where)
        _require(cfg, "hidden_act", where, ("silu",), "silu")
        if arch == "llama":
            _require(cfg, "attention_bias", where, (False,), False)
            _require(cfg, "mlp_bias", where, (False,), False)
        else:
            _require(cfg, "use_sliding_window", where, (False,), False)
        return llama_family_config(arch, base, freq_factors=factors, **common)
    # Gemma-3 (text): global layers use rope_theta, sliding ones rope_local_base_freq
    _require(cfg, "hidden_activation", where, ("gelu_pytorch_tanh",), "gelu_pytorch_tanh")
    for key in ("final_logit_softcapping", "attn_logit_softcapping"):
        _require(cfg, key, where, (None,), None)
    base = _float(cfg, "rope_theta", where, 1_000_000.0, 1.0)
    local = _float(cfg, "rope_local_base_freq", where, 10000.0, 1.0)
    factors = hf_rope_factors(cfg.get("rope_scaling"), head_dim, base, where)
    window = check_size(
        f"{where} sliding_window",
        cfg.get("sliding_window", 4096),
        cap=_CAPS["max_position_embeddings"],
    )
    types = cfg.get("layer_types")
    if types is None:
        pattern = check_size(
            f"{where} sliding_window_pattern",
            cfg.get("sliding_window_pattern", cfg.get("_sliding_window_pattern", 6)),
            cap=n_layers + 1,
        )
        is_global = [(i + 1) % pattern == 0 for i in range(n_layers)]
    else:
        if not (
            isinstance(types, list)
            and len(types) == n_layers
            and all(t in ("sliding_attention", "full_attention") for t in types)
        ):
            raise ValueError(
                f"{where}: layer_types must list 'sliding_attention' or "
                f"'full_attention' for each of the {n_layers} layers"
            )
        is_global = [t == "full_attention" for t in types]
    scalar = _float(cfg, "query_pre_attn_scalar", where, head_dim, 0.0)
    return gemma3_config(
        is_global,
        base,
        local,
        window,
        freq_factors=factors,
        attn_scale=scalar**-0.5,
        **common,
    )


def hf_tensor_shapes(cfg: LMConfig) -> dict[str, tuple[int, ...]]:
    """Hugging Face tensor name -> shape of every tensor `load_hf` reads for `cfg`."""
    d, f, hd = cfg.d_model, cfg.d_ff, cfg.head_dim
    hq, hkv = cfg.n_heads * hd, cfg.n_kv_heads * hd
    per_layer = {
        "input_layernorm.weight": (d,),
        "self_attn.q_proj.weight": (hq, d),
        "self_attn.k_proj.weight": (hkv, d),
        "self_attn.v_proj.weight": (hkv, d),
        "self_attn.o_proj.weight": (d, hq),
        "post_attention_layernorm.weight": (d,),
        "mlp.gate_proj.weight": (f, d),
        "mlp.up_proj.weight": (f, d),
        "mlp.down_proj.weight": (d, f),
    }
    if cfg.qkv_bias:
        per_layer |= {
            "self_attn.q_proj.bias": (hq,),
            "self_attn.k_proj.bias": (hkv,),
            "self_attn.v_proj.bias": (hkv,),
        }
    if cfg.arch == "gemma3":
        per_layer |= {
            "pre_feedforward_layernorm.weight": (d,),
            "post_feedforward_layernorm.weight": (d,),
            "self_attn.q_norm.weight": (hd,),
            "self_attn.k_norm.weight": (hd,),
        }
    out = {f"model.layers.{i}.{k}": s for i in range(cfg.n_layers) for k, s in per_layer.items()}
    out["model.embed_tokens.weight"] = (cfg.vocab_size, d)
    out["model.norm.weight"] = (d,)
    if not cfg.tied_embeddings:
        out["lm_head.weight"] = (cfg.vocab_size, d)
    return out


def _field(cfg: LMConfig, suffix: str) -> str:
    """The `Layers` field a per-layer HF tensor fills."""
    if suffix in _LAYER_NAMES:
        return _LAYER_NAMES[suffix]
    gemma = cfg.arch == "gemma3"
    return {
        # Llama/Qwen2's post_attention_layernorm is the pre-MLP norm; Gemma-3's is the
        # sandwich norm after attention, and pre_feedforward_layernorm the pre-MLP one
        "post_attention_layernorm.weight": "post_attn_norm" if gemma else "ffn_norm",
        "pre_feedforward_layernorm.weight": "ffn_norm",
        "post_feedforward_layernorm.weight": "post_ffn_norm",
        "self_attn.q_norm.weight": "q_norm",
        "self_attn.k_norm.weight": "k_norm",
        "self_attn.q_proj.bias": "bq",
        "self_attn.k_proj.bias": "bk",
        "self_attn.v_proj.bias": "bv",
    }[suffix]


def _rope_permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's Q/K row permutation (HF "rotate_half" pairs -> interleaved pairs)."""
    return (
        w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def _weight_files(folder: _Folder) -> dict[str, str]:
    """Tensor name -> shard file name, from the index (sharded) or the single file."""
    index = folder.json(_INDEX, required=False)
    if index is None:
        folder.file(_SINGLE)
        return {}  # filled from the single file's own keys
    if not isinstance(index, dict) or not isinstance(index.get("weight_map"), dict):
        raise ValueError(f"{folder.where(_INDEX)}: expected an object with a 'weight_map' object")
    wm = index["weight_map"]
    for name, shard in wm.items():
        if not isinstance(shard, str):
            raise ValueError(
                f"{folder.where(_INDEX)}: weight_map[{name!r}] must be a file name, got {shard!r}"
            )
        if not shard.endswith(".safetensors"):
            raise ValueError(
                f"{folder.where(_INDEX)}: weight_map[{name!r}] = {shard!r} is not a "
                ".safetensors file"
            )
    for shard in sorted(set(wm.values())):
        folder.file(shard)  # a plain name of a regular file in the folder
    return dict(wm)


def load_hf(
    path: str | os.PathLike, *, dtype: Any = jnp.float32, mesh: Any = None
) -> tuple[Transformer, Tokenizer]:
    """Load a Hugging Face model folder (Llama, Qwen2, Gemma-3 text) and its tokenizer.

    **Arguments:**
        path: the folder (`config.json`, `model.safetensors` or an index with shards,
            `tokenizer.json`; optionally `tokenizer_config.json`, `chat_template.jinja`,
            `generation_config.json`).
        dtype: parameter dtype, float32 or bfloat16 (the file's F32 / BF16 / F16 tensors
            are converted tensor by tensor).
        mesh: a (data, model) `jax.sharding.Mesh` (see `shard_model`): each layer-stacked
            weight goes from the host straight to its slices on the mesh's devices, as
            it is read. None: the default device.

    **Returns:**
        (model, tokenizer), as `load` gives for a GGUF file of the same weights.

    **Raises:**
        ValueError: naming the folder and the file: invalid JSON, unsupported
            architecture or option, sizes over the reader's caps or the available
            memory, a weight file that is not a regular file in the folder, missing or
            extra tensors, a shape or dtype the config does not imply, an index that
            disagrees with its shards, NaN/inf weights, an invalid tokenizer.
    """
    from safetensors import SafetensorError, safe_open

    dt = model_dtype(dtype)
    folder = _Folder(Path(path))
    cfg = config_from_hf(folder.json("config.json"), folder.where("config.json"))
    want = hf_tensor_shapes(cfg)
    # host memory: the whole model on the CPU backend; on an accelerator the host holds
    # one layer-stacked parameter at a time (it moves to the device before the next)
    itemsize = np.dtype(dt).itemsize
    total = float(sum(math.prod(s) for s in want.values())) * itemsize
    largest = max(
        float(math.prod(s)) * (cfg.n_layers if k.startswith("model.layers.") else 1)
        for k, s in want.items()
    )
    host = total if jax.default_backend() == "cpu" else largest * itemsize
    check_memory(f"{folder.where('config.json')} (the parameters)", host)
    tokenizer = _read_tokenizer(folder, cfg)
    place = weight_placer(cfg, mesh)
    mapping = _weight_files(folder)
    with contextlib.ExitStack() as stack:
        handles: dict[str, Any] = {}

        def open_file(name: str):
            if name not in handles:
                p = folder.file(name)
                try:
                    handles[name] = stack.enter_context(safe_open(str(p), framework="numpy"))
                except (SafetensorError, OSError, ValueError) as e:
                    raise ValueError(
                        f"{folder.where(name)} is not a valid safetensors file ({e})"
                    ) from e
            return handles[name]

        if mapping:
            listed: dict[str, set[str]] = {}
            for name, shard in mapping.items():
                listed.setdefault(shard, set()).add(name)
            for shard, names in sorted(listed.items()):
                keys = set(open_file(shard).keys())
                if keys != names:
                    diff = sorted(keys ^ names)[:3]
                    raise ValueError(
                        f"{folder.where(shard)}: holds {len(keys)} tensors that disagree with "
                        f"{_INDEX} ({len(names)} listed), e.g. {diff}"
                    )
        else:
            mapping = {k: _SINGLE for k in open_file(_SINGLE).keys()}  # noqa: SIM118
        present = {k for k in mapping if not _IGNORED.fullmatch(k)}
        missing = sorted(set(want) - present)
        if missing:
            raise ValueError(
                f"{folder.where()}: {len(missing)} tensor(s) required by {cfg.arch} are "
                f"missing, e.g. {missing[:3]}"
            )
        extra = sorted(present - set(want))
        if extra:
            raise ValueError(
                f"{folder.where()}: {len(extra)} tensor(s) that {cfg.arch} with this config "
                f"does not use, e.g. {extra[:3]}"
            )
        for name, shape in want.items():
            sl = open_file(mapping[name]).get_slice(name)
            got, kind = tuple(int(x) for x in sl.get_shape()), sl.get_dtype()
            if got != shape:
                raise ValueError(
                    f"{folder.where(mapping[name])}: tensor {name!r} has shape {got}, but "
                    f"config.json implies {shape}"
                )
            if kind not in _FILE_DTYPES:
                raise ValueError(
                    f"{folder.where(mapping[name])}: tensor {name!r} has dtype {kind} "
                    f"(supported: {sorted(_FILE_DTYPES)})"
                )

        def read(name: str) -> np.ndarray:
            """One tensor as float32, in this model's convention."""
            a = np.asarray(open_file(mapping[name]).get_tensor(name), dtype=np.float32)
            if not np.all(np.isfinite(a)):
                raise ValueError(f"{folder.where(mapping[name])}: tensor {name!r} holds NaN/inf")
            if cfg.arch == "llama" and name.endswith(("q_proj.weight", "k_proj.weight")):
                heads = cfg.n_heads if name.endswith("q_proj.weight") else cfg.n_kv_heads
                a = _rope_permute(a, heads)
            if cfg.arch == "gemma3" and name.endswith("norm.weight"):
                a = a + np.float32(1.0)
            return a

        fields: dict[str, Any] = {}
        for suffix, shape in (
            (k[len("model.layers.0.") :], s)
            for k, s in want.items()
            if k.startswith("model.layers.0.")
        ):
            stacked = np.empty((cfg.n_layers, *shape), dt)
            for i in range(cfg.n_layers):
                stacked[i] = read(f"model.layers.{i}.{suffix}")
            field = _field(cfg, suffix)
            fields[field] = place(field, stacked)
            del stacked
        embed = place("embed", read("model.embed_tokens.weight").astype(dt))
        final = place("final_norm", read("model.norm.weight").astype(dt))
        head = None if cfg.tied_embeddings else place("lm_head", read("lm_head.weight").astype(dt))
    for opt in ("q_norm", "k_norm", "post_attn_norm", "post_ffn_norm", "bq", "bk", "bv"):
        fields.setdefault(opt, None)
    return Transformer(cfg, embed, Layers(**fields), final, head), tokenizer


# ---------------------------------------------------------------- tokenizer


def _token_text(v: Any) -> str | None:
    """A special-token entry of tokenizer_config.json: a string or {"content": ...}."""
    if isinstance(v, dict):
        v = v.get("content")
    return v if isinstance(v, str) else None


def _read_tokenizer(folder: _Folder, cfg: LMConfig) -> Tokenizer:
    from tokenizers import Tokenizer as HFTokenizer

    raw = folder.read("tokenizer.json", _TOKENIZER_LIMIT)
    assert raw is not None
    try:
        backend = HFTokenizer.from_str(raw.decode("utf-8"))
    except Exception as e:  # noqa: BLE001 - tokenizers raises plain Exceptions
        raise ValueError(
            f"{folder.where('tokenizer.json')} is not a valid tokenizer ({str(e)[:200]})"
        ) from e
    backend.no_padding()
    backend.no_truncation()
    n = backend.get_vocab_size(with_added_tokens=True)
    if n > cfg.vocab_size:
        raise ValueError(
            f"{folder.where('tokenizer.json')}: {n} tokens, more than the model's "
            f"vocab_size {cfg.vocab_size}"
        )
    tcfg = folder.json("tokenizer_config.json", required=False) or {}
    model_cfg = folder.json("config.json")
    gen = folder.json("generation_config.json", required=False) or {}
    if not isinstance(tcfg, dict) or not isinstance(gen, dict):
        raise ValueError(
            f"{folder.where()}: tokenizer_config.json and generation_config.json must be "
            "JSON objects"
        )

    def ids_of(key: str) -> list[int]:
        """Token ids named by `key`: tokenizer_config's text, then config/generation ids."""
        out: list[int] = []
        text = _token_text(tcfg.get(key))
        if text is not None:
            i = backend.token_to_id(text)
            if i is None:
                raise ValueError(
                    f"{folder.where('tokenizer_config.json')}: {key} {text!r} is not in "
                    "the vocabulary"
                )
            out.append(i)
        for src, name in ((model_cfg, "config.json"), (gen, "generation_config.json")):
            v = src.get(f"{key}_id")
            for i in v if isinstance(v, list) else [] if v is None else [v]:
                if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n:
                    raise ValueError(
                        f"{folder.where(name)}: {key}_id must be token ids in [0, {n}), got {v!r}"
                    )
                out.append(i)
        return out

    eos = ids_of("eos_token")
    if not eos:
        raise ValueError(f"{folder.where()}: no eos_token (tokenizer_config.json or config.json)")
    bos = ids_of("bos_token") or eos[:1]
    pad = ids_of("pad_token") or eos[:1]
    special = sorted(i for i, t in backend.get_added_tokens_decoder().items() if t.special)
    vocab = backend.get_vocab(with_added_tokens=True)
    stops = set(eos) | {
        vocab[s]
        for s in ("<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|endoftext|>")
        if s in vocab and vocab[s] in special
    }
    add_bos = tcfg.get("add_bos_token")
    if add_bos is None:  # the tokenizer.json's post-processor decides (Llama-3 style)
        probe = backend.encode("a", add_special_tokens=True).ids
        add_bos = bool(probe) and probe[0] == bos[0]
    elif not isinstance(add_bos, bool):
        raise ValueError(
            f"{folder.where('tokenizer_config.json')}: add_bos_token must be true or false"
        )
    template = tcfg.get("chat_template")
    if isinstance(template, list):  # [{"name": "default", "template": ...}, ...]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    jinja = folder.read("chat_template.jinja", _JSON_LIMIT, required=False)
    if jinja is not None:
        try:
            template = jinja.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{folder.where('chat_template.jinja')}: not UTF-8 text") from e
    if template is not None and not isinstance(template, str):
        raise ValueError(f"{folder.where('tokenizer_config.json')}: chat_template must be text")
    return Tokenizer(
        backend,
        bos_id=bos[0],
        eos_id=eos[0],
        pad_id=pad[0],
        add_bos=add_bos,
        chat_template=template,
        stop_ids=sorted(stops),
        special_ids=special,
    )
