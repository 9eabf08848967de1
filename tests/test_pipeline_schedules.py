import pytest
from hypothesis import given, strategies as st

from batchlab.formulas.batching import plan_batch
from batchlab.formulas.measured_timeline import (OUTLIER_FACTOR, median_durations, median_timeline, outlier_ops,
                                                sibling_ratios)
from batchlab.formulas.pipeline_schedules import (SCHEDULES, Op, Timeline, bubble_fraction, check_runnable,
                                                  in_flight_chunks, in_flight_microbatches, pipeline_timeline,
                                                  placement_of, runnable, schedule_label, schedule_order, simulable,
                                                  simulate, virtual_stage)


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


@given(p=st.integers(1, 12), m=st.integers(1, 40), schedule=st.sampled_from(["gpipe", "1f1b"]))
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


# ── interleaved 1F1B and zero bubble: simulators, closed forms, torch's orders ─────────────────────────

@st.composite
def runnable_jobs(draw, schedules=("gpipe", "1f1b", "interleaved-1f1b", "zero-bubble"), max_p=8):
    """(schedule, p, m, v) that the rules allow (:func:`runnable`), drawn directly rather than filtered."""
    schedule = draw(st.sampled_from(schedules))
    p = draw(st.integers(1, max_p))
    v = {"interleaved-1f1b": draw(st.integers(2, 4)), "zero-bubble": draw(st.integers(1, 2))}.get(schedule, 1)
    m = p * draw(st.integers(1, 5)) if schedule == "interleaved-1f1b" else draw(st.integers(p, 4 * p + 4))
    if not runnable(schedule, p, m, v):  # ZB-H1's rounds rule: the nearest multiple of p is allowed
        m = p * (m // p)
    assert runnable(schedule, p, m, v)
    return schedule, p, m, v


@given(runnable_jobs())
def test_each_schedule_simulator_agrees_with_its_bubble_closed_form(job):
    schedule, p, m, v = job
    t = pipeline_timeline(schedule, p, m, virtual_stages=v)   # F = 1, B = 2 (= B 1 + W 1 when split)
    assert t.idle_fraction == pytest.approx(bubble_fraction(p, m, schedule, v), abs=1e-12)
    assert t.virtual_stages == v and {op.chunk for op in t.ops} == set(range(v))


@given(runnable_jobs(("gpipe", "1f1b", "interleaved-1f1b")), st.sampled_from([(1.0, 1.0), (0.5, 3.0), (2.0, 1.0)]))
def test_one_f_one_b_bubbles_hold_for_any_forward_and_backward_cost(job, costs):
    schedule, p, m, v = job
    t = pipeline_timeline(schedule, p, m, *costs, virtual_stages=v)
    assert t.idle_fraction == pytest.approx(bubble_fraction(p, m, schedule, v), abs=1e-12)
    # interleaving: each device idles (p − 1)/v of one micro-batch's F + B (Narayanan et al. 2021)
    assert t.makespan == pytest.approx((m + (p - 1) / v) * v * sum(costs))


@given(runnable_jobs())
def test_each_schedule_in_flight_closed_form_matches_the_simulator(job):
    schedule, p, m, v = job
    chunks = in_flight_chunks(schedule, p, m, v)
    assert chunks == pipeline_timeline(schedule, p, m, virtual_stages=v).peak_in_flight()
    assert in_flight_microbatches(schedule, p, m, v) == [-(-c // v) for c in chunks]
    if v == 1:
        assert chunks == in_flight_microbatches(schedule, p, m)


@given(runnable_jobs(("interleaved-1f1b",)))
def test_interleaved_memory_is_megatrons(job):
    _, p, m, v = job
    assert in_flight_chunks("interleaved-1f1b", p, m, v) == [min(m * v, (v - 1) * p + 2 * (p - i - 1) + 1)
                                                            for i in range(p)]
    if m > p:  # device 0 holds 1F1B's p micro-batches times Megatron-LM's factor 1 + (p − 1)/(p·v)
        assert in_flight_chunks("interleaved-1f1b", p, m, v)[0] / v == pytest.approx(p * (1 + (p - 1) / (p * v)))


@given(runnable_jobs(("zero-bubble",)))
def test_zero_bubble_bubble_time_against_1f1b(job):
    _, p, m, v = job
    zb = pipeline_timeline("zero-bubble", p, m, 1 / v, 2 / v, virtual_stages=v)   # a chunk is 1/v of a stage
    one = pipeline_timeline("1f1b", p, m)
    idle = lambda t: t.pipeline_stages * t.makespan - sum(op.end - op.start for op in t.ops)  # noqa: E731
    if v == 1:  # ZB-H1: a third of 1F1B's idle time at 1F1B's peak activations
        assert idle(zb) == pytest.approx(idle(one) / 3)
        assert max(zb.peak_in_flight()) == max(one.peak_in_flight())
    elif m >= (3 * p - 1) / 2:  # ZB-V: a sixth, once enough micro-batches fill the V
        assert idle(zb) == pytest.approx(idle(one) / 6)
        assert max(zb.peak_in_flight()) == 2 * max(one.peak_in_flight())   # chunks of half a stage


@given(runnable_jobs(("interleaved-1f1b", "zero-bubble")))
def test_interleaved_and_zero_bubble_bubbles_are_below_1f1bs(job):
    schedule, p, m, v = job
    ours, one = bubble_fraction(p, m, schedule, v), bubble_fraction(p, m, "1f1b")
    assert ours < one if p > 1 else ours == one == 0
    assert pipeline_timeline(schedule, p, m, virtual_stages=v).idle_fraction <= one + 1e-12


def test_the_case_study_under_the_four_schedules():
    # p = 4, m = 8: 1F1B 3/11 ≈ 27.3%; interleaved (v = 2) 3/19; ZB-H1 3/27; ZB-V 3/51
    assert bubble_fraction(4, 8, "1f1b") == bubble_fraction(4, 8) == 3 / 11
    assert bubble_fraction(4, 8, "interleaved-1f1b", 2) == 3 / 19
    assert bubble_fraction(4, 8, "zero-bubble", 1) == 3 / 27
    assert bubble_fraction(4, 8, "zero-bubble", 2) == 3 / 51
    assert in_flight_chunks("interleaved-1f1b", 4, 8, 2) == [11, 9, 7, 5]
    assert in_flight_chunks("zero-bubble", 4, 8, 1) == [4, 4, 4, 4]
    assert in_flight_chunks("zero-bubble", 4, 8, 2) == [8, 8, 8, 8]
    assert in_flight_microbatches("interleaved-1f1b", 4, 8, 2) == [6, 5, 4, 3]
    # ZB-V with few micro-batches: torch drops the ones it planned up to 2p − 1, leaving holes
    assert bubble_fraction(4, 4, "zero-bubble", 2) == 6 / 30


@given(runnable_jobs(("interleaved-1f1b", "zero-bubble"), max_p=6))
def test_every_op_once_and_its_inputs_first(job):
    schedule, p, m, v = job
    t = pipeline_timeline(schedule, p, m, virtual_stages=v)
    kinds = "FBW" if schedule == "zero-bubble" else "FB"
    assert sorted((op.kind, op.stage, op.chunk, op.microbatch) for op in t.ops) == sorted(
        (k, d, c, i) for k in kinds for d in range(p) for c in range(v) for i in range(m))
    place = placement_of(schedule, v)
    end = {(op.kind, virtual_stage(op.stage, op.chunk, p, place), op.microbatch): op.end for op in t.ops}
    last = p * v - 1
    for op in t.ops:
        k = virtual_stage(op.stage, op.chunk, p, place)
        needs = {"F": ("F", k - 1, op.microbatch) if k else None,
                 "B": ("B", k + 1, op.microbatch) if k < last else ("F", k, op.microbatch),
                 "W": ("B", k, op.microbatch)}[op.kind]
        assert needs is None or op.start >= end[needs]


def test_placements():
    # loop: device i holds i, i + p, …; V: device 0 holds the first and the last virtual stage
    assert [virtual_stage(1, c, 4, "loop") for c in range(3)] == [1, 5, 9]
    assert [virtual_stage(0, c, 4, "v") for c in range(2)] == [0, 7]
    assert [virtual_stage(3, c, 4, "v") for c in range(2)] == [3, 4]
    assert placement_of("zero-bubble", 2) == "v" and placement_of("zero-bubble", 1) == "loop"
    assert placement_of("interleaved-1f1b", 2) == "loop"


def test_new_schedules_refuse_what_the_rules_refuse():
    with pytest.raises(ValueError, match="交错式 1F1B 要求微批次数是流水线阶段数 pipeline_stages = 4 的整数倍"):
        schedule_order("interleaved-1f1b", 4, 6, 2)
    with pytest.raises(ValueError, match="交错式 1F1B 要求每张卡放 ≥ 2 段模型"):
        in_flight_chunks("interleaved-1f1b", 4, 8, 1)
    with pytest.raises(ValueError, match="零气泡调度只有 ZB-H1"):
        pipeline_timeline("zero-bubble", 4, 8, virtual_stages=3)
    with pytest.raises(ValueError, match=r"ZB-H1 把微批次按每轮约 pipeline_stages = 4 个分成 ⌊m/p⌋ = 2 轮"):
        check_runnable("zero-bubble", 4, 9)
    assert simulable(100, 66) and not simulable(100, 66, "zero-bubble", 2)


def test_split_backward_costs_and_keys():
    orders = schedule_order("zero-bubble", 2, 2, 2)
    ops = simulate(orders, placement="v")
    assert {op.kind: op.end - op.start for op in ops} == {"F": 1.0, "B": 1.0, "W": 1.0}   # B + W = the backward
    uniform = {(op.kind, op.stage, op.microbatch) if op.chunk == 0 else (op.kind, op.stage, op.microbatch, op.chunk):
               1.0 for op in ops}
    assert simulate(orders, durations=uniform, placement="v") == ops
    with pytest.raises(ValueError, match=r"durations 缺少操作 \('W', 1, 1, 1\)"):
        simulate(orders, durations={k: d for k, d in uniform.items() if k != ("W", 1, 1, 1)}, placement="v")
    # read in loop placement, ZB-V's orders wait for inputs that never come: the placement matters
    with pytest.raises(ValueError, match="调度死锁"):
        simulate(orders)
    with pytest.raises(ValueError, match="placement = 'v'：V 形放置每张卡正好两段模型"):
        simulate(schedule_order("interleaved-1f1b", 2, 2, 3), placement="v")
    with pytest.raises(ValueError, match="调度死锁"):   # a weight gradient before its input gradient
        simulate([[("F", 0, 0), ("W", 0, 0), ("B", 0, 0)]])
    with pytest.raises(ValueError, match="操作类型 'X' 不存在"):
        simulate([[("X", 0, 0)]])


def test_peak_in_flight_holds_an_activation_until_its_weight_gradient():
    early = [Op(0, 0, "F", 0, 1), Op(0, 0, "B", 1, 2), Op(0, 0, "W", 2, 3), Op(0, 1, "F", 3, 4),
             Op(0, 1, "B", 4, 5), Op(0, 1, "W", 5, 6)]
    late = [Op(0, 0, "F", 0, 1), Op(0, 0, "B", 1, 2), Op(0, 1, "F", 2, 3), Op(0, 1, "B", 3, 4),
            Op(0, 0, "W", 4, 5), Op(0, 1, "W", 5, 6)]
    assert Timeline("zero-bubble", 1, 2, tuple(early)).peak_in_flight() == [1]
    assert Timeline("zero-bubble", 1, 2, tuple(late)).peak_in_flight() == [2]   # W deferred: both held
    no_w = tuple(op for op in late if op.kind != "W")   # without a split, B frees it
    assert Timeline("1f1b", 1, 2, no_w).peak_in_flight() == [1]


def test_outliers_and_medians_keep_chunks_apart():
    t = pipeline_timeline("interleaved-1f1b", 2, 2, virtual_stages=2)
    slow = Timeline(t.schedule, 2, 2, tuple(Op(o.stage, o.microbatch, o.kind, o.start, o.start + (10 if (
        o.kind, o.stage, o.microbatch, o.chunk) == ("F", 1, 0, 1) else o.end - o.start), o.chunk)
        for o in t.ops), 2)
    assert outlier_ops(slow) == (("F", 1, 0, 1),) and outlier_ops(t) == ()
    typical = median_timeline([t, t, slow])
    assert typical.virtual_stages == 2 and typical.makespan == pytest.approx(t.makespan)
    assert sorted((o.kind, o.stage, o.microbatch, o.chunk) for o in typical.ops) == sorted(
        (o.kind, o.stage, o.microbatch, o.chunk) for o in t.ops)
