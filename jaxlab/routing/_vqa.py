"""A pool of small vision-question models that differ in what they see (our own VQA pool).

The routing paper (P6, LatentRouter) argues that which multimodal model should answer a
query depends on the query's visual requirement. To have a real multimodal routing table
without large multimodal LLMs, jaxlab trains its own small pool on easy-VQA: every member
is a `VQAModel` (a small CNN on the image as its `VQAView` shows it, fused with a
bag-of-words question encoder) and members differ in the view (resolution, colour or
grey, centre crop, or no image at all) and in width, hence in cost (`vqa_flops`).

- `VQAView`: what a member sees; `apply(images)` is a fixed, differentiable transform.
- `VQAModel`: 13-way answer logits of one (image, question) pair.
- `VQAFitStep` / `fit_vqa`: minibatch cross-entropy steps run by `jaxlab.run_steps`.
- `vqa_predict`: answer indices of many questions, in batches.
- `vqa_flops`: the member's forward FLOPs per query (the routing cost).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import equinox as eqx
import jax
import jax.core
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, Int

from jaxlab._core import (
    AbstractStep,
    Driver,
    StepLoop,
    as_array,
    check_ids,
    check_memory,
    check_positive_int,
    check_range,
    driver_for,
)

from ._train import descend, fit_params, init_params

__all__ = ["VQAView", "VQAModel", "VQAFitStep", "fit_vqa", "vqa_predict", "vqa_flops"]

#: ITU-R BT.601 luma weights (PIL's "L" conversion): grey = 0.299 R + 0.587 G + 0.114 B
LUMA = (0.299, 0.587, 0.114)


def _float_image(images) -> jax.Array:
    """uint8 in [0, 255] -> float32 in [0, 1]; floating images are taken as in [0, 1]."""
    x = jnp.asarray(images)
    if jnp.issubdtype(x.dtype, jnp.integer):
        return x.astype(jnp.float32) / 255.0
    return x.astype(jnp.float32)


@dataclasses.dataclass(frozen=True)
class VQAView:
    """What a pool member sees of an image: a centre crop, colour or grey, a resolution.

    `apply` crops the central `round(image_size * crop)` pixels, converts to grey with the
    BT.601 luma weights (0.299, 0.587, 0.114) when `colour` is False, and downsamples to
    `resolution` x `resolution` by block means. A `blind` view sees nothing (the member
    answers from the question alone: a language prior).

    **Arguments:**

    - `resolution`: output side in pixels; must divide the cropped side.
    - `colour`: keep RGB (True) or keep luminance only (False).
    - `crop`: fraction of the side kept around the centre, in (0, 1].
    - `blind`: see no image at all.
    - `image_size`: side of the input images (64 for easy-VQA).
    """

    resolution: int = 64
    colour: bool = True
    crop: float = 1.0
    blind: bool = False
    image_size: int = 64

    def __post_init__(self):
        check_positive_int("resolution", self.resolution)
        check_positive_int("image_size", self.image_size)
        if not (isinstance(self.crop, int | float) and 0 < self.crop <= 1):
            raise ValueError(f"crop: expected a fraction in (0, 1], received {self.crop!r}")
        side = self.crop_side
        if not self.blind and (side < 1 or side % self.resolution):
            raise ValueError(
                f"resolution: expected a divisor of the cropped side {side} "
                f"(image_size {self.image_size} x crop {self.crop}), received {self.resolution}"
            )

    @property
    def crop_side(self) -> int:
        """Side of the centre crop in input pixels."""
        return int(round(self.image_size * self.crop))

    @property
    def channels(self) -> int:
        """3 for colour, 1 for grey, 0 when blind."""
        return 0 if self.blind else (3 if self.colour else 1)

    @property
    def output_shape(self) -> tuple[int, int, int]:
        """(resolution, resolution, channels); (0, 0, 0) when blind."""
        if self.blind:
            return (0, 0, 0)
        return (self.resolution, self.resolution, self.channels)

    @property
    def name(self) -> str:
        """A short label: `blind`, `grey64`, `colour8`, `colour32-crop0.5`, ..."""
        if self.blind:
            return "blind"
        s = f"{'colour' if self.colour else 'grey'}{self.resolution}"
        return s if self.crop == 1 else f"{s}-crop{self.crop:g}"

    def apply(self, images) -> Float[Array, "*batch r r c"]:
        """The view of `images`.

        **Arguments:** `images` (..., image_size, image_size, 3): uint8 in [0, 255] or
        floating in [0, 1].

        **Returns:** float32 (..., resolution, resolution, channels); (..., 0, 0, 0) when
        blind.
        """
        if not isinstance(images, jax.Array):  # tracers are jax.Arrays
            images = as_array("images", images)
        s = self.image_size
        if images.ndim < 3 or tuple(images.shape[-3:]) != (s, s, 3):
            raise ValueError(f"images: expected shape (..., {s}, {s}, 3), received {images.shape}")
        if not (
            jnp.issubdtype(images.dtype, jnp.integer) or jnp.issubdtype(images.dtype, jnp.floating)
        ):
            raise ValueError(f"images: expected uint8 or floating, received {images.dtype}")
        x = _float_image(images)
        if self.blind:
            return x[..., :0, :0, :0]
        c = self.crop_side
        o = (s - c) // 2
        x = x[..., o : o + c, o : o + c, :]
        if not self.colour:
            x = (x @ jnp.asarray(LUMA, jnp.float32))[..., None]
        r, b = self.resolution, c // self.resolution
        x = x.reshape(*x.shape[:-3], r, b, r, b, x.shape[-1])
        return jnp.mean(x, axis=(-4, -2))


def _conv_plan(resolution: int, width: int) -> tuple[tuple[int, int, int], ...]:
    """(out channels, stride, output side) per conv layer of the image encoder: stride-2
    layers while the side exceeds 8, then stride-1 layers up to at least two layers;
    channels width, 2 width, 2 width, ..."""
    plan, side = [], resolution
    while side > 8 or len(plan) < 2:
        stride = 2 if side > 8 else 1
        side = (side + stride - 1) // stride  # 3x3, padding 1
        plan.append((width if not plan else 2 * width, stride, side))
    return tuple(plan)


class VQAModel(eqx.Module):
    """A small vision-question model: answer logits of (image, question token ids).

    Image path (skipped when `view.blind`): `view.apply`, then 3x3 convolutions with ReLU
    (padding 1; stride 2 while the side exceeds 8, then stride 1, at least two layers;
    channels `width`, `2 width`, ...), global mean and max pooling, a linear map to
    `hidden` and tanh. Question path: the mean of the word embeddings of the non-padding
    tokens (a bag of words), a linear map to `hidden` and tanh. Fusion: the elementwise
    product of both (the question vector alone when blind), a ReLU layer of `hidden`
    units and a linear layer to the answer logits (the easy-VQA baseline's multiplicative
    fusion).

    **Arguments:**

    - `view`: the member's `VQAView`.
    - `vocab_size`: size of the token vocabulary (id 0 = padding).
    - `n_answers`: number of answers (13 for easy-VQA).
    - `width`: channels of the first conv layer (the member's capacity and cost).
    - `embed_dim`: word embedding size.
    - `hidden`: fused feature size.
    - `key`: PRNG key (keyword-only).

    `model(image, tokens)`: `image` (image_size, image_size, 3) uint8 or float in [0, 1]
    (ignored when blind), `tokens` (L,) int -> logits (n_answers,) float32. Unbatched;
    `jax.vmap` over both for batches.
    """

    view: VQAView = eqx.field(static=True)
    convs: tuple[eqx.nn.Conv2d, ...]
    image_proj: eqx.nn.Linear | None
    embed: Float[Array, "V E"]
    question_proj: eqx.nn.Linear
    fuse: eqx.nn.Linear
    head: eqx.nn.Linear

    def __init__(
        self,
        view: VQAView,
        vocab_size: int,
        n_answers: int = 13,
        *,
        width: int = 8,
        embed_dim: int = 32,
        hidden: int = 64,
        key: jax.Array,
    ):
        if not isinstance(view, VQAView):
            raise ValueError(f"view: expected a VQAView, received {type(view).__name__}")
        vocab_size = check_positive_int("vocab_size", vocab_size)
        n_answers = check_positive_int("n_answers", n_answers)
        width = check_positive_int("width", width)
        embed_dim = check_positive_int("embed_dim", embed_dim)
        hidden = check_positive_int("hidden", hidden)
        k = jax.random.split(key, 8)
        f32 = jnp.float32
        self.view = view
        convs, c_in = [], view.channels
        if not view.blind:
            for i, (c_out, stride, _) in enumerate(_conv_plan(view.resolution, width)):
                kc = jax.random.fold_in(k[4], i)
                conv = eqx.nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, dtype=f32, key=kc)
                # He initialisation: equinox's default shrinks the signal ~6x per layer
                he = jax.random.normal(kc, conv.weight.shape, f32) * jnp.sqrt(2.0 / (9 * c_in))
                convs.append(
                    eqx.tree_at(
                        lambda c: (c.weight, c.bias),
                        conv,
                        (he, jnp.zeros((c_out, 1, 1), f32)),
                    )
                )
                c_in = c_out
        self.convs = tuple(convs)
        side = _conv_plan(view.resolution, width)[-1][2] if not view.blind else 0
        self.image_proj = (
            None if view.blind else eqx.nn.Linear(c_in * side * side, hidden, dtype=f32, key=k[0])
        )
        self.embed = 0.3 * jax.random.normal(k[1], (vocab_size, embed_dim), f32)
        self.question_proj = eqx.nn.Linear(embed_dim, hidden, dtype=f32, key=k[2])
        self.fuse = eqx.nn.Linear(hidden if view.blind else 3 * hidden, hidden, dtype=f32, key=k[3])
        self.head = eqx.nn.Linear(hidden, n_answers, dtype=f32, key=k[7])

    def question_vector(self, tokens: Int[Array, " L"]) -> Float[Array, " hidden"]:
        """tanh of the projected mean word embedding of the non-padding tokens."""
        mask = (tokens != 0).astype(jnp.float32)
        bag = jnp.sum(self.embed[tokens] * mask[:, None], axis=0) / jnp.maximum(jnp.sum(mask), 1.0)
        return jnp.tanh(self.question_proj(bag))

    def image_vector(self, image) -> Float[Array, " hidden"]:
        """tanh of the projected pooled CNN features of the viewed image (not when blind)."""
        if self.image_proj is None:
            raise ValueError("image: a blind VQAModel has no image path")
        x = jnp.moveaxis(self.view.apply(image), -1, 0)  # (c, r, r)
        # easy-VQA shapes are small on a near-uniform background: without centring, the
        # background dominates every feature and the image path starts near constant
        x = 4.0 * (x - jnp.mean(x, axis=(1, 2), keepdims=True))
        for conv in self.convs:
            x = jax.nn.leaky_relu(conv(x), 0.1)
        return jnp.tanh(self.image_proj(x.reshape(-1)))

    def answer_logits(
        self, image_vector: Float[Array, " hidden"] | None, tokens: Int[Array, " L"]
    ) -> Float[Array, " n_answers"]:
        """The logits from a precomputed `image_vector` (None when blind) and the tokens
        (questions about one image share its image vector)."""
        q = self.question_vector(tokens)
        h = q if image_vector is None else jnp.concatenate([q, image_vector, q * image_vector])
        return self.head(jax.nn.relu(self.fuse(h)))

    def __call__(self, image, tokens: Int[Array, " L"]) -> Float[Array, " n_answers"]:
        v = None if self.image_proj is None else self.image_vector(image)
        return self.answer_logits(v, tokens)


def vqa_flops(model: VQAModel) -> int:
    """Forward FLOPs of one query of `model` (the routing cost), counted from layer shapes.

    FLOPs = 2 x multiply-accumulates of every convolution and dense layer:
    `sum_conv 2 * 9 * C_in * C_out * H_out * W_out + sum_dense 2 * d_in * d_out` (the
    image convolutions and projection only when the model is not blind; the question
    projection, fusion layer and answer head always). Biases, activations, pooling, the
    view transform and the embedding-bag mean are O(activations) and not counted.

    **Arguments:** `model`, a `VQAModel`.

    **Returns:** int FLOPs per query.
    """
    if not isinstance(model, VQAModel):
        raise ValueError(f"model: expected a VQAModel, received {type(model).__name__}")
    total = 0
    side = model.view.resolution
    for conv in model.convs:
        side = (side + conv.stride[0] - 1) // conv.stride[0]
        c_out, c_in, kh, kw = conv.weight.shape
        total += 2 * kh * kw * c_in * c_out * side * side
    dense = [model.question_proj, model.fuse, model.head]
    if model.image_proj is not None:
        dense.append(model.image_proj)
    for lin in dense:
        total += 2 * int(lin.in_features) * int(lin.out_features)
    return int(total)


class VQAFitStep(AbstractStep):
    """One optimiser step of weighted cross-entropy on a random minibatch of images and
    all the questions about them.

    Questions are grouped by image (`tokens` (I, Q, L), Q the most questions of one
    image, empty slots of weight 0), so each step runs the CNN once per image and the
    question path on all its questions (~10 per easy-VQA image). The model's trainable
    part (its inexact arrays) and the optimiser state are the state; its non-array part is
    a static field. The `batch_size` images are drawn uniformly with replacement from the
    step's key; the loss is `sum(w * CE) / sum(w)` over their questions.

    **Arguments:** `images` (I, H, W, 3) uint8, `tokens` (I, Q, L) int, `answers` (I, Q)
    int, `weights` (I, Q) float >= 0 (0 for empty slots), `static`
    (`eqx.partition(model, eqx.is_inexact_array)[1]`), `optimizer` (optax), `batch_size`.

    Aux: the minibatch's `loss` and weighted `accuracy` (before the update).
    """

    images: Array
    tokens: Int[Array, "I Q L"]
    answers: Int[Array, "I Q"]
    weights: Float[Array, "I Q"]
    static: Any = eqx.field(static=True)
    optimizer: optax.GradientTransformation = eqx.field(static=True)
    batch_size: int = eqx.field(static=True)

    def init(self, model, key):
        del key
        return init_params(self.optimizer, model)

    def step(self, state, key):
        idx = jax.random.randint(key, (self.batch_size,), 0, self.images.shape[0])
        imgs, toks = self.images[idx], self.tokens[idx]
        y, w = self.answers[idx], self.weights[idx]

        def loss_fn(model):
            if model.image_proj is None:
                v = None
                logits = jax.vmap(jax.vmap(lambda t: model.answer_logits(None, t)))(toks)
            else:
                v = jax.vmap(model.image_vector)(imgs)
                logits = jax.vmap(
                    lambda vi, ti: jax.vmap(lambda t: model.answer_logits(vi, t))(ti)
                )(v, toks)
            ce = optax.softmax_cross_entropy_with_integer_labels(logits, y)
            total = jnp.maximum(jnp.sum(w), 1e-12)
            hit = (jnp.argmax(logits, -1).astype(y.dtype) == y).astype(jnp.float32)
            return jnp.sum(w * ce) / total, jnp.sum(w * hit) / total

        state, loss, acc = descend(self.static, self.optimizer, state, loss_fn, has_aux=True)
        return state, {"loss": loss, "accuracy": acc}


def _group_by_image(n_images, tokens, answers, image_index, weights):
    """(I, Q, L) tokens, (I, Q) answers and weights of the questions grouped by image."""
    tokens, answers = np.asarray(tokens), np.asarray(answers)
    image_index, weights = np.asarray(image_index), np.asarray(weights, np.float32)
    order = np.argsort(image_index, kind="stable")
    counts = np.bincount(image_index, minlength=n_images)
    q = max(int(counts.max()), 1)
    slot = np.arange(order.size) - np.repeat(np.cumsum(counts) - counts, counts)
    rows = image_index[order]
    g_tok = np.zeros((n_images, q, tokens.shape[1]), np.int32)
    g_ans = np.zeros((n_images, q), np.int32)
    g_w = np.zeros((n_images, q), np.float32)
    g_tok[rows, slot] = tokens[order]
    g_ans[rows, slot] = answers[order]
    g_w[rows, slot] = weights[order]
    return g_tok, g_ans, g_w


def _image_values(images):
    """Pixel values checked (concrete arrays): uint8/integers in [0, 255], floats in
    [0, 1] (NaN/inf and values outside raise a `ValueError` naming `images`)."""
    if isinstance(images, jax.core.Tracer) or not images.size:
        return images
    if jnp.issubdtype(images.dtype, jnp.integer):
        check_range("images", images, low=0, high=255)
    else:
        check_range("images", images, low=0.0, high=1.0)
    return images


def _check_questions(images, tokens, answers, image_index, n_answers=None, vocab_size=None):
    images = _image_values(as_array("images", images, ndim=4))
    sizes: dict[str, int] = {}
    tokens = as_array("tokens", tokens, shape=("N", None), dtype=np.integer, sizes=sizes)
    if vocab_size is not None and not isinstance(tokens, jax.core.Tracer):
        check_ids("tokens", tokens, vocab_size, what="token ids")  # never clamped
    image_index = as_array(
        "image_index", image_index, shape=("N",), dtype=np.integer, sizes=sizes, nonempty=True
    )
    if images.shape[-1] != 3:
        raise ValueError(f"images: expected shape (I, H, W, 3), received {images.shape}")
    if (
        not isinstance(image_index, jax.core.Tracer)
        and image_index.size
        and (int(image_index.min()) < 0 or int(image_index.max()) >= images.shape[0])
    ):
        raise ValueError(
            f"image_index: expected indices in [0, {images.shape[0]}), received "
            f"[{int(image_index.min())}, {int(image_index.max())}]"
        )
    if answers is not None:
        answers = as_array("answers", answers, shape=("N",), dtype=np.integer, sizes=sizes)
        if (
            n_answers is not None
            and answers.size
            and (int(answers.min()) < 0 or int(answers.max()) >= n_answers)
        ):
            raise ValueError(
                f"answers: expected indices in [0, {n_answers}), received "
                f"[{int(answers.min())}, {int(answers.max())}]"
            )
    return images, tokens, answers, image_index


def fit_vqa(
    model: VQAModel,
    images,
    tokens,
    answers,
    image_index,
    *,
    key: jax.Array,
    steps: int = 1000,
    batch_size: int = 64,
    optimizer: optax.GradientTransformation | None = None,
    sample_weights=None,
    driver: Driver | None = None,
):
    """Train `model` on (image, question, answer) triples with `VQAFitStep` and `run_steps`.

    **Arguments:**

    - `model`: a `VQAModel`.
    - `images` (I, H, W, 3) uint8; `tokens` (N, L) int; `answers` (N,) int; `image_index`
      (N,) int into `images` (e.g. the fields of a `VQAData`).
    - `key`: PRNG key (initialisation is the caller's; this key drives the minibatches).
    - `steps`: optimiser steps.
    - `optimizer`: an optax transformation (default `optax.adam(3e-3)`).
    - `batch_size`: images per step (each with all its questions).
    - `sample_weights`: (N,) non-negative weights of the questions in the loss (e.g.
      equal total weight per question type), or None for equal weights.
    - `driver`: a `jaxlab.Driver` (chunk, 50 here when left at the default; a
      checkpointer for resumable fits; progress, e.g. `jaxlab.TqdmProgress()`, default
      none; `StepLoop()` unless it names a loop: XLA:CPU runs convolutions slowly inside
      a scan).

    **Returns:** `(trained_model, history)` (`history.losses` (steps,)).
    """
    if not isinstance(model, VQAModel):
        raise ValueError(f"model: expected a VQAModel, received {type(model).__name__}")
    if answers is None:  # `_check_questions` reads None as "no answers" (prediction)
        raise ValueError("answers: expected (N,) answer indices, received None")
    images, tokens, answers, image_index = _check_questions(
        images,
        tokens,
        answers,
        image_index,
        int(model.head.out_features),
        int(model.embed.shape[0]),
    )
    assert answers is not None
    n = answers.shape[0]
    if sample_weights is None:
        w = np.ones(n, np.float32)
    else:
        w = np.asarray(as_array("sample_weights", sample_weights, shape=(n,), finite=True, low=0.0))
        if not float(np.sum(w)) > 0:
            raise ValueError("sample_weights: expected a positive total, received 0")
    keep = np.asarray(image_index)
    g_tok, g_ans, g_w = _group_by_image(images.shape[0], tokens, answers, keep, w)
    static = eqx.partition(model, eqx.is_inexact_array)[1]
    opt = optax.adam(3e-3) if optimizer is None else optimizer
    step = VQAFitStep(
        images=images,
        tokens=jnp.asarray(g_tok),
        answers=jnp.asarray(g_ans),
        weights=jnp.asarray(g_w),
        static=static,
        optimizer=opt,
        batch_size=_check_image_batch(batch_size, images),
    )
    # XLA:CPU runs convolutions much slower inside a scan body: one jitted call per step
    return fit_params(
        step,
        model,
        key=key,
        steps=steps,
        driver=driver_for(driver, chunk=50, loop=StepLoop()),
    )


def _check_image_batch(batch_size, images) -> int:
    """`batch_size` images drawn per step (with replacement), bounded before allocation:
    their float32 values, what the network reads, must fit the memory available."""
    batch_size = check_positive_int("batch_size", batch_size)
    check_memory("batch_size", 4.0 * batch_size * int(np.prod(images.shape[1:])))
    return batch_size


@eqx.filter_jit
def _predict(model, images, tokens, image_index, batch_size):
    # each image's vector once, then every question about it (~10 per easy-VQA image)
    vectors = (
        None
        if model.image_proj is None
        else jax.lax.map(model.image_vector, images, batch_size=batch_size)
    )

    def one(args):
        toks, i = args
        v = None if vectors is None else vectors[i]
        return jnp.argmax(model.answer_logits(v, toks)).astype(jnp.int32)

    return jax.lax.map(one, (tokens, image_index), batch_size=batch_size)


def vqa_predict(model: VQAModel, images, tokens, image_index, *, batch_size: int = 256):
    """The answer index `model` gives to every question (argmax of its logits).

    **Arguments:** `model`; `images` (I, H, W, 3) uint8 in [0, 255] or float in [0, 1];
    `tokens` (N, L) int ids in [0, vocab_size) (never clamped); `image_index` (N,) int into
    `images`; `batch_size` questions per vectorised batch. Anything else raises a
    `ValueError` naming the argument.

    **Returns:** (N,) int32 answer indices.
    """
    if not isinstance(model, VQAModel):
        raise ValueError(f"model: expected a VQAModel, received {type(model).__name__}")
    images, tokens, _, image_index = _check_questions(
        images, tokens, None, image_index, vocab_size=int(model.embed.shape[0])
    )
    return _predict(
        model, images, tokens, image_index, check_positive_int("batch_size", batch_size)
    )
