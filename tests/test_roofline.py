"""The roofline arithmetic (batchlab.formulas.roofline): exact by hand, checked inputs, and the two properties
that make it a roofline — attainable FLOP/s never decreases with intensity and never exceeds the peak."""
from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, strategies as st

from batchlab.formulas.precision import ELEMENT_BYTES, element_bytes
from batchlab.formulas.roofline import (ASCEND_910B_SOCS, DEVICE_PRESETS, HBM2E_STACK_BYTES, DevicePeak,
                                        arithmetic_intensity, cube_peak_flops, hbm_bandwidth, matmul_bytes,
                                        matmul_flops, ridge_point, roofline_flops, tokens_per_matmul)


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
    assert ascend.ridge_range == pytest.approx((180.0, 222.0), abs=0.1)
    # The lecture's M = 128 sits below even the lowest 910B ridge; M = 2048 (micro-batch 2 × 1024) above the highest.
    assert arithmetic_intensity(128, 4096, 8192, 2) < ascend.ridge_range[0]
    assert arithmetic_intensity(tokens_per_matmul(2, 1024), 4096, 8192, 2) > ascend.ridge_range[1]
    assert ascend.attainable(1.0) == ascend.memory_bandwidth


def test_910b_peak_is_cores_times_cube_clock_from_the_cann_platform_files():
    """Each end is cube_core_cnt × cube_freq × 16³ multiply-adds × 2 FLOP of a named 64 GiB variant's file; the
    32 GiB 910B4 and the old 280/376 TFLOPS (a page that did not say 910B4; a 910C package ÷ 2) are not used."""
    socs = {soc.soc: soc for soc in ASCEND_910B_SOCS}
    assert socs["Ascend910B3"].cube_cores * socs["Ascend910B3"].cube_mhz * 1e6 * 16**3 * 2 == 294.912e12
    assert socs["Ascend910B1"].cube_cores * socs["Ascend910B1"].cube_mhz * 1e6 * 16**3 * 2 == 363.7248e12
    assert cube_peak_flops(24, 1800) == pytest.approx(353.89e12, rel=1e-4)  # the 910B2 and 910B2C
    assert cube_peak_flops(20, 1500) == pytest.approx(245.76e12)            # the 910B4, 32 GiB: left out
    ascend = DEVICE_PRESETS["ascend-910b"]
    assert ascend.peak_flops == (socs["Ascend910B3"].peak_flops, socs["Ascend910B1"].peak_flops)
    assert "Ascend910B3" in ascend.source and "Ascend910B1" in ascend.source
    sixty_four = [soc.peak_flops for soc in ASCEND_910B_SOCS if soc.memory_bytes == 64 * 2**30]
    assert ascend.peak_flops == (min(sixty_four), max(sixty_four))
    assert socs["Ascend910B4"].memory_bytes == 32 * 2**30 and socs["Ascend910B4"].peak_flops < ascend.peak_flops[0]
    assert 280e12 not in ascend.peak_flops and 376e12 not in ascend.peak_flops


def test_910b_bandwidth_is_four_hbm2e_stacks_not_the_32_gb_parts():
    """64 GiB as 16 GiB HBM2E stacks is four, at 3.2 Gb/s × 1024 pins each: 1.64 TB/s. The old low end, 1.2 TB/s,
    came from a page about a 32 GB part."""
    assert 64 * 2**30 // HBM2E_STACK_BYTES == 4
    assert hbm_bandwidth(1, 3.2) == pytest.approx(409.6e9)  # the announced 410 GB/s per stack
    ascend = DEVICE_PRESETS["ascend-910b"]
    assert ascend.memory_bandwidth == (hbm_bandwidth(4, 3.2),) * 2 == (1.6384e12, 1.6384e12)
    assert ascend.memory_bandwidth[0] != 1.2e12


def test_the_case_stays_compute_bound_for_any_bandwidth_above_the_threshold():
    """4.4's robustness line: the case's smallest matmul (micro-batch 1, M = 1024) is compute-bound for any
    bandwidth above peak_high / intensity ≈ 0.64 TB/s, below both bandwidth ends, so the conclusion does not
    rest on the bandwidth assumption; below the threshold the matmul would be memory-bound."""
    ascend = DEVICE_PRESETS["ascend-910b"]
    intensity = arithmetic_intensity(tokens_per_matmul(1, 1024), 1600, 6400, 2)
    threshold = ascend.compute_bound_above(intensity)
    assert threshold == pytest.approx(0.6394e12, rel=1e-3)
    assert threshold < min(ascend.memory_bandwidth)
    assert roofline_flops(intensity, ascend.peak_flops[1], threshold * 1.01) == ascend.peak_flops[1]
    assert roofline_flops(intensity, ascend.peak_flops[1], threshold * 0.99) < ascend.peak_flops[1]
    # the 0.66 TB/s is the same rule on the old 376 TFLOPS high end
    old = DevicePeak("old", (280e12, 376e12), (1.2e12, 1.6e12), source="the preset before issue 28")
    assert old.compute_bound_above(intensity) == pytest.approx(0.661e12, rel=1e-3)


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
