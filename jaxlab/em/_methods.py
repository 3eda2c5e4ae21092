"""The four P11 methods, trained and applied: bicubic, separate, joint, joint + diffusion.

All models are trained with `fit` (`ObjectiveStep` on the one driver); segmentation is
`segment_watershed` of the predicted boundary probabilities.

- `bicubic`: bicubic upsampling + a segmentation-only U-Net trained on bicubic images;
- `separate`: an SR-only U-Net, then a segmentation-only U-Net trained on its outputs;
- `joint`: shared encoder + SR and segmentation decoders (no refiner);
- `joint_diffusion`: the joint model whose segmentation decoder is guided by the
  partial-diffusion refinement (from step t0) of its SR embedding.

The refiner's embedding space is the joint model's (`MethodsConfig.embedding`; by default
learned features of its shared encoder). Its condition E(SR) and its target E(HR) are
computed by the frozen base joint model (`params["joint_base"]`), in training and at
inference, so the refiner always sees the features it was trained on.

`joint` and `joint_diffusion` get the same number of steps: both start from one joint
model trained for `steps`; `joint` continues for `finetune_steps`, `joint_diffusion`
fine-tunes for `finetune_steps` with refined priors (precomputed once per training image).

Paper: P11 (joint EM super-resolution and segmentation with a partial-diffusion refiner).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, cast

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxlab._core import (
    AbstractProgress,
    Checkpointer,
    Driver,
    as_array,
    check_instance,
    check_nonnegative_int,
    check_positive_int,
    check_size,
    short_repr,
)

from ._diffusion import (
    Denoiser,
    NoiseSchedule,
    _check_fits_denoiser,
    make_schedule,
    refine_embedding,
)
from ._embed import AbstractEmbedding, LearnedEmbedding
from ._joint import JointOutput, JointSRSeg
from ._segment import segment_watershed
from ._train import (
    MAX_STEPS,
    DenoiserObjective,
    JointObjective,
    SegObjective,
    SRObjective,
    fit,
    init_params,
)
from ._unet import SegNet, SRNet

__all__ = [
    "METHODS",
    "MethodsConfig",
    "TrainedMethods",
    "MethodPrediction",
    "train_methods",
    "predict_method",
    "refine_dataset",
    "embed_images",
]

METHODS = ("bicubic", "separate", "joint", "joint_diffusion")
"""The four P11 methods: bicubic, separate (SR then segmentation), joint, joint with the
diffusion refiner."""


@dataclasses.dataclass(frozen=True)
class MethodsConfig:
    """Model sizes and training settings of `train_methods`.

    `features` / `seg_features`: U-Net widths of the SR / joint and segmentation nets;
    `denoiser_features`: refiner width; `steps`, `finetune_steps`, `denoiser_steps`,
    `batch_size`, `learning_rate` (Adam), `chunk`: training; `seg_weight`: joint loss
    weight; `num_timesteps`, `schedule`: the refiner's diffusion; `t0`, `refine_steps`:
    partial-diffusion start step and number of reverse steps; `embedding`: the joint
    model's embedding strategy (the refiner's space; default `LearnedEmbedding()`,
    `StructureEmbedding()` is the hand-made ablation). The step counts are integers in
    [1, `em.MAX_STEPS`], the other counts positive integers and `t0` an integer >= 0
    (a `ValueError` naming the field otherwise).
    """

    features: tuple[int, ...] = (16, 32)
    seg_features: tuple[int, ...] = (16, 32, 64)
    denoiser_features: int = 16
    steps: int = 300
    finetune_steps: int = 100
    denoiser_steps: int = 300
    batch_size: int = 8
    learning_rate: float = 2e-3
    seg_weight: float = 0.5
    num_timesteps: int = 100
    schedule: str = "linear"
    t0: int = 30
    refine_steps: int = 5
    chunk: int = 50
    embedding: AbstractEmbedding = LearnedEmbedding()

    def __post_init__(self):
        # the step counts bound the training time: checked when the config is made
        for name in ("steps", "finetune_steps", "denoiser_steps"):
            check_size(name, getattr(self, name), cap=MAX_STEPS, why="em.MAX_STEPS")
        for name in ("denoiser_features", "batch_size", "num_timesteps", "refine_steps", "chunk"):
            check_positive_int(name, getattr(self, name))
        check_nonnegative_int("t0", self.t0)


@dataclasses.dataclass
class TrainedMethods:
    """All trained models of one setting: the nets, their `params` and training `losses`
    by name (`seg_bicubic`, `sr`, `seg_separate`, `joint_base`, `joint`, `denoiser`,
    `joint_diffusion`, as far as the requested methods need them). `joint_base` is the
    joint model before fine-tuning: the frozen embedder of the refiner's E(SR), E(HR)."""

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    factor: int
    config: MethodsConfig
    sr_net: SRNet
    seg_net: SegNet
    joint_net: JointSRSeg
    denoiser: Denoiser
    schedule: NoiseSchedule
    params: dict[str, Any]
    losses: dict[str, np.ndarray]


@dataclasses.dataclass
class MethodPrediction:
    """`sr` `(N, S, S)` clipped to [0, 1], boundary probabilities `prob` `(N, S, S)`,
    watershed `instances` `(N, S, S)`, and the refined structural `prior`
    `(N, S, S, C)` (joint_diffusion only, else None)."""

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    sr: np.ndarray
    prob: np.ndarray
    instances: np.ndarray
    prior: Any = None


def _batched_apply(fn, x, batch: int = 16):
    return jnp.concatenate([fn(x[i : i + batch]) for i in range(0, x.shape[0], batch)])


# The jitted forward passes take the (frozen) parameters as arguments and the flax
# modules as static arguments (they hash by value): one compile per model configuration,
# input shape and output, shared by every call (seeds, settings, t0 values). Closing over
# the parameters in a fresh `jax.jit(lambda ...)` per call recompiled every time.
@partial(jax.jit, static_argnums=0, static_argnames=("method", "part"))
def _apply(net: nn.Module, params: Any, *args: Any, method: str | None = None, part=None):
    out = net.apply(jax.lax.stop_gradient(params), *args, method=method)
    return out if part is None else getattr(out, part)


def _batched(net: nn.Module, params: Any, x: jax.Array, batch: int = 16, **kw) -> jax.Array:
    return _batched_apply(lambda xb: _apply(net, params, xb, **kw), jnp.asarray(x), batch)


@partial(jax.jit, static_argnums=0, static_argnames=("t0", "n_steps"))
def _refine(denoiser, params, schedule, z, key, *, t0: int, n_steps: int) -> jax.Array:
    return refine_embedding(denoiser, params, schedule, z, t0=t0, n_steps=n_steps, key=key)


def refine_dataset(
    denoiser: Denoiser,
    params: Any,
    schedule: NoiseSchedule,
    cond: jax.Array,
    *,
    t0: int,
    n_steps: int,
    key: jax.Array,
    batch: int = 16,
) -> jax.Array:
    """`refine_embedding` over a data set `cond` `(N, H, W, C)` in jitted batches (batch
    starting at row i uses `fold_in(key, i)`).

    `cond` a finite, non-empty float array that fits the denoiser's parameters; `t0` an
    integer in [0, T]; `n_steps`, `batch` positive integers (else a `ValueError` naming
    the argument). **Returns:** `(N, H, W, C)`."""
    cond = as_array("cond", cond, ndim=4, dtype=jnp.floating, finite=True, nonempty=True)
    T = schedule.num_steps
    if isinstance(t0, bool) or not isinstance(t0, int | np.integer) or not 0 <= t0 <= T:
        raise ValueError(f"t0: expected an integer in [0, {T}], received {t0!r}")
    n_steps = check_positive_int("n_steps", n_steps)
    batch = check_positive_int("batch", batch)
    _check_fits_denoiser("cond", denoiser, params, cond[:1], int(t0))
    return jnp.concatenate(
        [
            _refine(
                denoiser,
                params,
                schedule,
                cond[i : i + batch],
                jax.random.fold_in(key, i),
                t0=int(t0),
                n_steps=int(n_steps),
            )
            for i in range(0, cond.shape[0], batch)
        ]
    )


def embed_images(net: JointSRSeg, params: Any, images: jax.Array, *, batch: int = 16) -> jax.Array:
    """E(images) of the joint model `net` with frozen `params` (no gradient reaches them).

    The refiner's target E(HR) and, via `JointOutput.embedding`, its condition E(SR)
    come from one frozen joint model (P11: the structural prior approximates the HR
    features of the same network).

    **Arguments:** `net` a `JointSRSeg`; `params` its flax variables; `images` `(N, H, W)`
    HR-sized; `batch` images per jitted call.

    `images` finite and non-empty, `batch` a positive integer (else a `ValueError` naming
    the argument).

    **Returns:** `(N, H, W, C_e)`.
    """
    check_instance("net", net, JointSRSeg)
    images = as_array("images", images, ndim=3, dtype=jnp.floating, finite=True, nonempty=True)
    batch = check_positive_int("batch", batch)
    return _batched(net, params, images, batch, method="embed")


def _frozen_sr_embedding(net: JointSRSeg, params: Any, lr: jax.Array) -> jax.Array:
    # E(SR) of the frozen joint model: the refiner's condition, in training and inference
    return _batched(net, params, lr, part="embedding")


def train_methods(
    hr: jax.Array,
    lr: jax.Array,
    bicubic: jax.Array,
    boundary: jax.Array,
    factor: int,
    config: MethodsConfig,
    *,
    key: jax.Array,
    methods: Sequence[str] = METHODS,
    optimizer: optax.GradientTransformation | None = None,
    checkpointers: Callable[[str], Checkpointer | None] | None = None,
    progress: Callable[[str], AbstractProgress] | None = None,
) -> TrainedMethods:
    """Train every model the requested `methods` of P11 need.

    `bicubic`: bicubic upsampling + a segmentation-only U-Net trained on bicubic images;
    `separate`: an SR-only U-Net, then a segmentation-only U-Net trained on its outputs;
    `joint`: shared encoder + SR and segmentation decoders; `joint_diffusion`: the joint
    model whose segmentation decoder is guided by the partial-diffusion refinement of its
    SR embedding. `joint` and `joint_diffusion` start from one joint model trained for
    `steps` (`joint_base`); `joint` continues for `finetune_steps`, `joint_diffusion`
    fine-tunes as long with refined priors. The refiner's denoiser learns to map noised
    E(HR) back, conditioned on E(SR), both embedded by the frozen `joint_base` (learned
    features by default, `config.embedding`). Every model is trained with `fit`
    (`ObjectiveStep`).

    **Arguments:**

    - `hr` `(N, S, S)` images, `lr` `(N, S/f, S/f)` their degradations, `bicubic`
      `(N, S, S)` bicubic upsamplings of `lr` (finite, non-empty floats), `boundary`
      `(N, S, S)` membrane maps in [0, 1]; a mismatch is a `ValueError` naming it.
    - `factor`: the SR factor f; `config`: a `MethodsConfig`; `key` (keyword-only).
    - `methods`: a subset of `METHODS`.
    - `optimizer`: shared by every fit (default Adam(`config.learning_rate`)); pass one
      object to several calls to reuse the compiled steps.
    - `checkpointers`: `name -> Checkpointer` per training (names as in
      `TrainedMethods.losses`, fine-tunings `joint_ft`, `joint_diffusion_ft`).
    - `progress`: `name -> progress strategy` per training (default silent).

    **Returns:** `TrainedMethods`.
    """
    if isinstance(methods, str) or not set(methods) <= set(METHODS):
        raise ValueError(f"methods: expected a subset of {METHODS}, received {methods!r}")
    check_positive_int("factor", factor)
    check_instance("config", config, MethodsConfig)
    hr, lr, bicubic = _check_images(factor, hr=hr, lr=lr, bicubic=bicubic)
    boundary = as_array(
        "boundary", boundary, shape=hr.shape, dtype=np.number, finite=True, low=0.0, high=1.0
    )
    c = config
    optimizer = optax.adam(float(c.learning_rate)) if optimizer is None else optimizer
    sr_net = SRNet(factor, tuple(c.features))
    seg_net = SegNet(tuple(c.seg_features))
    joint_net = JointSRSeg(factor, tuple(c.features), c.embedding)
    denoiser = Denoiser(c.num_timesteps, c.denoiser_features, c.schedule)
    schedule = make_schedule(c.schedule, c.num_timesteps)
    ks = jax.random.split(key, 12)

    def train(name, objective, p, data, k, steps):
        trained, history = fit(
            objective,
            p,
            data,
            key=k,
            steps=steps,
            batch_size=c.batch_size,
            optimizer=optimizer,
            driver=Driver(
                chunk=c.chunk,
                checkpointer=None if checkpointers is None else checkpointers(name),
                progress=None if progress is None else progress(name),
            ),
        )
        return trained, history.losses

    params: dict[str, Any] = {}
    losses: dict[str, np.ndarray] = {}
    if "bicubic" in methods:
        p = init_params(seg_net, bicubic[:1], key=ks[0])
        params["seg_bicubic"], losses["seg_bicubic"] = train(
            "seg_bicubic",
            SegObjective(seg_net),
            p,
            {"image": bicubic, "boundary": boundary},
            ks[1],
            c.steps,
        )
    if "separate" in methods:
        p = init_params(sr_net, lr[:1], key=ks[2])
        params["sr"], losses["sr"] = train(
            "sr", SRObjective(sr_net), p, {"lr": lr, "hr": hr}, ks[3], c.steps
        )
        sr_train = _batched(sr_net, params["sr"], lr)
        p = init_params(seg_net, bicubic[:1], key=ks[4])
        params["seg_separate"], losses["seg_separate"] = train(
            "seg_separate",
            SegObjective(seg_net),
            p,
            {"image": sr_train, "boundary": boundary},
            ks[5],
            c.steps,
        )
    if "joint" in methods or "joint_diffusion" in methods:
        objective = JointObjective(joint_net, float(c.seg_weight))
        data = {"lr": lr, "hr": hr, "boundary": boundary}
        p = init_params(joint_net, lr[:1], key=ks[6])
        base, losses["joint_base"] = train("joint", objective, p, data, ks[7], c.steps)
        params["joint_base"] = base
        if "joint" in methods:
            params["joint"], losses["joint"] = train(
                "joint_ft", objective, base, data, ks[8], c.finetune_steps
            )
        if "joint_diffusion" in methods:
            cond = _frozen_sr_embedding(joint_net, base, lr)
            target = embed_images(joint_net, base, hr)
            p = init_params(denoiser, cond[:1], jnp.ones((1,), jnp.int32), cond[:1], key=ks[9])
            params["denoiser"], losses["denoiser"] = train(
                "denoiser",
                DenoiserObjective(denoiser),
                p,
                {"cond": cond, "target": target},
                ks[10],
                c.denoiser_steps,
            )
            prior = refine_dataset(
                denoiser,
                params["denoiser"],
                schedule,
                cond,
                t0=c.t0,
                n_steps=c.refine_steps,
                key=ks[11],
            )
            params["joint_diffusion"], losses["joint_diffusion"] = train(
                "joint_diffusion_ft",
                objective,
                base,
                {**data, "prior": prior},
                jax.random.fold_in(ks[8], 1),
                c.finetune_steps,
            )
    return TrainedMethods(factor, c, sr_net, seg_net, joint_net, denoiser, schedule, params, losses)


def _check_images(factor: int, **images: Any) -> tuple[jax.Array, ...]:
    """`hr`/`bicubic` `(N, S, W)` and `lr` `(N, S/f, W/f)` finite, non-empty float images of
    one N (the names given, in order; `hr` may be absent); returns them as arrays."""
    sizes: dict[str, int] = {}
    out = {}
    for name, x in images.items():
        out[name] = as_array(
            name,
            x,
            shape=("N", "h", "w") if name == "lr" else ("N", "H", "W"),
            dtype=jnp.floating,
            finite=True,
            nonempty=True,
            sizes=sizes,
        )
    if "H" in sizes and (sizes["H"], sizes["W"]) != (sizes["h"] * factor, sizes["w"] * factor):
        big = "hr" if "hr" in images else "bicubic"
        raise ValueError(
            f"lr: expected {factor} times smaller than {big} "
            f"{(sizes['H'], sizes['W'])}, received {(sizes['h'], sizes['w'])} (factor {factor})"
        )
    return tuple(out.values())


def _prediction(sr, logits) -> MethodPrediction:
    sr = np.clip(np.asarray(sr, np.float64), 0.0, 1.0)
    prob = np.asarray(jax.nn.sigmoid(logits), np.float64)
    inst = np.stack([segment_watershed(p) for p in prob])
    return MethodPrediction(sr, prob, inst)


def predict_method(
    trained: TrainedMethods,
    lr: jax.Array,
    bicubic: jax.Array,
    method: str,
    *,
    key: jax.Array,
    t0: int | None = None,
) -> MethodPrediction:
    """SR image, boundary probabilities and watershed instances of `method` on LR images
    `lr` `(N, S/f, S/f)` (and their bicubic upsamplings `(N, S, S)`); `key` drives the
    refiner of `joint_diffusion`, started at `t0` (default `trained.config.t0`) from the
    SR embedding of the frozen `joint_base` model (the refiner's training condition).

    `trained` a `TrainedMethods` that trained `method`; `lr`, `bicubic` finite,
    non-empty float images of one N, `bicubic` `trained.factor` times larger (else a
    `ValueError` naming the argument)."""
    check_instance("trained", trained, TrainedMethods)
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method: expected one of {METHODS}, received {method!r}")
    lr, bicubic = _check_images(trained.factor, lr=lr, bicubic=bicubic)
    p = trained.params
    if method == "bicubic":
        logits = _batched(trained.seg_net, p["seg_bicubic"], bicubic)
        return _prediction(bicubic, logits)
    if method == "separate":
        sr = _batched(trained.sr_net, p["sr"], lr)
        logits = _batched(trained.seg_net, p["seg_separate"], sr)
        return _prediction(sr, logits)
    if method == "joint":
        out = cast(JointOutput, _apply(trained.joint_net, p["joint"], jnp.asarray(lr)))
        return _prediction(out.sr, out.boundary_logits)
    if method == "joint_diffusion":
        jp = p["joint_diffusion"]
        out = cast(JointOutput, _apply(trained.joint_net, jp, jnp.asarray(lr)))
        t0 = trained.config.t0 if t0 is None else t0
        prior = refine_dataset(
            trained.denoiser,
            p["denoiser"],
            trained.schedule,
            _frozen_sr_embedding(trained.joint_net, p["joint_base"], lr),
            t0=t0,
            n_steps=trained.config.refine_steps,
            key=key,
        )
        logits = _apply(trained.joint_net, jp, jnp.asarray(lr), prior, part="boundary_logits")
        return dataclasses.replace(_prediction(out.sr, logits), prior=prior)
    raise ValueError(f"method: expected one of {METHODS}, received {method!r}")
