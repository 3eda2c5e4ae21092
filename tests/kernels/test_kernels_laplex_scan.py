"""Scan strategies vs a plain Python loop (the recurrence written out)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab._kernels.laplex import (
    AssociativeScan,
    BlockedScan,
    CpuScan,
    PallasScan,
    cpu_kernel_available,
    default_scan,
)

STRATEGIES = [
    AssociativeScan(),
    BlockedScan(block=8),
    CpuScan(),
    PallasScan(chunk=8, tile=128, interpret=True),
]
IDS = ["assoc", "blocked", "cpu", "pallas_interpret"]


def _loop(alpha, x, reverse):
    n, k = x.shape
    out = np.zeros((n, k), x.dtype)
    h = np.zeros(k, x.dtype)
    if reverse:
        nxt = 0
        for j in range(n - 1, -1, -1):
            h = nxt * h + x[j]
            out[j] = h
            nxt = alpha[j]
    else:
        for j in range(n):
            h = alpha[j] * h + x[j]
            out[j] = h
    return out


def _data(rng, n, k, dtype):
    alpha = rng.uniform(0.0, 1.0, n)
    x = rng.standard_normal((n, k))
    if np.issubdtype(dtype, np.complexfloating):
        alpha = alpha * np.exp(1j * rng.uniform(0, 2 * np.pi, n))
        x = x + 1j * rng.standard_normal((n, k))
    return alpha.astype(dtype), x.astype(dtype)


def test_cpu_kernel_builds():
    assert cpu_kernel_available()
    assert isinstance(default_scan("cpu"), CpuScan)
    assert isinstance(default_scan("gpu"), PallasScan)


CASES = [
    (scan, dtype, n, k)
    for scan in STRATEGIES
    for dtype in (
        [np.float32, np.float64, np.complex64, np.complex128]
        if isinstance(scan, CpuScan)
        else [np.float32, np.complex128]
    )
    for n, k in [(1, 1), (37, 3)]
] + [(CpuScan(), np.float64, 130, 1)]


@pytest.mark.parametrize(("scan", "dtype", "n", "k"), CASES)
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_matches_loop(scan, dtype, reverse, n, k):
    rng = np.random.default_rng(n * 7 + k)
    alpha, x = _data(rng, n, k, dtype)
    out = jax.jit(lambda a, x: scan(a, x, reverse=reverse))(alpha, x)
    assert out.dtype == x.dtype
    assert out.shape == x.shape
    tol = 1e-5 if dtype in (np.float32, np.complex64) else 1e-12
    np.testing.assert_allclose(np.asarray(out), _loop(alpha, x, reverse), rtol=tol, atol=tol)


@pytest.mark.parametrize("scan", STRATEGIES, ids=IDS)
def test_scan_vmap_equals_loop(scan):
    rng = np.random.default_rng(3)
    al, xs = zip(*[_data(rng, 21, 2, np.float64) for _ in range(3)], strict=True)
    alpha, x = np.stack(al), np.stack(xs)
    fn = jax.jit(lambda a, x: scan(a, x, reverse=True))
    batched = jax.vmap(fn)(alpha, x)
    for i in range(3):
        single = fn(jnp.asarray(alpha[i]), jnp.asarray(x[i]))
        np.testing.assert_allclose(batched[i], single, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(batched[i], _loop(alpha[i], x[i], True), rtol=1e-12)


def test_cpu_scan_nested_vmap():
    rng = np.random.default_rng(4)
    alpha, x = _data(rng, 50, 1, np.float64)
    a2 = np.broadcast_to(alpha, (2, 3, 50)) * rng.uniform(0.5, 1, (2, 3, 1))
    x2 = np.broadcast_to(x, (2, 3, 50, 1)).copy()
    out = jax.vmap(jax.vmap(CpuScan()))(a2, x2)
    for i in range(2):
        for j in range(3):
            np.testing.assert_allclose(out[i, j], _loop(a2[i, j], x2[i, j], False), rtol=1e-12)


def test_cpu_scan_rejects_mixed_dtypes():
    with pytest.raises(ValueError, match="alpha and x"):
        CpuScan()(jnp.ones(3, jnp.float32), jnp.ones((3, 1), jnp.float64))


@pytest.mark.parametrize(("kwargs", "name"), [({"chunk": 12}, "chunk"), ({"tile": 0}, "tile")])
def test_pallas_bad_options(kwargs, name):
    with pytest.raises(ValueError, match=name):
        PallasScan(**kwargs)
