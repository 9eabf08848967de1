import pytest
from hypothesis import given, strategies as st

from batchlab.formulas.batching import plan_batch
from batchlab.formulas.pipeline_schedules import bubble_fraction
from batchlab.lecture.case import CASE_STUDY, CASE_STUDY_TUNED

pos = st.integers(min_value=1, max_value=64)


def test_case_study_both_configurations():
    before, after = CASE_STUDY.plan(), CASE_STUDY_TUNED.plan()
    assert before == plan_batch(2, 4, 2, global_batch=64, stated_grad_accum=4)
    assert after == plan_batch(4, 4, 2, global_batch=64, stated_grad_accum=2)
    assert (before.num_microbatches, after.num_microbatches) == (16, 8)
    assert before.grad_accum_reading == after.grad_accum_reading == "pipeline_fills"
    # exact fractions: 3/19 and 3/11 are what the lecture rounds to 15.8 % and 27.3 %
    assert before.bubble_fraction == 3 / 19 and after.bubble_fraction == 3 / 11
    assert before.devices == 8 and before.samples_per_replica == 32


def test_deepspeed_reading_is_recognised():
    plan = plan_batch(2, 4, 2, global_batch=64, stated_grad_accum=16)
    assert plan.grad_accum_reading == "num_microbatches" and plan.pipeline_fills == 4


def test_pipeline_fills_is_none_when_not_whole():
    plan = plan_batch(1, 4, 1, global_batch=6)
    assert plan.num_microbatches == 6 and plan.pipeline_fills is None
    assert plan.lecture_formula() is None and plan.enough_microbatches


@pytest.mark.parametrize("kwargs, message", [
    (dict(micro_batch_size=2, pipeline_stages=4, data_parallel=2, global_batch=63),
     "global_batch = 63 不能被 micro_batch_size × data_parallel = 2 × 2 = 4 整除"),
    (dict(micro_batch_size=0, global_batch=8), "micro_batch_size = 0：必须是 ≥ 1 的整数"),
    (dict(micro_batch_size=2.0, global_batch=8), "micro_batch_size = 2.0：必须是 ≥ 1 的整数"),
    (dict(micro_batch_size=True, global_batch=8), "micro_batch_size = True：必须是 ≥ 1 的整数"),
    (dict(micro_batch_size=2, pipeline_stages=4, data_parallel=2, global_batch=64, stated_grad_accum=3),
     "梯度累积步数 = 3 两种读法都不成立"),
    (dict(micro_batch_size=2, global_batch=64, num_microbatches=5), "num_microbatches 得到 m = 5，与 global_batch"),
    (dict(micro_batch_size=2), "条件不足"),
    (dict(micro_batch_size=2, stated_grad_accum=2), "条件不足"),
    (dict(micro_batch_size=2, pipeline_stages=4, num_microbatches=8, pipeline_fills=3),
     "pipeline_fills × pipeline_stages = 3 × 4 得到 m = 12，与 num_microbatches 得到的 m = 8 矛盾"),
])
def test_invalid_configurations_name_value_and_rule(kwargs, message):
    with pytest.raises(ValueError) as err:
        plan_batch(**kwargs)
    assert message in str(err.value)


@given(micro=pos, stages=pos, dp=pos, m=st.integers(1, 256))
def test_every_valid_configuration_round_trips(micro, stages, dp, m):
    plan = plan_batch(micro, stages, dp, num_microbatches=m)
    assert plan.global_batch == micro * dp * m
    again = plan_batch(micro, stages, dp, global_batch=plan.global_batch)
    assert again == plan
    assert plan.bubble_fraction == bubble_fraction(stages, m)
    if m % stages == 0:
        lecture = plan_batch(micro, stages, dp, global_batch=plan.global_batch, stated_grad_accum=m // stages)
        assert lecture.num_microbatches == m and lecture.grad_accum_reading == "pipeline_fills"
        assert plan_batch(micro, stages, dp, pipeline_fills=m // stages) == plan
    assert plan_batch(micro, stages, dp, num_microbatches=m, stated_grad_accum=m).global_batch == plan.global_batch


@given(micro=pos, dp=pos, stages=pos, g=st.integers(1, 10_000))
def test_every_indivisible_global_batch_raises_with_its_numbers(micro, dp, stages, g):
    if g % (micro * dp) == 0:
        assert plan_batch(micro, stages, dp, global_batch=g).num_microbatches == g // (micro * dp)
    else:
        with pytest.raises(ValueError, match=f"global_batch = {g} 不能被 .* = {micro * dp} 整除"):
            plan_batch(micro, stages, dp, global_batch=g)


@given(micro=pos, stages=pos, dp=pos, m=st.integers(1, 64),
       pick=st.sampled_from(["pipeline_fills", "num_microbatches", "other"]), other=st.integers(1, 4096))
def test_a_stated_grad_accum_is_accepted_only_if_some_reading_holds(micro, stages, dp, m, pick, other):
    # Two of the three picks aim at a valid count (a uniform draw almost never is valid).
    g = micro * dp * m
    ga = {"pipeline_fills": max(1, m // stages), "num_microbatches": m, "other": other}[pick]
    try:
        plan = plan_batch(micro, stages, dp, global_batch=g, stated_grad_accum=ga)
    except ValueError as err:
        assert str(g) in str(err)
        fits_seed = micro * stages * dp * ga == g
        fits_megatron = g % (micro * dp) == 0 and ga == g // (micro * dp)
        assert not (fits_seed or fits_megatron)
    else:
        assert plan.global_batch == g
        assert micro * stages * dp * ga == g or ga == plan.num_microbatches


def test_to_dict_holds_the_derived_keys():
    d = plan_batch(2, 4, 2, global_batch=64).to_dict()
    assert d["num_microbatches"] == 16 and d["devices"] == 8 and d["grad_accum_reading"] is None
    assert d["pipeline_fills"] == 4 and d["enough_microbatches"] is True
    assert d["bubble_fraction"] == 3 / 19


def test_updates_and_tokens_per_step():
    plan = plan_batch(2, 4, 2, global_batch=64)
    assert plan.updates_per_epoch(1_048_576) == 16384 and plan.updates_per_epoch(100) == 1
    assert plan.tokens_per_step(1024) == 65536
    with pytest.raises(ValueError, match="dataset_size = 0：必须是 ≥ 1 的整数"):
        plan.updates_per_epoch(0)


def test_one_stage_is_labelled_alike_in_both_branches():
    assert plan_batch(2, 1, 2, global_batch=16, stated_grad_accum=4).grad_accum_reading == "pipeline_fills"
    assert plan_batch(2, 1, 2, num_microbatches=4, stated_grad_accum=4).grad_accum_reading == "pipeline_fills"


def test_no_fractional_grad_accum_is_suggested():
    with pytest.raises(ValueError) as err:
        plan_batch(2, 4, 2, global_batch=8, stated_grad_accum=3)
    assert "没有整数解（8 / 16 = 0.5）" in str(err.value)
    with pytest.raises(ValueError, match=r"没有整数解（6 / 4 = 1.5）"):
        plan_batch(1, 4, 1, num_microbatches=6, stated_grad_accum=5)
