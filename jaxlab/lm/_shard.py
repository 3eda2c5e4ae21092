"""Tensor-parallel placement of a `Transformer`'s weights on a (data, model) device mesh.

Scheme (Megatron-LM style tensor parallelism, Shoeybi et al. 2019), with M the size of
the mesh's model axis:

- attention: `wq` (and `bq`) split on their output dim, i.e. by query heads (each
  device holds n_heads / M whole heads); `wo` split on its input dim (the same heads),
  so a device computes its heads' attention locally and one all-reduce sums `wo`'s
  partial outputs;
- grouped-query attention: `wk`, `wv` (and `bk`, `bv`, and so the KV cache) split by KV
  heads when n_kv_heads is a multiple of M; otherwise they are replicated on every
  device (each device then computes all KV heads, a small redundant cost: K/V are
  n_heads / n_kv_heads times smaller than Q), as Megatron does when the tensor-parallel
  size exceeds the KV-head count;
- MLP: `w_gate`, `w_up` split on the FFN dim (output), `w_down` on the FFN dim (input):
  the nonlinearity stays local, one all-reduce after `w_down`;
- embeddings and the untied output head split on the vocabulary (the largest matrices of
  small models; logits come out vocabulary-sharded and the log-sum-exp reduces across
  devices);
- norms replicated; the stacked layer axis is never split (the blocks run under
  `lax.scan`); every weight is replicated over the data axis, which carries the batch
  (`shard_batch`).

Why tensor parallelism rather than FSDP: the use here is inference and activation
collection (forward, generate, score, collect), where the weights are read once per
token; TP never materialises a whole weight on one device and keeps a decode step's
communication to two all-reduces of a (B, d_model) vector per layer, while FSDP
all-gathers every weight per step. Data parallelism over the data axis covers batch
throughput.

Nothing in the model code changes: `jax.jit` propagates the weights' shardings through
`forward`, `forward_batched`, `generate`, `score`, `collect` and interventions (GSPMD
inserts the collectives), so their results equal the unsharded model's up to the float
rounding of the split sums.

Quantised weights (`QuantWeight`: int8 or 4-bit GGUF blocks) are refused: their matmul is
a CPU custom call that XLA cannot partition; shard a float32 or bfloat16 model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import AbstractMesh, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxlab._core import check_positive_int, check_size

from ._config import LMConfig
from ._model import Transformer, model_dtype
from ._quant import QuantWeight

__all__ = [
    "model_mesh",
    "shard_model",
    "shard_batch",
    "memory_per_device",
    "weight_specs",
    "weight_placer",
    "model_axis_size",
    "auto_mesh",
]


def model_mesh(
    data: int = 1,
    model: int | None = None,
    *,
    devices: Sequence[Any] | None = None,
    data_axis: str = "data",
    model_axis: str = "model",
) -> Mesh:
    """A 2-D device mesh with a data axis and a model axis.

    **Arguments:**
        data: size of the data (batch) axis.
        model: size of the model (tensor-parallel) axis; None: all remaining devices
            (`len(devices) // data`).
        devices: the devices to use (default `jax.devices()`, the global devices of a
            multi-process job); the first `data * model` of them are used.
        data_axis, model_axis: the axis names.

    **Returns:**
        a `jax.sharding.Mesh` of shape (data, model).
    """
    devs = list(jax.devices() if devices is None else devices)
    if not devs:
        raise ValueError("devices: expected at least one device, received none")
    if not isinstance(data, int) or isinstance(data, bool) or data <= 0:
        raise ValueError(f"data: expected a positive int, received {data!r}")
    if model is None:
        model = len(devs) // data
        if model == 0:
            raise ValueError(f"data: {data} exceeds the {len(devs)} devices available")
    if not isinstance(model, int) or isinstance(model, bool) or model <= 0:
        raise ValueError(f"model: expected a positive int, received {model!r}")
    if data * model > len(devs):
        raise ValueError(
            f"data * model: expected at most {len(devs)} devices, received {data} * {model}"
        )
    if data_axis == model_axis:
        raise ValueError(f"data_axis and model_axis must differ, both are {data_axis!r}")
    grid = np.empty((data, model), dtype=object)
    for i, d in enumerate(devs[: data * model]):
        grid[i // model, i % model] = d
    return Mesh(grid, (data_axis, model_axis))


def model_axis_size(config: LMConfig, n: int) -> int:
    """The largest model axis (tensor-parallel size) for `n` devices that `config`
    allows: the largest divisor of `n` that divides n_heads, d_ff and vocab_size (1 at
    least: data parallelism only). `n` is capped at 2**20 devices."""
    n = check_size("n", n, cap=2**20, why="a device count")
    dims = (config.n_heads, config.d_ff, config.vocab_size)
    return max(m for m in range(1, n + 1) if n % m == 0 and all(d % m == 0 for d in dims))


def auto_mesh(config: LMConfig, devices: Sequence[Any] | None = None) -> Mesh | None:
    """The (data, model) mesh a model with `config` is placed on when a caller asks for
    `mesh="auto"`: this process's devices (default `jax.local_devices()`, so results
    stay addressable in a multi-process job) with the largest model axis the config
    allows (`model_axis_size`), the rest data-parallel; None on a single device (no
    sharding)."""
    if not isinstance(config, LMConfig):
        raise ValueError(f"config: expected an LMConfig, received {type(config).__name__}")
    devs = list(jax.local_devices() if devices is None else devices)
    if len(devs) <= 1:
        return None
    m = model_axis_size(config, len(devs))
    return model_mesh(len(devs) // m, m, devices=devs)


def _axis_size(mesh: Mesh | AbstractMesh, name: str, what: str, *, abstract: bool = False) -> int:
    kinds = (Mesh, AbstractMesh) if abstract else (Mesh,)
    if not isinstance(mesh, kinds):
        expected = " or AbstractMesh" if abstract else ""
        raise ValueError(
            f"mesh: expected a jax.sharding.Mesh{expected}, received {type(mesh).__name__}"
        )
    if name not in mesh.axis_names:
        raise ValueError(f"{what}: {name!r} is not an axis of the mesh {tuple(mesh.axis_names)}")
    return int(mesh.shape[name])


def _check_divides(config: LMConfig, m: int, model_axis: str) -> None:
    for dim in ("n_heads", "d_ff", "vocab_size"):
        size = getattr(config, dim)
        if size % m:
            raise ValueError(
                f"{dim}={size} is not a multiple of the model axis {model_axis!r} of size {m}: "
                f"tensor parallelism splits {dim} over it"
            )


def kv_sharded(config: LMConfig, m: int) -> bool:
    """Whether the KV heads are split over a model axis of size m (else replicated)."""
    return config.n_kv_heads % m == 0


def weight_specs(config: LMConfig, m: int, *, model_axis: str = "model") -> dict[str, P]:
    """The `PartitionSpec` of each weight of a `Transformer` with this config, by field name.

    **Arguments:**
        config: the model's `LMConfig`.
        m: size of the model axis, a positive int (decides whether KV heads are split
            or replicated).
        model_axis: the model axis name.

    **Returns:**
        {field name: `PartitionSpec`} for the fields of `Transformer` and `Layers` (the
        stacked layer axis first, never split). ValueError naming the dim when m does not
        divide n_heads, d_ff or vocab_size, or naming m when it is not a positive int.
    """
    m = check_positive_int("m", m)
    _check_divides(config, m, model_axis)
    a = model_axis
    kv = a if kv_sharded(config, m) else None
    rep = P()
    return {
        "embed": P(a, None),
        "lm_head": P(a, None),
        "final_norm": rep,
        "attn_norm": rep,
        "ffn_norm": rep,
        "q_norm": rep,
        "k_norm": rep,
        "post_attn_norm": rep,
        "post_ffn_norm": rep,
        "wq": P(None, a, None),
        "bq": P(None, a),
        "wk": P(None, kv, None),
        "bk": P(None, kv),
        "wv": P(None, kv, None),
        "bv": P(None, kv),
        "wo": P(None, None, a),
        "w_gate": P(None, a, None),
        "w_up": P(None, a, None),
        "w_down": P(None, None, a),
    }


def _leaf_spec(specs: dict[str, P], path) -> P:
    name = getattr(path[-1], "name", None)
    if name not in specs:
        raise AssertionError(f"no partition spec for weight {jax.tree_util.keystr(path)}")
    return specs[name]


def shard_model(
    model: Transformer,
    mesh: Mesh,
    *,
    data_axis: str = "data",
    model_axis: str = "model",
) -> Transformer:
    """Place a model's weights on `mesh`, tensor-parallel over `model_axis` (see the module
    docstring for the scheme), replicated over `data_axis`.

    **Arguments:**
        model: a float32 or bfloat16 `Transformer` (not quantised).
        mesh: a `jax.sharding.Mesh` with both axes (e.g. from `model_mesh`).
        data_axis, model_axis: the axis names.

    **Returns:**
        the same `Transformer` with every weight a `NamedSharding`-placed array; use it
        with `forward`, `forward_batched`, `generate`, `score`, `collect` unchanged.

    **Raises:**
        ValueError: an axis name not in the mesh, a model axis size that does not divide
        n_heads, d_ff or vocab_size (the message names the dim), quantised weights.
    """
    if not isinstance(model, Transformer):
        raise ValueError(
            f"model: expected a jaxlab.lm.Transformer, received {type(model).__name__}"
        )
    _axis_size(mesh, data_axis, "data_axis")
    m = _axis_size(mesh, model_axis, "model_axis")
    quant = [
        x
        for x in jax.tree_util.tree_leaves(model, is_leaf=lambda x: isinstance(x, QuantWeight))
        if isinstance(x, QuantWeight)
    ]
    if quant:
        raise ValueError(
            "model: quantised weights (QuantWeight) cannot be sharded (their matmul is a CPU "
            "custom call XLA cannot partition); load with weights='float32' (dtype=float32 "
            "or bfloat16)"
        )
    specs = weight_specs(model.config, m, model_axis=model_axis)
    shardings = jax.tree_util.tree_map_with_path(
        lambda path, _: NamedSharding(mesh, _leaf_spec(specs, path)), model
    )
    return jax.device_put(model, shardings)


def weight_placer(
    config: LMConfig,
    mesh: Mesh | str | None,
    *,
    data_axis: str = "data",
    model_axis: str = "model",
):
    """`place(field, host_array) -> jax.Array` for a loader that builds a model one
    weight at a time: with a mesh (or "auto": `auto_mesh(config)`), each device receives
    only its own slice of the host array (`jax.make_array_from_callback`, also across
    processes: every process builds the array for its addressable devices), so no
    device ever holds a whole weight it should hold a slice of; without one,
    `jnp.asarray` (the default device).

    **Raises:**
        ValueError: an axis name not in the mesh, a model axis size that does not divide
            n_heads, d_ff or vocab_size (as `shard_model`).
    """
    if isinstance(mesh, str):
        if mesh != "auto":
            raise ValueError(
                f"mesh: expected a jax.sharding.Mesh, 'auto' or None, received {mesh!r}"
            )
        mesh = auto_mesh(config)
    if mesh is None:
        return lambda field, a: jax.numpy.asarray(a)
    _axis_size(mesh, data_axis, "data_axis")
    specs = weight_specs(config, _axis_size(mesh, model_axis, "model_axis"), model_axis=model_axis)

    def place(field: str, a: np.ndarray) -> jax.Array:
        sharding = NamedSharding(mesh, specs[field])
        return jax.make_array_from_callback(a.shape, sharding, lambda idx: a[idx])

    return place


def shard_batch(x, mesh: Mesh, *, data_axis: str = "data"):
    """Place a batch (leading axis B, e.g. (B, T) tokens or masks) split over `data_axis`.

    **Arguments:**
        x: an array (or a pytree with at least one array) with leading batch axis B, a
            multiple of the data axis size.
        mesh: the mesh; data_axis: its batch axis name.

    **Returns:** the same values, sharded on their first axis (replicated over other axes).
    """
    n = _axis_size(mesh, data_axis, "data_axis")
    if not jax.tree_util.tree_leaves(x):
        raise ValueError(f"x: expected an array (or pytree of arrays), received {x!r}")

    def put(a):
        a = np.asarray(a) if not isinstance(a, jax.Array) else a
        if a.ndim == 0 or a.shape[0] % n:
            raise ValueError(
                f"x: expected a leading batch axis that is a multiple of the data axis "
                f"{data_axis!r} of size {n}, received shape {a.shape}"
            )
        return jax.device_put(a, NamedSharding(mesh, P(data_axis)))

    return jax.tree_util.tree_map(put, x)


def memory_per_device(
    config: LMConfig,
    mesh: Mesh | AbstractMesh,
    *,
    dtype=np.float32,
    batch: int = 1,
    seq: int = 2048,
    data_axis: str = "data",
    model_axis: str = "model",
) -> dict[str, int]:
    """Bytes per device of a `shard_model`-placed model and of one forward pass.

    With M the model axis size, D the data axis size, b = batch / D rows per device,
    s the bytes per element of `dtype`, h_kv = n_kv_heads / M (n_kv_heads when the KV
    heads are replicated) and `seq` tokens per row:

    - `weights`: exact, the sum over weights of size / (M if split, else 1) * s
      (equals the bytes of the arrays' addressable shards on each device);
    - `kv_cache`: 2 * n_layers * b * seq * h_kv * head_dim * s (keys and values);
    - `activations`: an estimate of the largest live intermediates of one layer in a
      full forward of the rows (not a measurement): the residual stream and its
      normalised copy 2 * b * seq * d_model * s, Q/K/V b * seq * (n_heads / M + 2 h_kv)
      * head_dim * s, attention scores and probabilities 2 * b * (n_heads / M) * seq^2
      * 4 (float32), the MLP's gate, up and product 3 * b * seq * (d_ff / M) * s, and
      the float32 logits b * seq * (vocab / M) * 4;
    - `total`: their sum.

    **Arguments:**
        config: the model's `LMConfig`.
        mesh: the mesh (only its axis sizes are read: a `jax.sharding.AbstractMesh`,
            e.g. `AbstractMesh((1, 8), ("data", "model"))`, plans for devices not present).
        dtype: the parameter and compute dtype (float32 or bfloat16).
        batch: rows per step (a multiple of the data axis size).
        seq: tokens per row (cache slots).
        data_axis, model_axis: the axis names.

    **Returns:** {"weights", "kv_cache", "activations", "total"} in bytes (ints).
    """
    if not isinstance(config, LMConfig):
        raise ValueError(f"config: expected an LMConfig, received {type(config).__name__}")
    dt = model_dtype(dtype)
    d = _axis_size(mesh, data_axis, "data_axis", abstract=True)
    m = _axis_size(mesh, model_axis, "model_axis", abstract=True)
    for name, v in (("batch", batch), ("seq", seq)):
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{name}: expected a positive int, received {v!r}")
    if batch % d:
        raise ValueError(
            f"batch: expected a multiple of the data axis {data_axis!r} of size {d}, "
            f"received {batch}"
        )
    specs = weight_specs(config, m, model_axis=model_axis)
    shapes = jax.eval_shape(lambda: Transformer.random(config, key=jax.random.key(0)))
    s = dt.itemsize
    weights = 0
    for path, shape in jax.tree_util.tree_leaves_with_path(shapes):
        split = m if model_axis in tuple(_leaf_spec(specs, path)) else 1
        weights += int(np.prod(shape.shape)) // split * s
    b = batch // d
    hq = config.n_heads // m
    hkv = config.n_kv_heads // m if kv_sharded(config, m) else config.n_kv_heads
    hd = config.head_dim
    kv = 2 * config.n_layers * b * seq * hkv * hd * s
    acts = (
        2 * b * seq * config.d_model * s
        + b * seq * (hq + 2 * hkv) * hd * s
        + 2 * b * hq * seq * seq * 4
        + 3 * b * seq * (config.d_ff // m) * s
        + b * seq * (config.vocab_size // m) * 4
    )
    return {
        "weights": int(weights),
        "kv_cache": int(kv),
        "activations": int(acts),
        "total": int(weights + kv + acts),
    }
