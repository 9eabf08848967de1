import pytest
from hypothesis import given, strategies as st

from batchlab.formulas.batching import plan_batch
from batchlab.formulas.pipeline_schedules import (OUTLIER_FACTOR, SCHEDULES, Timeline, bubble_fraction,
                                         check_runnable, in_flight_microbatches, median_durations, median_timeline, outlier_ops,
                                         pipeline_timeline, schedule_order, sibling_ratios, simulate)


def test_lecture_bubble_numbers():
    assert bubble_fraction(4, 16) == 3 / 19  # the lecture's "≈ 15.8%"
    assert bubble_fraction(4, 8) == 3 / 11   # the lecture's "≈ 27.3%"
    assert bubble_fraction(1, 5) == 0.0


@given(p=st.integers(1, 16), m=st.integers(1, 64))
def test_overhead_and_fraction_describe_one_bubble(p, m):
    o = (p - 1) / m  # bubble time relative to useful compute: the form Megatron-LM reports
    assert bubble_fraction(p, m) == pytest.approx(o / (1 + o))


@given(schedule=st.sampled_from(["gpipe", "1f1b"]), p=st.integers(1, 8), m=st.integers(1, 24),
       tf=st.sampled_from([1.0, 0.5]), tb=st.sampled_from([1.0, 2.0, 3.0]))
def test_simulated_bubble_matches_formula_with_uniform_costs(schedule, p, m, tf, tb):
    t = pipeline_timeline(schedule, p, m, tf, tb)
    assert len(t.ops) == 2 * p * m
    assert t.makespan == pytest.approx((m + p - 1) * (tf + tb))
    assert t.idle_fraction == pytest.approx(bubble_fraction(p, m))


@given(p=st.integers(1, 8), m=st.integers(1, 24))
def test_peak_in_flight_gpipe_holds_all_1f1b_holds_at_most_p_minus_s(p, m):
    assert pipeline_timeline("gpipe", p, m).peak_in_flight() == [m] * p
    assert pipeline_timeline("1f1b", p, m).peak_in_flight() == [min(p - s, m) for s in range(p)]


def test_dependencies_respected():
    t = pipeline_timeline("1f1b", 4, 8)
    end = {(o.kind, o.stage, o.microbatch): o.end for o in t.ops}
    for o in t.ops:
        if o.kind == "F" and o.stage > 0:
            assert o.start >= end[("F", o.stage - 1, o.microbatch)]
        if o.kind == "B":
            dep = ("B", o.stage + 1, o.microbatch) if o.stage < 3 else ("F", o.stage, o.microbatch)
            assert o.start >= end[dep]


def test_bad_input():
    with pytest.raises(ValueError, match="schedule = 'zb'"):
        schedule_order("zb", 2, 2)
    # bubble_fraction is plain arithmetic on validated counts: the batch plan refuses m = 0
    with pytest.raises(ValueError, match="num_microbatches = 0"):
        plan_batch(1, 4, num_microbatches=0)
    with pytest.raises(ValueError, match="调度死锁"):
        simulate([[("F", 0), ("B", 0)], [("B", 0), ("F", 0)]])
    with pytest.raises(ValueError, match="forward_time = 0：必须是有限的正数"):
        pipeline_timeline("gpipe", 2, 2, forward_time=0)
    with pytest.raises(ValueError, match="forward_time = 'a'：必须是有限的正数"):
        simulate(schedule_order("gpipe", 2, 2), forward_time="a")
    with pytest.raises(ValueError, match="schedule = 'zb'"):
        in_flight_microbatches("zb", 2, 2)


@given(p=st.integers(1, 12), m=st.integers(1, 40), schedule=st.sampled_from(sorted(SCHEDULES)))
def test_in_flight_closed_form_matches_the_simulator(p, m, schedule):
    closed = in_flight_microbatches(schedule, p, m)
    assert closed == pipeline_timeline(schedule, p, m).peak_in_flight()
    assert closed == ([m] * p if schedule == "gpipe" else [min(p - s, m) for s in range(p)])


def test_in_flight_of_the_case_study():
    # 4 stages, 16 micro-batches: GPipe keeps all 16 on every stage, 1F1B at most 4, 3, 2, 1.
    assert in_flight_microbatches("gpipe", 4, 16) == [16, 16, 16, 16]
    assert in_flight_microbatches("1f1b", 4, 16) == [4, 3, 2, 1]


@pytest.mark.parametrize("schedule, p, m", [("gpipe", 4, 1), ("gpipe", 1, 1), ("1f1b", 4, 4), ("1f1b", 2, 7)])
def test_runnable_schedules_pass(schedule, p, m):
    assert check_runnable(schedule, p, m) is None


def test_1f1b_with_fewer_microbatches_than_stages_is_not_runnable():
    # The simulator has an order for it, but torch.distributed.pipelining's Schedule1F1B refuses it.
    assert len(pipeline_timeline("1f1b", 4, 2).ops) == 16
    with pytest.raises(ValueError, match=r"num_microbatches = 2：1F1B 要求微批次数 ≥ 流水线阶段数 pipeline_stages = 4"):
        check_runnable("1f1b", 4, 2)
    with pytest.raises(ValueError, match="schedule = 'zb'"):
        check_runnable("zb", 4, 8)
    with pytest.raises(ValueError, match="pipeline_stages = 0"):
        check_runnable("gpipe", 0, 8)


def test_simulate_with_per_op_durations():
    orders = schedule_order("gpipe", 2, 2)
    uniform = {(k, s, i): (1.0 if k == "F" else 2.0) for k in "FB" for s in range(2) for i in range(2)}
    assert simulate(orders, durations=uniform) == simulate(orders)
    slow_last = {**uniform, ("F", 1, 0): 3.0, ("F", 1, 1): 3.0}  # a slow last stage: a bigger bubble
    t = Timeline("gpipe", 2, 2, simulate(orders, durations=slow_last))
    assert t.makespan == 1 + 3 + 3 + 2 + 2 + 2
    with pytest.raises(ValueError, match=r"durations 缺少操作 \('B', 1, 1\)"):
        simulate(orders, durations={key: v for key, v in uniform.items() if key != ("B", 1, 1)})
    with pytest.raises(ValueError, match=r"durations\[\('F', 0, 0\)\] = -1.0：必须是有限的正数"):
        simulate(orders, durations={**uniform, ("F", 0, 0): -1.0})


# ── measured timelines: a typical step, and the rule that rejects one slow op ─────────────────────────

def _measured(durations):
    """A 1F1B timeline of 2 stages × 4 micro-batches replaying ``durations`` ({(kind, s, i): seconds})."""
    return Timeline("1f1b", 2, 4, simulate(schedule_order("1f1b", 2, 4), durations=durations))


CLEAN = {(k, s, i): (0.010 if k == "F" else 0.020) * (1 + 0.05 * i) for k in "FB" for s in range(2) for i in range(4)}


def test_median_durations_takes_each_ops_median():
    steps = [{"a": 1.0, "b": 5.0}, {"a": 9.0, "b": 4.0}, {"a": 2.0, "b": 6.0}]
    assert median_durations(steps) == {"a": 2.0, "b": 5.0}
    with pytest.raises(ValueError, match="steps\\[1\\] 的操作与 steps\\[0\\] 不同"):
        median_durations([{"a": 1.0}, {"b": 1.0}])
    with pytest.raises(ValueError, match="steps 为空"):
        median_durations([])


def test_one_op_ten_times_its_siblings_is_flagged():
    slow = {**CLEAN, ("B", 1, 0): 10 * CLEAN[("B", 1, 0)]}  # a cold first backward, as 4.4 once printed
    assert outlier_ops(_measured(slow)) == (("B", 1, 0),)
    assert sibling_ratios(_measured(slow))[("B", 1, 0)] > OUTLIER_FACTOR
    assert outlier_ops(_measured(CLEAN)) == ()
    # siblings are the same stage's same kind: a last stage twice as slow as the others is no outlier
    uneven = {key: d * (2 if key[1] == 1 else 1) for key, d in CLEAN.items()}
    assert outlier_ops(_measured(uneven)) == ()


def test_the_median_of_steps_removes_a_one_step_outlier():
    cold = {**CLEAN, ("B", 1, 0): 40 * CLEAN[("B", 1, 0)]}
    assert outlier_ops(_measured(cold)) != ()
    assert outlier_ops(_measured(median_durations([cold, CLEAN, CLEAN]))) == ()


def _shifted(timeline, by):
    """The same step measured later on the clock: every op moved by ``by`` seconds."""
    return Timeline(timeline.schedule, timeline.pipeline_stages, timeline.num_microbatches,
                    tuple(type(op)(op.stage, op.microbatch, op.kind, op.start + by, op.end + by) for op in timeline.ops))


def test_the_median_timeline_removes_an_op_slowed_in_one_step():
    # what several processes on shared cores see: in one step one op is descheduled and everything after waits
    clean, cold = _measured(CLEAN), _measured({**CLEAN, ("B", 1, 0): 40 * CLEAN[("B", 1, 0)]})
    assert outlier_ops(cold) != ()
    typical = median_timeline([_shifted(cold, 10.0), _shifted(clean, 20.0), _shifted(clean, 30.0)])
    assert outlier_ops(typical) == ()
    assert typical.makespan == pytest.approx(clean.makespan)   # each step counted from its own first op
    assert typical.idle_fraction == pytest.approx(clean.idle_fraction)


SCALES = st.lists(st.floats(0.5, 2.0), min_size=16, max_size=16)   # one factor per op of CLEAN


@given(SCALES, SCALES, SCALES)
def test_the_median_timeline_keeps_each_stage_one_op_at_a_time(first, second, third):
    # medians of starts and of ends keep every order that held in every step (sorted ends dominate sorted starts)
    steps = [_measured({key: d * f for (key, d), f in zip(CLEAN.items(), scale)}) for scale in (first, second, third)]
    typical = median_timeline(steps)
    for stage in range(2):
        ops = sorted((op for op in typical.ops if op.stage == stage), key=lambda op: op.start)
        assert all(op.end >= op.start for op in ops)
        assert all(a.end <= b.start + 1e-12 for a, b in zip(ops, ops[1:]))


def test_the_median_timeline_refuses_steps_of_another_job():
    with pytest.raises(ValueError, match="steps 为空"):
        median_timeline([])
    other = Timeline("1f1b", 2, 3, simulate(schedule_order("1f1b", 2, 3)))
    with pytest.raises(ValueError, match=r"steps\[1\] 与 steps\[0\] 不是同一个作业的一步"):
        median_timeline([_measured(CLEAN), other])
