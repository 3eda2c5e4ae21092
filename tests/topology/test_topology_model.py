"""HOPSE / HOMP: jit = eager, vmap = loop, grad = finite differences, permutation symmetry."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab.topology as T
from jaxlab._core import StepLoop

SPEC = T.EncodingSpec(lappe_k=2, rwse_steps=3, heat_times=(1.0,), elstatic=True, cycle_lengths=(3,))


def _graph(seed):
    rng = np.random.default_rng(seed)
    edges = [[0, 1], [1, 2], [0, 2], [2, 3], [3, 4], [4, 5], [5, 6], [3, 6], [6, 7]]
    n = 8
    nf = rng.normal(size=(n, 3))
    ef = rng.normal(size=(len(edges), 2))
    edges = np.array(sorted(edges))
    return n, edges, nf, ef


def _arrays(seed=0, pad=None):
    n, edges, nf, ef = _graph(seed)
    cx = T.cycle_lift(n, edges)
    feats = T.lift_features(cx, nf, ef)
    enc = T.complex_encodings(cx, SPEC)
    sizes = pad(cx) if pad else (None, None)
    return T.complex_arrays(cx, feats, enc, cell_sizes=sizes[0], edge_sizes=sizes[1]), cx


def _models(arr, key):
    fd = [x.shape[1] for x in arr.x]
    k1, k2 = jax.random.split(key)
    return {
        "hopse": T.HOPSE(fd, SPEC.dim, 3, width=8, depth=1, key=k1),
        "homp": T.HOMP(fd, 3, width=8, depth=1, key=k2),
    }


def _permute(arr, perms):
    """Relabel the cells of every rank: new cell j of rank r is old cell perms[r][j]."""
    inv = [np.argsort(p) for p in perms]
    R = arr.max_rank
    x = tuple(arr.x[r][perms[r]] for r in range(R + 1))
    mask = tuple(arr.mask[r][perms[r]] for r in range(R + 1))
    enc = tuple(tuple(e[perms[r]] for e in arr.enc[r]) for r in range(R + 1))
    snd, rcv = [], []
    for r in range(R + 1):
        s_r, r_r = [], []
        for i, route in enumerate(T.rank_routes(r, R)):
            src = T.source_rank(r, route)
            s_r.append(jnp.asarray(inv[src][np.asarray(arr.senders[r][i])]))
            r_r.append(jnp.asarray(inv[r][np.asarray(arr.receivers[r][i])]))
        snd.append(tuple(s_r))
        rcv.append(tuple(r_r))
    return T.ComplexArrays(x, mask, enc, tuple(snd), tuple(rcv), arr.edge_mask, R)


@pytest.mark.parametrize("name", ["hopse", "homp"])
def test_permutation_equivariance_and_invariance(name, getkey):
    arr, cx = _arrays()
    model = _models(arr, getkey())[name]
    rng = np.random.default_rng(1)
    perms = [rng.permutation(n) for n in cx.sizes]
    parr = _permute(arr, perms)
    states, out = eqx.filter_jit(lambda m, a: m.cell_states(a)), eqx.filter_jit(lambda m, a: m(a))
    h, ph = states(model, arr), states(model, parr)
    for r in range(3):
        np.testing.assert_allclose(ph[r], h[r][perms[r]], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(out(model, parr), out(model, arr), rtol=1e-10, atol=1e-10)


def test_relabelled_graph_gives_same_output_end_to_end(getkey):
    # lift + encodings + model on a node-relabelled graph; LapPE off because its
    # sign is not canonical on graphs with sign-symmetric eigenvectors
    spec = T.EncodingSpec(
        lappe_k=0, rwse_steps=4, heat_times=(0.5, 2.0), elstatic=True, cycle_lengths=(3, 4)
    )
    n, edges, nf, ef = _graph(0)
    perm = np.random.default_rng(2).permutation(n)  # new node i = old node perm[i]
    inv = np.argsort(perm)
    new_edges = np.sort(inv[edges], axis=1)
    order = np.lexsort((new_edges[:, 1], new_edges[:, 0]))
    outs = []
    for e, f, g in [(edges, nf, ef), (new_edges[order], nf[perm], ef[order])]:
        cx = T.cycle_lift(n, e)
        outs.append(T.complex_arrays(cx, T.lift_features(cx, f, g), T.complex_encodings(cx, spec)))
    fd = [x.shape[1] for x in outs[0].x]
    k1, k2 = jax.random.split(getkey())
    for model in (T.HOPSE(fd, spec.dim, 2, width=8, key=k1), T.HOMP(fd, 2, width=8, key=k2)):
        out = eqx.filter_jit(lambda m, a: m(a))
        np.testing.assert_allclose(out(model, outs[1]), out(model, outs[0]), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", ["hopse", "homp"])
def test_padding_does_not_change_output(name, getkey):
    arr, cx = _arrays()

    def pad(c):
        cells = tuple(s + 3 for s in c.sizes)
        edges = tuple(
            tuple(len(T.route_edges(c, r, rt)[0]) + 5 for rt in T.rank_routes(r, 2))
            for r in range(3)
        )
        return cells, edges

    parr, _ = _arrays(pad=pad)
    model = _models(arr, getkey())[name]
    out, states = eqx.filter_jit(lambda m, a: m(a)), eqx.filter_jit(lambda m, a: m.cell_states(a))
    np.testing.assert_allclose(out(model, parr), out(model, arr), rtol=1e-10, atol=1e-10)
    h, ph = states(model, arr), states(model, parr)
    for r in range(3):
        np.testing.assert_allclose(ph[r][: cx.sizes[r]], h[r], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", ["hopse", "homp"])
def test_jit_equals_eager_and_vmap_equals_loop(name, getkey):
    sizes = T.max_sizes([_arrays(s)[1] for s in range(3)])
    items = [_arrays(s, pad=lambda c: sizes)[0] for s in range(3)]
    batch = T.stack_complex_arrays(items)
    model = _models(items[0], getkey())[name]
    with jax.disable_jit():
        eager = model(items[0])
    np.testing.assert_allclose(eqx.filter_jit(model)(items[0]), eager, rtol=1e-12, atol=1e-12)
    looped = jnp.stack([eqx.filter_jit(model)(it) for it in items])
    np.testing.assert_allclose(jax.vmap(model)(batch), looped, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        T.predict(model, batch, batch_size=2), looped, rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize("name", ["hopse", "homp"])
def test_grad_matches_finite_differences(name, getkey):
    arr, _ = _arrays()
    model = _models(arr, getkey())[name]
    direction = jax.tree_util.tree_map(
        lambda p: jax.random.normal(jax.random.key(3), p.shape, p.dtype),
        eqx.filter(model, eqx.is_inexact_array),
    )

    @eqx.filter_jit
    def f(m, x1):
        a = eqx.tree_at(lambda t: t.x[1], arr, x1)
        return jnp.sum(jnp.sin(m(a)))

    gm, gx = (
        eqx.filter_jit(eqx.filter_grad(f))(model, arr.x[1]),
        jax.jit(jax.grad(lambda x: f(model, x)))(arr.x[1]),
    )
    eps = 1e-6
    shift = lambda s: eqx.apply_updates(model, jax.tree_util.tree_map(lambda d: s * d, direction))  # noqa: E731
    fd = (f(shift(eps), arr.x[1]) - f(shift(-eps), arr.x[1])) / (2 * eps)
    ad = sum(
        jnp.vdot(a, b)
        for a, b in zip(
            jax.tree_util.tree_leaves(gm), jax.tree_util.tree_leaves(direction), strict=True
        )
    )
    np.testing.assert_allclose(ad, fd, rtol=1e-5, atol=1e-7)
    v = jax.random.normal(jax.random.key(4), arr.x[1].shape)
    fdx = (f(model, arr.x[1] + eps * v) - f(model, arr.x[1] - eps * v)) / (2 * eps)
    np.testing.assert_allclose(jnp.vdot(gx, v), fdx, rtol=1e-5, atol=1e-7)


def test_training_fits_and_vmaps_over_folds(getkey):
    sizes = T.max_sizes([_arrays(s)[1] for s in range(8)])
    data = T.stack_complex_arrays([_arrays(s, pad=lambda c: sizes)[0] for s in range(8)])
    y = jnp.asarray(np.arange(8) % 2)
    fd = [x.shape[-1] for x in data.x]
    model = T.HOPSE(fd, SPEC.dim, 2, width=8, depth=1, key=getkey())
    trainer = T.Trainer(model, loss="cross_entropy", batch_size=4, learning_rate=1e-2)
    epoch = eqx.filter_jit(trainer.epoch)
    w = jnp.ones(8)
    state = trainer.init(model)
    first = None
    for e in range(25):
        state, loss = epoch(state, data, y, w, jax.random.key(e))
        first = loss if first is None else first
    assert loss < 0.5 * first  # the features of each graph differ, so it can memorise
    # vmap over two folds with per-fold weights equals two separate runs
    weights = jnp.stack([w.at[:2].set(0.0), w.at[6:].set(0.0)])
    keys = jax.random.split(jax.random.key(9), 2)
    states = jax.tree_util.tree_map(lambda a: jnp.stack([a, a]), trainer.init(model))
    vstep = eqx.filter_jit(eqx.filter_vmap(trainer.epoch, in_axes=(0, None, None, 0, 0)))
    vstates, vloss = vstep(states, data, y, weights, keys)
    for i in range(2):
        s_i, l_i = epoch(trainer.init(model), data, y, weights[i], keys[i])
        np.testing.assert_allclose(vloss[i], l_i, rtol=1e-10)
        for a, b in zip(
            jax.tree_util.tree_leaves(s_i.params),
            jax.tree_util.tree_leaves(vstates.params),
            strict=True,
        ):
            np.testing.assert_allclose(b[i], a, rtol=1e-9, atol=1e-12)


def test_regression_losses_and_bad_inputs(getkey):
    arr, cx = _arrays()
    fd = [x.shape[1] for x in arr.x]
    model = T.HOPSE(fd, SPEC.dim, 1, width=8, key=getkey())
    for loss in ("l1", "mse"):
        T.Trainer(model, loss=loss)
    with pytest.raises(ValueError, match="loss"):
        T.Trainer(model, loss="hinge")
    with pytest.raises(ValueError, match="batch_size"):
        T.Trainer(model, loss="l1", batch_size=0)
    with pytest.raises(ValueError, match=r"arrays.x\[0\]"):
        T.HOPSE([5, 5, 5], SPEC.dim, 1, key=getkey())(arr)
    with pytest.raises(ValueError, match="ComplexArrays"):
        model(arr.x)
    with pytest.raises(ValueError, match="node_features"):
        T.lift_features(cx, np.zeros((3, 2)))
    with pytest.raises(ValueError, match="node_features"):
        T.lift_features(cx, np.full((cx.sizes[0], 2), np.nan))
    with pytest.raises(ValueError, match="features"):
        T.complex_arrays(cx, T.lift_features(cx, np.zeros((cx.sizes[0], 2)))[:2])
    with pytest.raises(ValueError, match="padding size"):
        T.complex_arrays(cx, T.lift_features(cx, np.zeros((cx.sizes[0], 2))), cell_sizes=(2, 2, 2))
    with pytest.raises(ValueError, match="share padded shapes"):
        T.stack_complex_arrays(
            [arr, _arrays(pad=lambda c: ((20, 20, 5), ((30,) * 2, (30,) * 4, (30,) * 2)))[0]]
        )


def test_hopse_step_passes_the_shared_step_checks(getkey, tmp_path):
    from tests.step_checks import check_step

    vmapped = True  # two folds at once (the experiments' case; the plain path is the same)
    sizes = T.max_sizes([_arrays(s)[1] for s in range(8)])
    data = T.stack_complex_arrays([_arrays(s, pad=lambda c: sizes)[0] for s in range(8)])
    y = jnp.asarray(np.arange(8) % 2)

    def build(k):
        return T.HOPSE([x.shape[-1] for x in data.x], SPEC.dim, 2, width=4, depth=1, key=k)

    model = build(getkey())
    trainer = T.Trainer(model, loss="cross_entropy", batch_size=4, learning_rate=1e-2)
    w = jnp.ones(8)
    if vmapped:  # two folds, eval predictions every 2nd epoch
        w = jnp.stack([w.at[:2].set(0.0), w.at[6:].set(0.0)])
        model = eqx.filter_vmap(build)(jax.random.split(getkey(), 2))
    step = T.HopseStep(trainer, data, y, w, vmapped=vmapped, eval_data={"all": data}, eval_every=2)
    check_step(
        step, step.init(model, getkey()), key=getkey(), steps=4, tmp_path=tmp_path, loop=StepLoop()
    )
    # the fit wrapper: epoch e shuffles with fold_in(key, e), like a hand-written loop
    key = getkey()
    state, hist = T.fit(
        trainer,
        model,
        data,
        y,
        w,
        key=key,
        steps=4,
        vmapped=vmapped,
        eval_data={"all": data},
        eval_every=2,
    )
    ref = trainer.init(model) if not vmapped else eqx.filter_vmap(trainer.init)(model)
    epoch = (
        trainer.epoch
        if not vmapped
        else eqx.filter_vmap(trainer.epoch, in_axes=(0, None, None, 0, 0))
    )
    for e in range(4):
        k = jax.random.fold_in(key, e)
        ref, loss = eqx.filter_jit(epoch)(ref, data, y, w, jax.random.split(k, 2) if vmapped else k)
        np.testing.assert_allclose(hist.aux["losses" if vmapped else "loss"][e], loss, rtol=1e-6)
        pred = hist.aux["pred_all"][e]
        if e % 2 == 1:  # after epochs 2 and 4: the model's predictions
            want = (
                eqx.filter_vmap(lambda s: T.predict(trainer.model(s), data))(ref)
                if vmapped
                else T.predict(trainer.model(ref), data)
            )
            np.testing.assert_allclose(pred, want, rtol=1e-6, atol=1e-7)
        else:
            np.testing.assert_array_equal(pred, 0.0)
    assert hist.losses.shape == (4,)
    np.testing.assert_allclose(hist.losses, hist.aux["losses"].mean(1), rtol=1e-6)
    for a, b in zip(jax.tree_util.tree_leaves(state), jax.tree_util.tree_leaves(ref), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)


def test_fit_with_per_run_targets_equals_separate_runs(getkey):
    """`fit(..., vmapped=True)` with targets `(S, g)` (each run its own, e.g. standardised
    with its own split's statistics) trains run i exactly as a plain fit on row i."""
    sizes = T.max_sizes([_arrays(s)[1] for s in range(8)])
    data = T.stack_complex_arrays([_arrays(s, pad=lambda c: sizes)[0] for s in range(8)])
    y = jnp.stack([jnp.linspace(-1.0, 1.0, 8), jnp.linspace(2.0, -3.0, 8) ** 2])
    w = jnp.stack([jnp.ones(8).at[:2].set(0.0), jnp.ones(8).at[6:].set(0.0)])

    def build(k):
        return T.HOPSE([x.shape[-1] for x in data.x], SPEC.dim, 1, width=4, depth=1, key=k)

    keys = jax.random.split(getkey(), 2)
    trainer = T.Trainer(build(keys[0]), loss="mse", batch_size=4, learning_rate=1e-2)
    key = getkey()
    state, hist = T.fit(
        trainer, eqx.filter_vmap(build)(keys), data, y, w, key=key, steps=3, vmapped=True
    )
    for i in range(2):
        ref = trainer.init(build(keys[i]))
        for e in range(3):
            k = jax.random.split(jax.random.fold_in(key, e), 2)[i]
            ref, loss = eqx.filter_jit(trainer.epoch)(ref, data, y[i], w[i], k)
            np.testing.assert_allclose(hist.aux["losses"][e, i], loss, rtol=1e-6)
        for a, b in zip(
            jax.tree_util.tree_leaves(ref.params),
            jax.tree_util.tree_leaves(state.params),
            strict=True,
        ):
            np.testing.assert_allclose(b[i], a, rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="targets"):
        T.fit(trainer, build(keys[0]), data, y, w[0], key=key, steps=1)


def _hopse_states_per_route(model, arr):
    """HOPSE's cell states by the literal formula: `W_r x + b_r + sum_i MLP_{r,i}(e_i)`, one
    route MLP applied per cell at a time, then the residual blocks (the oracle of the fused
    embedding + encoder matmuls in `HOPSE.cell_states`)."""
    states = []
    for r in range(model.max_rank + 1):
        h = jax.vmap(model.embed[r])(arr.x[r])
        for mlp, e in zip(model.encoders[r], arr.enc[r], strict=True):
            h = h + jax.vmap(mlp)(e)
        for layer in model.blocks:
            h = jax.vmap(layer[r])(h)
        states.append(h)
    return tuple(states)


def _hopse_out_per_route(model, arr):
    states = _hopse_states_per_route(model, arr)
    pooled = sum(
        jnp.sum(jax.vmap(lin)(h) * m[:, None], axis=0)
        for lin, h, m in zip(model.readout, states, arr.mask, strict=True)
    )
    return model.head(pooled)


def test_hopse_per_route_fused_encoders_equal_the_per_route_formula(getkey, tmp_path):
    graphs, _ = T.load_mutag()
    data, _ = T.prepare_dataset("mutag5", graphs[:5], cache_dir=tmp_path, dtype=np.float64)
    fd = [x.shape[-1] for x in data.x]
    model = T.HOPSE(
        fd, data.enc[0][0].shape[-1], 2, width=16, depth=2, encoder="per_route", key=getkey()
    )
    model = jax.tree_util.tree_map(
        lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, model
    )
    fused = eqx.filter_jit(lambda m, d: jax.vmap(m.cell_states)(d))(model, data)
    literal = eqx.filter_jit(lambda m, d: jax.vmap(lambda a: _hopse_states_per_route(m, a))(d))(
        model, data
    )
    for f, lit in zip(fused, literal, strict=True):
        assert f.dtype == jnp.float64
        assert f.shape == lit.shape
        np.testing.assert_allclose(np.asarray(f), np.asarray(lit), rtol=1e-10, atol=1e-10)
        assert float(jnp.abs(lit).max()) > 0.1  # the states are not all zero
    g_f = eqx.filter_jit(eqx.filter_grad(lambda m: jnp.sum(jax.vmap(m)(data) ** 2)))(model)
    g_l = eqx.filter_jit(
        eqx.filter_grad(
            lambda m: jnp.sum(jax.vmap(lambda a: _hopse_out_per_route(m, a))(data) ** 2)
        )
    )(model)
    for a, b in zip(jax.tree_util.tree_leaves(g_f), jax.tree_util.tree_leaves(g_l), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-10)


def _np_linear(lin, h):
    return h @ np.asarray(lin.weight).T + np.asarray(lin.bias)


def _np_block(block, h):
    """`LayerNorm(h + W_2 relu(W_1 h + b_1) + b_2)` in NumPy (equinox's LayerNorm: eps 1e-5,
    elementwise affine)."""
    first, second = block.mlp.layers
    h = h + _np_linear(second, np.maximum(_np_linear(first, h), 0.0))
    mu = h.mean(-1, keepdims=True)
    var = ((h - mu) ** 2).mean(-1, keepdims=True)
    norm = block.norm
    return (h - mu) / np.sqrt(var + norm.eps) * np.asarray(norm.weight) + np.asarray(norm.bias)


def _np_hopse_joined(model, arr):
    """NumPy float64 reference of the joined-encoder HOPSE on one complex, route by route:
    `h = W_x x + sum_i W_i e_i + b` with `W = [W_x, W_1, ..., W_k]` split into its column
    blocks, then the residual blocks, per-cell readout `V_r h + c_r` summed over real cells,
    head. Returns (states per rank, output)."""
    states, pooled = [], 0.0
    for r in range(model.max_rank + 1):
        w, b = np.asarray(model.embed[r].weight), np.asarray(model.embed[r].bias)
        x = np.asarray(arr.x[r])
        f = x.shape[1]
        h = x @ w[:, :f].T + b
        col = f
        for e in arr.enc[r]:  # one product per route
            e = np.asarray(e)
            h = h + e @ w[:, col : col + e.shape[1]].T
            col += e.shape[1]
        assert col == w.shape[1]
        for layer in model.blocks:
            h = _np_block(layer[r], h)
        states.append(h)
        pooled = pooled + (_np_linear(model.readout[r], h) * np.asarray(arr.mask[r])[:, None]).sum(
            0
        )
    first, second = model.head.layers
    return states, _np_linear(second, np.maximum(_np_linear(first, pooled), 0.0))


def test_hopse_joined_encoder_equals_a_numpy_per_route_reference(getkey, tmp_path):
    graphs, _ = T.load_mutag()
    data, _ = T.prepare_dataset("mutag4", graphs[:4], cache_dir=tmp_path, dtype=np.float64)
    fd = [x.shape[-1] for x in data.x]
    d = data.enc[0][0].shape[-1]
    model = T.HOPSE(fd, d, 2, width=16, depth=2, key=getkey())
    model = jax.tree_util.tree_map(
        lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, model
    )
    assert model.encoder == "joined"
    assert model.encoders == ((), (), ())
    # one linear per rank over the features and all its routes' encodings
    assert [lin.weight.shape[1] for lin in model.embed] == [
        f + len(T.rank_routes(r, 2)) * d for r, f in enumerate(fd)
    ]
    states = eqx.filter_jit(lambda m, a: jax.vmap(m.cell_states)(a))(model, data)
    out = eqx.filter_jit(lambda m, a: jax.vmap(m)(a))(model, data)
    for g in range(4):
        arr = jax.tree_util.tree_map(lambda a, g=g: a[g], data)
        want_states, want_out = _np_hopse_joined(model, arr)
        for r in range(3):
            assert states[r].dtype == jnp.float64
            np.testing.assert_allclose(
                np.asarray(states[r][g]), want_states[r], rtol=1e-10, atol=1e-10
            )
            assert np.abs(want_states[r]).max() > 0.1
        np.testing.assert_allclose(np.asarray(out[g]), want_out, rtol=1e-10, atol=1e-10)
        assert np.abs(want_out).max() > 1e-3


def test_hopse_encoder_argument_and_encoding_shapes_are_checked(getkey):
    arr, _ = _arrays()
    fd = [x.shape[1] for x in arr.x]
    with pytest.raises(ValueError, match="encoder"):
        T.HOPSE(fd, SPEC.dim, 2, encoder="shared", key=getkey())
    with pytest.raises(ValueError, match=r"arrays.enc\[0\]"):
        T.HOPSE(fd, SPEC.dim + 1, 2, key=getkey())(arr)
