"""The sampling formulas (pure math): E‖G_B − G‖², the finite-population factor, the two-batch algebra."""
import math

import pytest
from hypothesis import given, strategies as st

from batchlab.formulas.noise import expected_sq_error, finite_population_factor, two_batch_estimates


def test_expected_sq_error_formula():
    assert expected_sq_error(10.0, 1, 11) == 10.0
    assert expected_sq_error(10.0, 5, 11) == pytest.approx(10.0 / 5 * 6 / 10)
    assert expected_sq_error(3.0, 4, 4) == 0.0          # B = N: the full gradient, no error
    assert expected_sq_error(3.0, 4) == 0.75            # i.i.d.: tr Σ / B
    assert expected_sq_error(3.0, 1, 1) == 0.0


@pytest.mark.parametrize("args, message", [
    ((1.0, 5, 4), "batch_size = 5：不能超过样本总数 num_samples = 4"),
    ((1.0, 2.5, 8), "batch_size = 2.5：必须是 ≥ 1 的整数"),
    ((1.0, 0), "batch_size = 0：必须是 ≥ 1 的整数"),
    ((-1.0, 2, 8), "trace_cov = -1.0：必须是有限的非负数"),
    ((math.inf, 2, 8), "trace_cov = inf：必须是有限的非负数"),
    ((1.0, 2, True), "num_samples = True：必须是 ≥ 1 的整数"),
])
def test_bad_input_names_value_and_rule(args, message):
    with pytest.raises(ValueError) as err:
        expected_sq_error(*args)
    assert str(err.value) == message


@given(b=st.integers(1, 500), extra=st.integers(0, 500))
def test_finite_factor_lies_below_iid_and_vanishes_at_n(b, extra):
    n = b + extra
    c = finite_population_factor(b, n)
    assert 0.0 <= c <= 1.0 / b
    assert (c == 0.0) == (n == b or n == 1)
    if n > 1:
        assert c == pytest.approx((n - b) / ((n - 1) * b))


@given(g_sq=st.floats(0.01, 100), trace=st.floats(0.0, 1000), b_small=st.integers(1, 32),
       factor=st.integers(2, 16), spare=st.integers(0, 1000), finite=st.booleans())
def test_two_batch_algebra_inverts_the_expected_norms(g_sq, trace, b_small, factor, spare, finite):
    b_big = b_small * factor
    n = b_big + spare if finite else None
    small = g_sq + trace * finite_population_factor(b_small, n)
    big = g_sq + trace * finite_population_factor(b_big, n)
    est_g, est_t, est_b = two_batch_estimates(small, big, b_small, b_big, n)
    assert est_g == pytest.approx(g_sq, rel=1e-6, abs=1e-6)
    assert est_t == pytest.approx(trace, rel=1e-6, abs=1e-4)
    assert est_b == pytest.approx(est_t / est_g)


def test_two_batch_rejects_unordered_sizes():
    with pytest.raises(ValueError, match="b_small = 8：必须小于 b_big = 8"):
        two_batch_estimates(1.0, 1.0, 8, 8)
    assert math.isnan(two_batch_estimates(2.0, 1.0, 1, 2)[2])  # ‖G‖² estimate exactly 0
