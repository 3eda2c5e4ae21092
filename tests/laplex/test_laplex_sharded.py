"""Sharded matvec on 4 simulated CPU devices equals the single-device result."""

from __future__ import annotations

import textwrap

from tests.simulated_devices import run_on_devices

SCRIPT = textwrap.dedent("""
    import jax, numpy as np
    jax.config.update("jax_enable_x64", True)
    assert len(jax.devices()) == 4, jax.devices()
    from jaxlab import laplex
    from jaxlab._kernels.laplex import BlockedScan, CpuScan
    rng = np.random.default_rng(0)
    worst = 0.0
    for phased in (False, True):
        for m, n in ((13, 21),):
            t = np.round(rng.uniform(-3, 3, (2, m)), 1)
            s = np.round(rng.uniform(-3, 3, (2, n)), 1)
            a, c = rng.uniform(0.2, 2, 2), rng.standard_normal(2)
            b = rng.uniform(-2, 2, 2) if phased else None
            v = rng.standard_normal((n, 3))
            ref = np.asarray(laplex.matmat(v, t, s, a, b, c))
            for scan in (CpuScan(), BlockedScan(block=4)):
                got = np.asarray(laplex.sharded_matvec(v, t, s, a, b, c, scan=scan))
                worst = max(worst, float(np.max(np.abs(got - ref)) / np.max(np.abs(ref))))
    print("WORST", worst)
""")


def test_sharded_equals_single_device():
    stdout = run_on_devices(SCRIPT, devices=4, timeout=600)
    worst = float(stdout.split("WORST")[1])
    assert worst < 1e-12
