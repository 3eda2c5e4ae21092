import anndata
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxlab import Driver, cells


@pytest.fixture(scope="module")
def pbmc():
    return cells.load_pbmc68k()


def test_epps_pulley_null_mean_and_power(getkey):
    # Under N(0, 1) the statistic's expectation is the integral of (1 - phi^2) phi.
    null = cells.epps_pulley_null_mean()
    assert null == pytest.approx(1.05, abs=0.03)
    x = jax.random.normal(getkey(), (400, 512))
    stats = cells.epps_pulley(x)
    assert float(jnp.mean(stats)) == pytest.approx(null, rel=0.1)
    shifted = cells.epps_pulley(x[:, :8] + 1.0)
    wide = cells.epps_pulley(3.0 * x[:, :8])
    assert float(jnp.min(shifted)) > 40 * null
    assert float(jnp.min(wide)) > 40 * null


def test_epps_pulley_matches_direct_quadrature(getkey):
    x = np.asarray(jax.random.normal(getkey(), (50, 1))) * 1.3 + 0.2
    t = np.linspace(-3, 3, 20001)
    ecf = np.exp(1j * np.outer(t, x[:, 0])).mean(1)
    integrand = np.abs(ecf - np.exp(-(t**2) / 2)) ** 2 * np.exp(-(t**2) / 2)
    dense = 50 * np.trapezoid(integrand, t)
    fine = float(cells.epps_pulley(jnp.asarray(x), n_points=2001)[0])
    assert fine == pytest.approx(dense, rel=1e-6)
    coarse = float(cells.epps_pulley(jnp.asarray(x))[0])  # the 17-point rule
    assert coarse == pytest.approx(dense, rel=0.05)


def test_sigreg_small_on_isotropic_large_on_anisotropic_and_grad_pushes(getkey):
    z = jax.random.normal(getkey(), (512, 8))
    key = getkey()
    iso = float(cells.sigreg(z, key=key))
    aniso = z * jnp.asarray([4.0, 1, 1, 1, 1, 1, 1, 0.2])[None]
    assert iso < 3 * cells.epps_pulley_null_mean()  # slices share samples: mean fluctuates
    assert float(cells.sigreg(aniso, key=key)) > 20 * iso
    assert float(cells.sigreg(z + 0.8, key=key)) > 20 * iso

    # Gradient descent on SIGReg moves an anisotropic cloud towards isotropy.
    def cov_gap(a):
        return float(jnp.linalg.norm(jnp.cov(a.T) - jnp.eye(8)))

    step = jax.jit(lambda a, k: a - 2.0 * jax.grad(lambda b: cells.sigreg(b, key=k))(a))
    moved = aniso
    for i in range(30):
        moved = step(moved, jax.random.fold_in(key, i))
    assert float(cells.sigreg(moved, key=key)) < 0.5 * float(cells.sigreg(aniso, key=key))
    assert cov_gap(moved) < 0.8 * cov_gap(aniso)


def test_jepa_score_linear_encoder_is_log_volume(getkey):
    w = jax.random.normal(getkey(), (4, 30))
    x = jax.random.normal(getkey(), (30,))
    want = 0.5 * jnp.linalg.slogdet(w @ w.T)[1]
    got = cells.jepa_score(lambda v: w @ v, x)
    assert float(got) == pytest.approx(float(want), rel=1e-10)
    # Sketched version: unbiased for J J^T, close for a large sketch.
    sk = cells.jepa_score_sketched(lambda v: w @ v, x, key=getkey(), rank=4000)
    assert float(sk) == pytest.approx(float(want), abs=0.1)
    # Clipping: a rank-deficient Jacobian contributes log(1e-6) per zero singular value.
    w0 = w.at[3].set(0.0)
    got0 = cells.jepa_score(lambda v: w0 @ v, x)
    want0 = 0.5 * jnp.linalg.slogdet(w0[:3] @ w0[:3].T)[1] + jnp.log(1e-6)
    assert float(got0) == pytest.approx(float(want0), rel=1e-8)


def test_score_batching_equals_loop_and_attribution_grad(getkey):
    model = cells.LeCellModel(12, 3, 16, key=getkey())
    xs = jax.random.uniform(getkey(), (5, 12)) * 3
    batched = jax.vmap(lambda x: cells.jepa_score(model.embed, x))(xs)
    loop = jnp.stack([cells.jepa_score(model.embed, x) for x in xs])
    np.testing.assert_allclose(np.asarray(batched), np.asarray(loop), rtol=1e-10)
    jitted = jax.jit(jax.vmap(lambda x: cells.jepa_score(model.embed, x)))(xs)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(loop), rtol=1e-10)
    x = xs[0]
    attr = cells.gene_attribution(model.embed, x)
    eps = 1e-6
    for i in (0, 5, 11):
        e = jnp.zeros(12).at[i].set(eps)
        fd = (cells.jepa_score(model.embed, x + e) - cells.jepa_score(model.embed, x - e)) / (
            2 * eps
        )
        assert float(attr[i]) == pytest.approx(float(x[i] * fd), rel=1e-5, abs=1e-9)


def test_pbmc_counts_recovered_exactly(pbmc):
    assert pbmc.shape == (700, 765)
    assert "bulk_labels" in pbmc.obs
    x = pbmc.X
    assert np.all(x == np.round(x))
    assert x.min() == 0
    # Re-normalising the recovered counts reproduces the file's log values.
    relog = np.log1p(x / pbmc.obs["n_counts"].to_numpy()[:, None] * 1e4)
    np.testing.assert_allclose(relog, pbmc.layers["logcounts"], atol=2e-3)


def test_fit_anndata_roundtrip_keeps_obs_var(pbmc, getkey):
    small = pbmc[:64].copy()
    model, out = cells.fit(
        small,
        key=getkey(),
        steps=4,
        driver=Driver(chunk=2),
        batch_size=32,
        width=32,
        latent_dim=4,
    )
    assert out.obsm["X_lecell"].shape == (64, 4)
    assert out.obs["jepa_score"].shape == (64,)
    assert np.all(np.isfinite(out.obs["jepa_score"]))
    assert out.layers["jepa_attribution"].shape == (64, 765)
    z = out.obsm["X_lecell"]
    np.testing.assert_allclose(
        out.obs["jepa_logdensity"], out.obs["jepa_score"] - 0.5 * (z**2).sum(1), rtol=1e-12
    )
    assert list(out.obs_names) == list(small.obs_names)
    assert list(out.var_names) == list(small.var_names)
    assert (out.obs["bulk_labels"] == small.obs["bulk_labels"]).all()
    assert "X_lecell" not in small.obsm  # input untouched
    # the public scoring calls give what fit wrote; the raw encoder MLP is refused
    logx = jnp.asarray(cells.log_normalize(cells.counts_matrix(small)), jnp.result_type(float))
    expect = out.obs["jepa_score"].to_numpy()
    for i in (0, 5):
        np.testing.assert_allclose(cells.jepa_score(model, logx[i]), expect[i], rtol=1e-8)
        np.testing.assert_allclose(model.score(logx[i]), expect[i], rtol=1e-8)
    with pytest.raises(ValueError, match="^encoder: expected a LeCellModel"):
        cells.jepa_score(model.encoder, logx[0])
    with pytest.raises(ValueError, match="^encoder: expected a LeCellModel"):
        cells.gene_attribution(model.encoder, logx[0])
    # annotate returns the keys fit writes, with the same values
    ann = cells.annotate(model, cells.counts_matrix(small), attributions=False)
    assert set(ann) == {"X_lecell", "jepa_score", "jepa_logdensity"}
    np.testing.assert_allclose(ann["jepa_score"], expect, rtol=1e-8)
    np.testing.assert_allclose(ann["X_lecell"], out.obsm["X_lecell"], rtol=1e-8)
    np.testing.assert_allclose(ann["jepa_logdensity"], out.obs["jepa_logdensity"], rtol=1e-8)


def test_fit_rejects_log_normalised_values(pbmc, getkey):
    small = pbmc[:32].copy()
    with pytest.raises(ValueError, match="layer 'logcounts': expected raw integer counts"):
        cells.fit(small, key=getkey(), layer="logcounts", steps=1, width=8, latent_dim=2)
    small.X = small.layers["logcounts"]
    with pytest.raises(ValueError, match="^adata: expected raw integer counts"):
        cells.fit(small, key=getkey(), steps=1, width=8, latent_dim=2)
    with pytest.raises(ValueError, match="^counts: expected raw integer counts"):
        cells.train_lecell(np.asarray(small.X), key=getkey(), steps=1)


def test_counts_are_normalised_opt_out_uses_the_values_as_the_model_input(pbmc, getkey):
    small = pbmc[:32].copy()
    raw = cells.counts_matrix(small)
    model, _ = cells.train_lecell(
        raw, key=getkey(), steps=2, driver=Driver(chunk=2), width=8, latent_dim=2
    )
    # the model sees log_normalize(raw) either way: stating it gives the same annotation
    own = cells.annotate(model, raw, attributions=False)
    stated = cells.annotate(
        model, cells.log_normalize(raw), attributions=False, counts_are_normalised=True
    )
    for k in own:
        np.testing.assert_allclose(stated[k], own[k], rtol=1e-6, atol=1e-6)
    # fit on the log layer trains when told, and still refuses negative values
    _, out = cells.fit(
        small,
        key=getkey(),
        layer="logcounts",
        counts_are_normalised=True,
        steps=2,
        driver=Driver(chunk=2),
        width=8,
        latent_dim=2,
        attributions=False,
    )
    assert np.all(np.isfinite(out.obs["jepa_score"].to_numpy()))
    with pytest.raises(ValueError, match="^counts"):
        cells.annotate(model, -np.ones((3, raw.shape[1])), counts_are_normalised=True)


def test_train_reduces_loss(pbmc, getkey):
    counts = cells.counts_matrix(pbmc[:200])
    _, hist = cells.train_lecell(
        counts,
        key=getkey(),
        steps=120,
        driver=Driver(chunk=40),
        batch_size=64,
        width=64,
        latent_dim=4,
    )
    curves = hist.aux
    assert curves["loss"].shape == curves["sigreg"].shape == (120,)
    assert curves["loss"][-10:].mean() < 0.5 * curves["loss"][:10].mean()


def test_lecell_step_passes_the_shared_step_checks(pbmc, getkey, tmp_path):
    from tests.step_checks import check_step

    counts = cells.counts_matrix(pbmc[:40])
    model = cells.LeCellModel(counts.shape[1], 3, 16, key=getkey())
    step = cells.LeCellStep(
        model, counts, optimizer=optax.adamw(1e-3, weight_decay=1e-4), batch_size=16
    )
    check_step(step, step.init(model, getkey()), key=getkey(), steps=6, tmp_path=tmp_path)
    with pytest.raises(ValueError, match="model"):
        step.init(cells.LeCellModel(counts.shape[1], 4, 16, key=getkey()), getkey())


def test_train_lecell_resumes_from_a_checkpointer(pbmc, getkey, tmp_path):
    from jaxlab._core import Checkpointer

    counts = cells.counts_matrix(pbmc[:40])
    kw = dict(key=getkey(), steps=6, batch_size=16, width=16, latent_dim=3)
    ref, ref_hist = cells.train_lecell(counts, driver=Driver(chunk=2), **kw)
    ck = Checkpointer(tmp_path / "lecell.eqx", every=4, resume=True)
    driver = Driver(chunk=2, checkpointer=ck)
    cells.train_lecell(counts, driver=driver, **kw)
    again, hist = cells.train_lecell(counts, driver=driver, **kw)  # finished: reloads
    np.testing.assert_array_equal(hist.losses, ref_hist.losses)
    np.testing.assert_array_equal(
        np.asarray(again.encoder.layers[0].weight), np.asarray(ref.encoder.layers[0].weight)
    )


def test_batches_and_spike(pbmc):
    b = cells.simulate_batches(pbmc, 3, key=jax.random.key(1))
    assert set(b.obs["batch"].cat.categories) == {"batch0", "batch1", "batch2"}
    s = cells.spike_program(pbmc, 0.1, key=jax.random.key(2), doses=(2.0,))
    stim = s.obs["stimulated"].to_numpy()
    assert stim.sum() == 70
    cols = [pbmc.var_names.get_loc(g) for g in cells.INTERFERON_PROGRAM]
    up = s.X[stim][:, cols].mean() / max(pbmc.X[stim][:, cols].mean(), 1e-9)
    assert up > 2.0
    np.testing.assert_array_equal(s.X[~stim], pbmc.X[~stim])


def test_nb_log_likelihood_matches_scipy():
    from scipy.stats import nbinom

    x = jnp.asarray([0.0, 1.0, 5.0, 20.0])
    mean, theta = jnp.asarray(3.0), jnp.asarray(2.0)
    p = float(theta / (theta + mean))
    want = nbinom.logpmf(np.asarray(x), float(theta), p)
    np.testing.assert_allclose(np.asarray(cells.nb_log_likelihood(x, mean, theta)), want, rtol=1e-6)


def test_knn_atypicality_flags_outlier():
    rng = np.random.default_rng(0)
    x = np.vstack([rng.normal(size=(100, 2)), [[8.0, 8.0]]])
    assert np.argmax(cells.knn_atypicality(x, k=5)) == 100


def test_bad_inputs(pbmc):
    bad = pbmc[:20].copy()
    bad.X[0, 0] = np.nan
    with pytest.raises(ValueError, match="adata: expected finite counts"):
        cells.counts_matrix(bad)
    with pytest.raises(ValueError, match="layer: expected one of"):
        cells.counts_matrix(pbmc, "spliced")
    with pytest.raises(ValueError, match="adata / min_cells: expected at least min_cells=10 cells"):
        cells.counts_matrix(pbmc[:5])
    neg = anndata.AnnData(X=-np.ones((20, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="non-negative counts"):
        cells.counts_matrix(neg)
    with pytest.raises(ValueError, match="fraction: expected values in"):
        cells.spike_program(pbmc, 0.0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="n_points: expected an odd integer"):
        cells.epps_pulley(jnp.zeros((4, 2)), n_points=16)


def test_nbvae_trains(pbmc, getkey):
    counts = cells.counts_matrix(pbmc[:100])
    model, emb = cells.train_nbvae(
        counts, np.arange(100) % 2, key=getkey(), steps=30, batch_size=32, latent_dim=3
    )
    assert emb.shape == (100, 3)
    assert np.all(np.isfinite(emb))


def test_nbvae_step_passes_the_shared_step_checks(pbmc, getkey, tmp_path):
    from tests.step_checks import check_step

    counts = cells.counts_matrix(pbmc[:40])
    model = cells.NBVAE(counts.shape[1], 2, 3, 16, key=getkey())
    step = cells.NBVAEStep(
        model, counts, np.eye(2)[np.arange(40) % 2], optimizer=optax.adam(1e-3), batch_size=16
    )
    check_step(step, step.init(model, getkey()), key=getkey(), steps=6, tmp_path=tmp_path)
