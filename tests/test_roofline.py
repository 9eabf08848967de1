"""The roofline arithmetic (batchlab.formulas.roofline): exact by hand, checked inputs, and the two properties
that make it a roofline — attainable FLOP/s never decreases with intensity and never exceeds the peak."""
from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, strategies as st

from batchlab.formulas.precision import ELEMENT_BYTES, element_bytes
from batchlab.formulas.roofline import (DEVICE_PRESETS, DevicePeak, arithmetic_intensity, matmul_bytes, matmul_flops,
                                        ridge_point, roofline_flops, tokens_per_matmul)


def test_flops_bytes_and_intensity_by_hand():
    assert matmul_flops(2, 3, 4) == 48  # 2·2·3·4
    assert matmul_bytes(2, 3, 4, 2) == 52  # 2·(2·3 + 3·4 + 2·4) = 2·26
    assert matmul_bytes(2, 3, 4, 4) == 104
    assert arithmetic_intensity(2, 3, 4, 2) == 48 / 52


def test_the_lecture_shapes():
    # [1, 4096] × [4096, 8192] reads the whole weight for one row: about 1 FLOP per byte in 16 bits.
    one = Fraction(2 * 4096 * 8192, 2 * (4096 + 4096 * 8192 + 8192))
    lecture = Fraction(2 * 128 * 4096 * 8192, 2 * (128 * 4096 + 4096 * 8192 + 128 * 8192))
    assert arithmetic_intensity(1, 4096, 8192, 2) == pytest.approx(float(one), rel=1e-15)
    assert arithmetic_intensity(128, 4096, 8192, 2) == pytest.approx(float(lecture), rel=1e-15)
    assert 0.99 < float(one) < 1.0 and 122 < float(lecture) < 123
    assert tokens_per_matmul(2, 1024) == 2048  # micro-batch 2 at seq 1024: already M = 2048 rows
    assert tokens_per_matmul(1, 1) == 1


def test_element_bytes():
    assert ELEMENT_BYTES == {"float32": 4, "bfloat16": 2, "float16": 2}
    assert element_bytes("bfloat16") == 2
    with pytest.raises(ValueError, match="dtype = 'int8'：只能取 'float32', 'bfloat16', 'float16' 之一"):
        element_bytes("int8")


def test_ridge_point_and_roofline_min():
    assert ridge_point(100e12, 1e12) == 100.0
    assert roofline_flops(50, 100e12, 1e12) == 50e12  # memory-bound: intensity × bandwidth
    assert roofline_flops(100, 100e12, 1e12) == 100e12  # at the ridge both roofs meet
    assert roofline_flops(1000, 100e12, 1e12) == 100e12  # compute-bound: the peak


def test_presets_have_ranges_and_sources():
    assert {"ascend-910b", "generic"} <= set(DEVICE_PRESETS)
    for preset in DEVICE_PRESETS.values():
        assert preset.peak_flops[0] <= preset.peak_flops[1]
        assert preset.memory_bandwidth[0] <= preset.memory_bandwidth[1]
        assert preset.source.strip()
        low, high = preset.ridge_range
        assert low <= ridge_point(preset.peak_flops[0], preset.memory_bandwidth[0]) <= high
    ascend = DEVICE_PRESETS["ascend-910b"]
    assert ascend.peak_flops == (280e12, 376e12) and ascend.memory_bandwidth == (1.2e12, 1.6e12)
    assert ascend.ridge_range == pytest.approx((175.0, 313.3), abs=0.1)
    # The lecture's M = 128 sits below even the lowest 910B ridge; M = 2048 (micro-batch 2 × 1024) above the highest.
    assert arithmetic_intensity(128, 4096, 8192, 2) < ascend.ridge_range[0]
    assert arithmetic_intensity(tokens_per_matmul(2, 1024), 4096, 8192, 2) > ascend.ridge_range[1]
    assert ascend.attainable(1.0) == (1.2e12, 1.6e12)


def test_910b_bandwidth_is_four_hbm2e_stacks_and_the_case_is_compute_bound():
    """The old preset's 0.4 TB/s low end was one HBM2e stack: a 64 GB card has four (≥ 1.2 TB/s), and then the
    case's MLP matmul (K = 1600, N = 6400) is compute-bound already at micro-batch 1 (M = 1024) at both ends."""
    ascend = DEVICE_PRESETS["ascend-910b"]
    assert ascend.memory_bandwidth[0] >= 1.2e12
    assert ascend.peak_flops[0] > 256e12          # 256 TFLOPS is the original 910's figure, its own preset
    assert DEVICE_PRESETS["ascend-910"].peak_flops == (256e12, 256e12)
    for micro in (1, 2, 4, 8):
        intensity = arithmetic_intensity(tokens_per_matmul(micro, 1024), 1600, 6400, 2)
        assert intensity > ascend.ridge_range[1]
        assert ascend.attainable(intensity) == ascend.peak_flops
    # With the old low end the same matmul was bandwidth-bound: the check above can fail.
    old = DevicePeak("old", (256e12, 376e12), (0.4e12, 1.6e12), source="the preset before issue 18")
    assert arithmetic_intensity(tokens_per_matmul(1, 1024), 1600, 6400, 2) < old.ridge_range[1]


def test_device_peak_normalises_and_checks():
    single = DevicePeak("x", 5e12, 1e11, source="a test")
    assert single.peak_flops == (5e12, 5e12) and single.memory_bandwidth == (1e11, 1e11)
    assert single.ridge_range == (50.0, 50.0)
    with pytest.raises(ValueError, match=r"peak_flops = \(2.0, 1.0\)：下限不能大于上限"):
        DevicePeak("x", (2.0, 1.0), 1.0, source="a test")
    with pytest.raises(ValueError, match="必须写明数据来源"):
        DevicePeak("x", 1.0, 1.0, source=" ")
    with pytest.raises(ValueError, match="memory_bandwidth 下限 = 0：必须是有限的正数"):
        DevicePeak("x", 1.0, (0, 1.0), source="a test")
    with pytest.raises(ValueError, match="必须是一个正数或"):
        DevicePeak("x", (1.0, 2.0, 3.0), 1.0, source="a test")


@pytest.mark.parametrize("call, message", [
    (lambda: matmul_flops(0, 1, 1), "m = 0：必须是 ≥ 1 的整数"),
    (lambda: matmul_flops(1, 2.0, 1), "k = 2.0：必须是 ≥ 1 的整数"),
    (lambda: matmul_bytes(1, 1, True, 2), "n = True：必须是 ≥ 1 的整数"),
    (lambda: matmul_bytes(1, 1, 1, 0), "element_bytes = 0：必须是有限的正数"),
    (lambda: ridge_point(1e12, 0), "bandwidth = 0：必须是有限的正数"),
    (lambda: roofline_flops(-1, 1e12, 1e9), "intensity = -1：必须是有限的正数"),
    (lambda: roofline_flops(1, float("inf"), 1e9), "peak_flops = inf：必须是有限的正数"),
    (lambda: tokens_per_matmul(0, 1024), "micro_batch_size = 0：必须是 ≥ 1 的整数"),
    (lambda: tokens_per_matmul(2, 0), "seq_len = 0：必须是 ≥ 1 的整数"),
])
def test_bad_input_names_value_and_rule(call, message):
    with pytest.raises(ValueError, match=message):
        call()


intensities = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)


@given(intensities, intensities, st.floats(1e9, 1e16), st.floats(1e8, 1e13))
def test_roofline_is_monotone_and_capped(i1, i2, peak, bandwidth):
    low, high = sorted((i1, i2))
    assert roofline_flops(low, peak, bandwidth) <= roofline_flops(high, peak, bandwidth) <= peak


@given(st.integers(1, 4096), st.integers(1, 4096), st.integers(1, 8192), st.integers(1, 8192),
       st.sampled_from(sorted(set(ELEMENT_BYTES.values()))))
def test_intensity_grows_with_rows(m1, m2, k, n, size):
    # With the weight [k, n] fixed, more rows reuse it more: the reason bigger micro-batches help.
    low, high = sorted((m1, m2))
    assert arithmetic_intensity(low, k, n, size) <= arithmetic_intensity(high, k, n, size) * (1 + 1e-12)
