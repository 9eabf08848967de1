import pytest
from hypothesis import given, strategies as st

from batchlab.batching import plan_batch
from batchlab.schedules import bubble_fraction

pos = st.integers(min_value=1, max_value=64)


def test_seed_case_study_both_configurations():
    before = plan_batch(2, 4, 2, global_batch=64, grad_accum_steps=4)
    after = plan_batch(4, 4, 2, global_batch=64, grad_accum_steps=2)
    assert (before.num_microbatches, after.num_microbatches) == (16, 8)
    assert before.convention == after.convention == "seed"
    assert before.bubble_fraction == pytest.approx(3 / 19) and after.bubble_fraction == pytest.approx(3 / 11)
    assert before.devices == 8 and before.samples_per_replica == 32


def test_deepspeed_convention_is_recognised():
    plan = plan_batch(2, 4, 2, global_batch=64, grad_accum_steps=16)
    assert plan.convention == "megatron" and plan.grad_accum_steps == 4


def test_seed_grad_accum_is_none_when_not_whole():
    plan = plan_batch(1, 4, 1, global_batch=6)
    assert plan.num_microbatches == 6 and plan.grad_accum_steps is None
    assert plan.seed_formula() is None and plan.fills_pipeline


@pytest.mark.parametrize("kwargs, message", [
    (dict(micro_batch_size=2, pipeline_stages=4, data_parallel=2, global_batch=63),
     "global batch 63 is not divisible by micro_batch_size × data_parallel = 2 × 2 = 4"),
    (dict(micro_batch_size=0, global_batch=8), "micro_batch_size = 0 must be at least 1"),
    (dict(micro_batch_size=2.0, global_batch=8), "micro_batch_size = 2.0 must be a whole number"),
    (dict(micro_batch_size=True, global_batch=8), "must be a whole number"),
    (dict(micro_batch_size=2, pipeline_stages=4, data_parallel=2, global_batch=64, grad_accum_steps=3),
     "grad_accum_steps 3 fits neither convention"),
    (dict(micro_batch_size=2, global_batch=64, num_microbatches=5), "num_microbatches 5 contradicts"),
    (dict(micro_batch_size=2), "not enough to fix the batch"),
    (dict(micro_batch_size=2, grad_accum_steps=2, convention="deepspeed"), "convention = 'deepspeed'"),
    (dict(micro_batch_size=2, pipeline_stages=4, num_microbatches=8, grad_accum_steps=3), "contradicts num_microbatches 8"),
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
        seed = plan_batch(micro, stages, dp, global_batch=plan.global_batch, grad_accum_steps=m // stages)
        assert seed.num_microbatches == m and seed.convention == "seed"
        assert plan_batch(micro, stages, dp, grad_accum_steps=m // stages).global_batch == plan.global_batch
    assert plan_batch(micro, stages, dp, grad_accum_steps=m, convention="megatron").global_batch == plan.global_batch


@given(micro=pos, dp=pos, stages=pos, g=st.integers(1, 10_000))
def test_every_indivisible_global_batch_raises_with_its_numbers(micro, dp, stages, g):
    if g % (micro * dp) == 0:
        assert plan_batch(micro, stages, dp, global_batch=g).num_microbatches == g // (micro * dp)
    else:
        with pytest.raises(ValueError, match=f"global batch {g} is not divisible by .* = {micro * dp}"):
            plan_batch(micro, stages, dp, global_batch=g)


@given(micro=pos, stages=pos, dp=pos, m=st.integers(1, 64), pick=st.sampled_from(["seed", "megatron", "other"]),
       other=st.integers(1, 4096))
def test_a_given_grad_accum_is_accepted_only_if_some_convention_holds(micro, stages, dp, m, pick, other):
    # Two of the three picks aim at a valid grad_accum (a uniform draw almost never is valid).
    g = micro * dp * m
    ga = {"seed": max(1, m // stages), "megatron": m, "other": other}[pick]
    try:
        plan = plan_batch(micro, stages, dp, global_batch=g, grad_accum_steps=ga)
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
    assert d["num_microbatches"] == 16 and d["devices"] == 8 and d["convention"] == "derived"
    assert d["bubble_fraction"] == pytest.approx(0.157894736)


def test_updates_and_tokens_per_step():
    plan = plan_batch(2, 4, 2, global_batch=64)
    assert plan.updates_per_epoch(1_048_576) == 16384 and plan.updates_per_epoch(100) == 1
    assert plan.tokens_per_step(1024) == 65536
    with pytest.raises(ValueError, match="dataset_size = 0 must be at least 1"):
        plan.updates_per_epoch(0)


def test_one_stage_is_labelled_alike_in_both_branches():
    assert plan_batch(2, 1, 2, global_batch=16, grad_accum_steps=4).convention == "seed"
    assert plan_batch(2, 1, 2, num_microbatches=4, grad_accum_steps=4).convention == "seed"


def test_no_fractional_grad_accum_is_suggested():
    with pytest.raises(ValueError) as err:
        plan_batch(2, 4, 2, global_batch=8, grad_accum_steps=3)
    assert "no whole grad_accum fits (8 / 16 = 0.5)" in str(err.value)
    with pytest.raises(ValueError, match=r"expected no whole number \(m / pipeline_stages = 1.5\)"):
        plan_batch(1, 4, 1, num_microbatches=6, grad_accum_steps=5)
