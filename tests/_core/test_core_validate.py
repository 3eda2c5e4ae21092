import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab._core import (
    as_array,
    check_array,
    check_finite,
    check_positive_int,
    check_range,
    error_if_not_finite,
)


def test_shape_error_names_argument_and_shapes():
    msg = r"anchors: expected shape \('N', 3\), received shape \(4, 2\)"
    with pytest.raises(ValueError, match=msg):
        check_array("anchors", jnp.zeros((4, 2)), shape=("N", 3))


def test_named_sizes_must_agree():
    sizes = check_array("t", jnp.zeros((5,)), shape=("N",))
    with pytest.raises(ValueError, match=r"v: expected shape \('N=5',\), received shape \(4,\)"):
        check_array("v", jnp.zeros((4,)), shape=("N",), sizes=sizes)
    check_array("v", jnp.zeros((5,)), shape=("N",), sizes=sizes)


def test_dtype_kind_and_non_array():
    with pytest.raises(ValueError, match="idx: expected dtype integer, received float32"):
        check_array("idx", jnp.zeros(3, jnp.float32), dtype=jnp.integer)
    with pytest.raises(ValueError, match="x: expected an array, received list"):
        check_array("x", [1.0, 2.0])
    with pytest.raises(ValueError, match="x: expected 2-D array"):
        check_array("x", np.zeros(3), ndim=2)


def test_finite_range_and_int():
    with pytest.raises(ValueError, match="sigma: expected finite values, received 1 NaN/inf"):
        check_finite("sigma", jnp.array([1.0, jnp.nan]))
    check_finite("sigma", jnp.array([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"decay: expected values in \(0, inf\], received min 0.0"):
        check_range("decay", jnp.array([0.0, 1.0]), low=0, low_inclusive=False)
    with pytest.raises(ValueError, match=r"p: expected values in \[0, 1\], received max 1.5"):
        check_range("p", 1.5, low=0, high=1)
    assert check_positive_int("n", 3) == 3
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="n: expected a positive integer"):
            check_positive_int("n", bad)


def test_as_array_converts_lists_and_numpy_once():
    got = as_array("x", [1, 2, 3], shape=("N",), dtype=jnp.floating)
    assert isinstance(got, jax.Array)
    assert got.dtype == jnp.asarray([1.0]).dtype  # the default float dtype
    got = as_array("x", np.zeros((2, 3), np.float32), ndim=2, dtype=jnp.floating)
    assert isinstance(got, jax.Array)
    assert got.shape == (2, 3)
    # NumPy int arrays keep their dtype (and are rejected where a float is required)
    with pytest.raises(ValueError, match="x: expected dtype floating, received int"):
        as_array("x", np.arange(3), dtype=jnp.floating)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (None, "x: expected an array, received NoneType"),
        ("abc", "x: expected an array, received str"),
        ({"a": 1}, "x: expected an array, received dict"),
        ([[1.0, 2.0], [3.0]], "x: expected an array, received list"),
        ([1.0, float("nan")], "x: expected finite values, received 1 NaN/inf"),
        ([1.0, -1.0], r"x: expected values in \[0.0, inf\], received min -1.0"),
    ],
)
def test_as_array_rejects_with_the_argument_name(bad, match):
    with pytest.raises(ValueError, match=match):
        as_array("x", bad, finite=True, low=0.0)


def test_error_if_not_finite_fires_under_jit():
    f = eqx.filter_jit(lambda x: error_if_not_finite("x", x) * 2)
    assert float(f(jnp.ones(()))) == 2.0
    with pytest.raises(eqx.EquinoxRuntimeError, match="x: expected finite values"):
        f(jnp.array(jnp.nan))


def test_traced_finite_check_is_on_by_default_and_can_be_switched_off():
    import equinox as eqx

    from jaxlab._core import error_if_not_finite

    bad = jnp.array([1.0, jnp.nan])
    with pytest.raises(eqx.EquinoxRuntimeError, match="x: expected finite values"):
        eqx.filter_jit(lambda x: error_if_not_finite("x", x))(bad)
    out = eqx.filter_jit(lambda x: error_if_not_finite("x", x, enabled=False) + 0)(bad)
    assert np.isnan(np.asarray(out)[1])  # skipped: the caller's responsibility


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (True, "real number"),
        ("0.5", "real number"),
        (None, "real number"),
        (1 + 2j, "real number"),
        (np.array([0.5]), "real number"),
        (float("nan"), "finite"),
        (float("inf"), "finite"),
        (1.5, r"\[0.0, 1.0\)"),
        (1.0, r"\[0.0, 1.0\)"),
        (-0.1, r"\[0.0, 1.0\)"),
    ],
)
def test_check_real_refuses_naming_the_argument(bad, match):
    from jaxlab._core import check_real

    with pytest.raises(ValueError, match=f"frac.*{match}"):
        check_real("frac", bad, low=0.0, high=1.0, high_inclusive=False)


def test_check_real_returns_a_float():
    from jaxlab._core import check_real

    assert check_real("x", np.float32(0.25), low=0.0) == 0.25
    assert check_real("x", 3, low=0.0) == 3.0
    assert check_real("x", np.array(0.5)) == 0.5


@pytest.mark.parametrize("bad", [-1, True, 2.5, "3", None])
def test_check_nonnegative_int_refuses_naming_the_argument(bad):
    from jaxlab._core import check_nonnegative_int

    with pytest.raises(ValueError, match="^rows: expected an integer >= 0"):
        check_nonnegative_int("rows", bad)
    assert check_nonnegative_int("rows", np.int64(0)) == 0


def test_check_instance_names_the_argument_and_the_type():
    from jaxlab._core import check_instance

    with pytest.raises(ValueError, match="^cfg: expected a int or float, received str"):
        check_instance("cfg", "abc", (int, float))
    assert check_instance("cfg", 3, int) == 3


def test_check_ids_without_an_upper_bound_refuses_negative_and_non_integer_ids():
    from jaxlab._core import check_ids

    assert check_ids("tokens", [0, 5, 10**6], None).tolist() == [0, 5, 10**6]
    with pytest.raises(ValueError, match=r"^tokens: ids must be >= 0, received \[-1\]"):
        check_ids("tokens", [3, -1], None)
    with pytest.raises(ValueError, match="^tokens: expected integer ids"):
        check_ids("tokens", [1.5], None)


def test_as_array_stacks_a_tuple_of_tracers():
    """`(lo, lo + 0.1)` inside `jit` (e.g. `sensing.sample_flower(curvature_range=...)`):
    NumPy conversion of the tuple raised a TracerArrayConversionError."""

    @jax.jit
    def f(lo):
        return as_array("r", (lo, lo + 0.1), shape=(2,), dtype=jnp.floating, finite=True)

    np.testing.assert_allclose(f(jnp.asarray(1.0)), [1.0, 1.1], rtol=1e-6)
    with pytest.raises(ValueError, match="^r: expected shape"):
        jax.jit(lambda lo: as_array("r", (lo, lo, lo), shape=(2,)))(jnp.asarray(1.0))
