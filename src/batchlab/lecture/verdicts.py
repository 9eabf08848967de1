"""Criteria that decide whether a claim of the lecture (原文) holds, as plain numbers (pure math, no torch).

A chapter states its criterion in prose *before* the measurement, then calls one of these functions
on the measured numbers; the tests feed each one a contrary measurement and see the verdict flip.
:data:`VERDICT` holds the words readers see.
"""
from __future__ import annotations

from typing import Mapping, Protocol, Sequence

from batchlab.formulas.checks import nonnegative, positive, whole
from batchlab.formulas.fit import least_squares_line

__all__ = ["VERDICT", "straight_line_residual", "loss_at_samples", "loss_after", "lowest_at_budgets", "count_rises", "in_band", "beats",
           "samples_to_target", "holds_in_every_seed", "PRESCRIBED", "wins_as_prescribed", "later_rises", "oscillates", "beats_like_with_like", "wins_per_seed", "unchanged", "only_memory_moves", "moved_besides", "same_update",
           "best_rate_grows", "OSCILLATION_MIN_RISES", "UNCHANGED_TOLERANCE", "SAME_DISTRIBUTION", "UNTESTABLE", "VERDICT_LABELS",
           "update_verdict", "FLOAT32_ROUNDING_EXPONENT", "FLOAT32_ROUNDING", "SAME_UPDATE_TOLERANCE"]

VERDICT: dict[bool, str] = {True: "成立", False: "不成立"}
SAME_DISTRIBUTION = "同分布，非同一次更新"
"""The third label: a random computation whose gap from the reference is of the order of re-drawing its
random numbers (dropout under accumulation) — neither the same update nor a different objective."""
UNTESTABLE = "本书无法检验"
"""The fourth: the criterion needs data, scale or hardware this book's experiments do not have."""
VERDICT_LABELS: dict[str, str] = {
    VERDICT[True]: "先写明的判据被测量满足",
    VERDICT[False]: "先写明的判据未被满足（测量与说法相反，或差异超出判据的容差）",
    SAME_DISTRIBUTION: "两种算法给出同一个随机梯度的不同抽样：差异与只换一个随机种子同量级，不是系统偏差",
    UNTESTABLE: "判据需要本书的小实验没有的数据、规模或硬件；只说明缺什么，不下结论",
}
"""Every verdict word a chapter prints, with its meaning: the glossary's 结论用语 table lists exactly these."""


def loss_at_samples(samples: Sequence[int], losses: Sequence[float], budget: int) -> float:
    """The loss a run had after ``budget`` samples: its last evaluation at or before that many samples.
    Raises if the run was never evaluated by then (so a comparison is never made on missing data)."""
    whole("budget", budget, 0)
    if len(samples) != len(losses):
        raise ValueError(f"samples 有 {len(samples)} 个、losses 有 {len(losses)} 个：必须一一对应")
    seen = [loss for s, loss in zip(samples, losses) if s <= budget]
    if not seen:
        raise ValueError(f"budget = {budget}：这次运行在 {budget} 个样本之前没有任何评估")
    return seen[-1]


class Evaluated(Protocol):
    """A run with its evaluations: samples seen at each, and the loss there (``measure.train.History``)."""
    eval_samples: Sequence[int]
    eval_loss: Sequence[float]


def loss_after(run: Evaluated, budget: int) -> float:
    """:func:`loss_at_samples` of one run: its last evaluated loss at or before ``budget`` samples."""
    return loss_at_samples(run.eval_samples, run.eval_loss, budget)


def lowest_at_budgets(curves: Mapping[int, tuple[Sequence[int], Sequence[float]]], budgets: Sequence[int]) -> bool:
    """True if the run with the smallest batch size (the smallest key of ``curves``, each value a
    (samples seen, eval loss) pair of lists) has the strictly lowest loss at every sample budget."""
    if len(curves) < 2 or not budgets:
        raise ValueError("需要至少两次运行和一个样本预算才能比较")
    smallest = min(curves)
    for budget in budgets:
        at = {b: loss_at_samples(*curves[b], budget) for b in curves}
        if any(at[b] <= at[smallest] for b in at if b != smallest):
            return False
    return True


def count_rises(losses: Sequence[float], tolerance: float = 0.0) -> int:
    """How often a loss is higher than the one evaluated just before it (by more than ``tolerance``)."""
    nonnegative("tolerance", tolerance)
    return sum(later > earlier + tolerance for earlier, later in zip(losses, losses[1:]))


OSCILLATION_MIN_RISES = 2
"""How many rises of the fixed validation loss in the second half count as oscillation (4.2 and 4.6)."""


def later_rises(eval_losses: Sequence[float]) -> int:
    """How often the validation loss rose between consecutive evaluations in the second half of a run
    (the evaluations from index ``len // 2`` on)."""
    if len(eval_losses) < 4:
        raise ValueError(f"只有 {len(eval_losses)} 次评估：后半程至少要有两次评估才能看回升")
    return count_rises(eval_losses[len(eval_losses) // 2:])


def oscillates(eval_losses: Sequence[float], min_rises: int = OSCILLATION_MIN_RISES) -> bool:
    """The book's one criterion for "后期震荡" (late oscillation): in the second half of a run, the loss on
    a fixed validation set rises between consecutive evaluations at least ``min_rises`` times."""
    whole("min_rises", min_rises, 1)
    return later_rises(eval_losses) >= min_rises


def wins_per_seed(candidate: Sequence[float], rival: Sequence[float]) -> list[bool]:
    """Seed by seed (same order in both lists), whether ``candidate``'s loss is strictly lower."""
    if len(candidate) != len(rival) or not candidate:
        raise ValueError(f"两组结果必须按同样的种子一一对应：{len(candidate)} 个与 {len(rival)} 个")
    return [c < r for c, r in zip(candidate, rival)]


PRESCRIBED = "加预热"
"""The condition the 原文 prescribes with linear scaling: 「还需要配合学习率预热」."""


def wins_as_prescribed(candidate: Mapping[str, Sequence[float]], rival: Mapping[str, Sequence[float]],
                       prescribed: str = PRESCRIBED) -> bool:
    """A rule judged as the 原文 prescribes it: ``candidate`` and ``rival`` map conditions (with and without
    warm-up) to per-seed losses, and only the ``prescribed`` condition decides — the candidate's mean is
    strictly lower than the rival's under that same condition (like with like: both warmed up). The other
    conditions are evidence for why the prescription includes them, not part of the verdict."""
    if prescribed not in candidate or prescribed not in rival:
        raise ValueError(f"两组做法都要有原文规定的条件 {prescribed!r}：{sorted(candidate)} 与 {sorted(rival)}")
    return beats_like_with_like({prescribed: candidate[prescribed]}, {prescribed: rival[prescribed]})


def beats_like_with_like(candidate: Mapping[str, Sequence[float]], rival: Mapping[str, Sequence[float]]) -> bool:
    """A like-with-like comparison: ``candidate`` and ``rival`` map the same conditions (e.g. without and
    with warm-up) to per-seed losses. True only if, in every condition, the candidate's mean loss over
    the seeds is strictly lower than the rival's under that same condition — winning one pairing (say,
    with warm-up against a rival without it) is not enough."""
    if not candidate or set(candidate) != set(rival):
        raise ValueError(f"两组做法的条件必须相同且非空：{sorted(candidate)} 与 {sorted(rival)}")
    for condition in candidate:
        wins_per_seed(candidate[condition], rival[condition])  # same seeds on both sides
        if not sum(candidate[condition]) / len(candidate[condition]) < sum(rival[condition]) / len(rival[condition]):
            return False
    return True


def in_band(value: float, low: float, high: float) -> bool:
    """low ≤ value ≤ high."""
    if low > high:
        raise ValueError(f"区间 [{low}, {high}] 的下界大于上界")
    return low <= value <= high


def beats(candidate: float, others: Sequence[float]) -> bool:
    """True if ``candidate`` (a loss) is strictly lower than every one of ``others``."""
    if not others:
        raise ValueError("others 为空：没有可比较的对象")
    return all(candidate < other for other in others)


def samples_to_target(samples: Sequence[int], losses: Sequence[float], target: float) -> int | None:
    """Samples seen at the first evaluation whose loss is at most ``target`` (None if never)."""
    return next((s for s, loss in zip(samples, losses) if loss <= target), None)


def holds_in_every_seed(per_seed: Sequence[bool]) -> bool:
    """A ranking that holds for each random seed tried (and at least one was tried)."""
    if not per_seed:
        raise ValueError("per_seed 为空：至少需要一个随机种子的结果")
    return all(per_seed)


def straight_line_residual(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Largest distance of the points from their least-squares straight line, relative to the largest
    absolute y: 0 for points exactly on a line. The criterion behind "activations grow linearly in B" (4.3)."""
    if len(xs) < 3:
        raise ValueError(f"需要至少 3 个点才能判断是不是直线，收到 {len(xs)} 个")
    intercept, slope = least_squares_line(xs, ys)
    scale = max(abs(y) for y in ys) or 1.0
    return max(abs(y - (intercept + slope * x)) for x, y in zip(xs, ys)) / scale


UNCHANGED_TOLERANCE = 0.05
"""How far (±, as a fraction) a quantity may move and still count as unchanged (4.6, 误区一)."""


def unchanged(ratio: float, tolerance: float = UNCHANGED_TOLERANCE) -> bool:
    """A quantity that moved by the factor ``ratio`` (new / old) stayed within ±``tolerance`` of itself."""
    nonnegative("tolerance", tolerance)
    return abs(positive("ratio", ratio) - 1.0) <= tolerance


def only_memory_moves(ratios: Mapping[str, float], memory: str, tolerance: float = UNCHANGED_TOLERANCE) -> bool:
    """The claim "batch size only affects memory" (原文 4.6, 误区一) for one change of batch: every quantity
    in ``ratios`` (new / old) other than the ``memory`` one stayed within ±``tolerance``."""
    if memory not in ratios:
        raise ValueError(f"memory = {memory!r} 不在 ratios 的键 {list(ratios)} 中")
    others = {name: r for name, r in ratios.items() if name != memory}
    if not others:
        raise ValueError("ratios 里除了显存没有别的量：无从判断“只影响显存”")
    return all(unchanged(r, tolerance) for r in others.values())


def moved_besides(ratios: Mapping[str, float], memory: str, tolerance: float = UNCHANGED_TOLERANCE) -> list[str]:
    """The quantities of ``ratios`` other than ``memory`` that moved by more than ±``tolerance``: what
    refutes "batch size only affects memory" (empty when :func:`only_memory_moves` holds)."""
    only_memory_moves(ratios, memory, tolerance)  # the same checks on its arguments
    return [name for name, r in ratios.items() if name != memory and not unchanged(r, tolerance)]


FLOAT32_ROUNDING_EXPONENT = -6
FLOAT32_ROUNDING = 10.0**FLOAT32_ROUNDING_EXPONENT
"""The largest relative gap float32 rounding alone leaves between two orders of the same sums (4.6
measures 1e-7 to 2e-7; the digits change with the CPU's vector instructions). Below it a gap is noise:
readers see "< 10⁻⁶（float32 舍入）" (:func:`batchlab.page.numbers.float_gap`), not its digits."""
SAME_UPDATE_TOLERANCE = 10.0**(FLOAT32_ROUNDING_EXPONENT + 1)  # 1e-5, exactly
"""How large a relative gradient gap still counts as the same update: ten times the rounding level, so no
CPU's rounding flips the verdict, and far below any systematic gap (4.6's are 10⁻² and more)."""


def same_update(relative_gap: float, tolerance: float = SAME_UPDATE_TOLERANCE) -> bool:
    """Two ways of computing one update agree: their largest gradient difference, relative to the
    largest gradient entry, is at most ``tolerance`` (ten times :data:`FLOAT32_ROUNDING`)."""
    return nonnegative("relative_gap", relative_gap) <= nonnegative("tolerance", tolerance)


def update_verdict(relative_gap: float, reseeded_gap: float, tolerance: float = SAME_UPDATE_TOLERANCE) -> str:
    """Verdict on "these two computations give the same update" when one of them draws random numbers.

    :func:`same_update` within ``tolerance`` → 成立; otherwise, a gap at most twice ``reseeded_gap`` (the
    gap between the same whole-batch computation under two random seeds) → :data:`SAME_DISTRIBUTION`;
    a larger gap is systematic → 不成立.
    """
    if same_update(relative_gap, tolerance):
        return VERDICT[True]
    return SAME_DISTRIBUTION if relative_gap <= 2 * nonnegative("reseeded_gap", reseeded_gap) else VERDICT[False]


def best_rate_grows(best_lr: Mapping[int, float]) -> bool:
    """The best learning rate (value) never falls as the batch size (key) grows, and the largest batch's
    is strictly higher than the smallest's: the coupling of 原文 4.6 误区四."""
    if len(best_lr) < 2:
        raise ValueError("需要至少两个批大小的最优学习率才能比较")
    rates = [positive("best_lr", best_lr[b]) for b in sorted(best_lr)]
    return all(a <= b for a, b in zip(rates, rates[1:])) and rates[-1] > rates[0]
