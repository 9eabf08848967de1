"""Write book/4.6-misconceptions.ipynb from the cells below (unexecuted; run scripts/execute-notebooks.sh).

Kept so the chapter's source can be reviewed as one Python file; the committed notebook is the
executed result. usage (then add the Colab cell and execute):

    .venv/bin/python scripts/authoring/make_4_6.py
    .venv/bin/python scripts/authoring/colab_cell.py --apply book/4.6-misconceptions.ipynb
    bash scripts/execute-notebooks.sh book/4.6-misconceptions.ipynb
"""
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "book" / "4.6-misconceptions.ipynb"


def md(text: str):
    return new_markdown_cell(text.strip("\n"))


def code(text: str, *, tags: tuple[str, ...] = (), caption: str | None = None, name: str | None = None):
    cell = new_code_cell(text.strip("\n"))
    if tags:
        cell.metadata["tags"] = list(tags)
    if caption:
        cell.metadata["mystnb"] = {"figure": {"caption": caption, "name": name}}
    return cell


CELLS = [
    md(r"""
# 4.6 常见误区与总结

原文在最后列了四个常见误区：

1. **Batch Size 只影响显存**——实际上它同时影响收敛速度、计算效率和通信开销；
2. **Global Batch Size 必须等于所有设备上同时处理的样本总和**——梯度累积可以在不改变全局批大小的前提下调整微批次大小；
3. **小 Batch Size 一定收敛慢**——训练初期小批次的梯度噪声“有助于探索”，可能反而更快，后期则需要逐步增大批大小或降低学习率；
4. **只关注 Batch Size 而忽略学习率**——二者强耦合，调整批大小时必须同步调整学习率。

本章不只复述这四条，而是给每一条配一个可以在笔记本电脑上几秒钟跑完的实验。和前几章一样，**判据先写在前面**，
结论由 `batchlab.verdicts` 里的函数根据测量给出；`tests/test_misconceptions.py` 给每个判据喂入相反的测量，确认结论会翻转。
最后是一页**调参速查表**：在 910B 上调一个流水线作业时按什么顺序检查什么，每一步用哪个函数、控件或命令。
"""),
    code(r"""
import matplotlib.pyplot as plt
from batchlab.case import CASE_STUDY, CASE_STUDY_TUNED
from batchlab.data import make_corpus
from batchlab.model import BigramLM, GPT, get_config
from batchlab.ui import style
from batchlab.ui.tables import text_table
from batchlab.verdicts import VERDICT

_ = style.setup()
data = make_corpus(num_sequences=4096, seq_len=16, seed=0)
held_out = make_corpus(num_sequences=256, seq_len=16, seed=0, sample_seed=1000)
floor = data.source.entropy_rate()
print(f"语料：{len(data)} 条长 16 的序列，词表 {data.source.vocab_size}；损失下限（熵率）{floor:.3f}")
"""),
    md(r"""
## 误区一：“Batch Size 只影响显存”

改变批次有两种方式，它们动的东西不一样：

- **全局批大小不变，增大微批次**（4.5 节案例的调整：微批次 2 → 4）：每步的样本数不变，只是切得更粗；
- **微批次大小不变，增大全局批大小**（64 → 128）：每步的样本更多，微批次数随之翻倍。

对原文案例（GPT-2 1.5B，序列 1024，4 级流水线 × 2 路数据并行，910B）的这两种改变，把前几章的量并排放在一起：

| 量 | 从哪里来 |
|---|---|
| 最满阶段的显存 | 4.3 节的显存模型（1F1B，bf16 混合精度，Adam，不重计算） |
| 矩阵乘法效率 | 4.4 节的 910B 屋顶线（低端），$M$ = 微批次大小 × 序列长度 |
| 气泡占比 | $(p-1)/(m+p-1)$（4.4 节） |
| 每步点对点消息数 | 每个微批次在 $p-1$ 个阶段边界上各收发一次激活与梯度：$2(p-1)m$ |
| 每个样本分摊的 All-Reduce | 环形 All-Reduce 每张卡每步发送 $2(d-1)/d$ × 一个阶段的梯度字节，再除以全局批大小 |
| 达到目标损失的步数 | 在小模型上实测（见下） |

**判据**：对一种改变，若除显存以外的每个量变化都不超过 ±5%，判“只影响显存”成立；只要有一个量超出，就不成立。

先确认通信的计数公式与真实流水线一致：在 4.4 节的单进程流水线里，每当一个张量越过阶段边界就记一次。
"""),
    code(r"""
from batchlab.comm import p2p_bytes, p2p_messages
from batchlab.pipeline_run import pipeline_batch, run_pipeline_local

pipe_config = get_config("tiny", n_layer=4)
p, m, micro, seq = 4, 8, 2, 16
inputs, targets = pipeline_batch(pipe_config, m, micro, seq, seed=0)
pipe_model = GPT(pipe_config)
run = run_pipeline_local(pipe_model, inputs, targets, p, m, "1f1b")
print(f"流水线实际收发 {run['p2p_messages']} 条消息、{run['p2p_bytes']:,} 字节；"
      f"公式 2(p-1)m = {p2p_messages(p, m)} 条、{p2p_bytes(p, m, micro, seq, pipe_config.d_model, 4):,} 字节")
"""),
    md(r"""
**达到目标损失的步数**无法从形状算出来，只能训练。1.5B 的模型在这里训练不了，我们在本书最小的模型上测：
`BigramLM`，一张“前一个 token → 下一个 token”的对数几率表（它的损失对参数是凸的，几千步只要一两秒）。
用 SGD、学习率 100，按与案例相同的比例改变批次：基线每步 64 条序列、切成 2 个微批次；“微批次 ×2”切成 1 个；
“全局批次 ×2”每步 128 条、仍是每个微批次 32 条（4 个微批次）。目标损失取基线第 32 步的验证损失。
"""),
    code(r"""
from batchlab.train import steps_to_target, train

def bigram_run(**kwargs):
    return train(BigramLM(data.source.vocab_size), data, optimizer="sgd", eval_data=held_out, **kwargs)

analog = {"基线": dict(batch_size=64, num_microbatches=2),
          "微批次 ×2": dict(batch_size=64, num_microbatches=1),
          "全局批次 ×2": dict(batch_size=128, num_microbatches=4)}
convergence = {name: bigram_run(steps=32, lr=100.0, eval_every=1, **kwargs) for name, kwargs in analog.items()}
target = convergence["基线"].eval_loss[-1]
steps_needed = {name: steps_to_target(h, target) for name, h in convergence.items()}
print(f"目标验证损失 {target:.3f}；达到它所需的步数：{steps_needed}")
"""),
    code(r"""
from batchlab.effects import EFFECTS, MEMORY_EFFECT, batch_effects, effect_ratios
from batchlab.roofline import DEVICE_PRESETS
from batchlab.tune import roofline_curve

npu = DEVICE_PRESETS["ascend-910b"]
curve = roofline_curve(CASE_STUDY.config, npu.peak_flops[0], npu.memory_bandwidth[0], name="910B 屋顶线（低端）")
c = CASE_STUDY
jobs = {"基线": (c.global_batch, c.micro_batch_size), "微批次 ×2": (c.global_batch, CASE_STUDY_TUNED.micro_batch_size),
        "全局批次 ×2": (2 * c.global_batch, c.micro_batch_size)}
effects = {name: {**batch_effects(c.config, c.seq_len, g, b, c.pipeline_stages, c.data_parallel, curve),
                  "steps_to_target": steps_needed[name]} for name, (g, b) in jobs.items()}
text_table(["量", *[f"{name}（全局 {g}，微批次 {b}）" for name, (g, b) in jobs.items()]],
           [[label, *[effects[name][key] for name in jobs]] for key, label in EFFECTS.items()], digits=3)
"""),
    code(r"""
from batchlab.ui.misconceptions import plot_what_moves
from batchlab.verdicts import only_memory_moves, unchanged

ratios = {name: effect_ratios(effects[name], effects["基线"]) for name in ("微批次 ×2", "全局批次 ×2")}
fig = plot_what_moves(ratios)
plt.show()
for name, r in ratios.items():
    moved = [EFFECTS[k] for k, v in r.items() if k != MEMORY_EFFECT and not unchanged(v)]
    print(f"{name}：“只影响显存”{VERDICT[only_memory_moves(r, MEMORY_EFFECT)]}；显存以外变化超过 5% 的：{'、'.join(moved) or '无'}")
""", caption="同一个作业的两种批次改变各自移动了什么（改变后 / 改变前，对数纵轴）。灰带是 ±5%：落在灰带内算“不变”。"
             "显存、效率、气泡和通信由前几章的模型对原文案例算出，步数在 BigramLM 上实测。", name="fig-4-6-what-moves"),
    md(r"""
两种改变恰好互为镜像：

- **微批次 ×2**：显存上升（1F1B 下每个阶段在途的微批次数 $\min(p-s, m)$ 不变，每个的激活翻倍），气泡变大（$m$ 从 16 降到 8），
  点对点消息减半（每条消息都有固定的启动延迟，这是 4.5 节没法用模型解释的那部分提速的候选来源之一）；
  每步的样本没变，所以**收敛所需的步数完全不变**，All-Reduce 也不变。矩阵乘法效率在屋顶线低端下也不变——
  $M$ 从 2048 行到 4096 行都已越过拐点（4.4 节）；在带宽更低的设备上或更短的序列下，它会随之上升。
- **全局批次 ×2**：在 1F1B 下**显存完全不变**，变的反而是其余各项：气泡减小、每步消息翻倍、每个样本分摊的 All-Reduce 减半、
  达到目标所需的步数减少（每步看的样本多了一倍，但步数并没有减半——这正是 4.2 节“步数与样本数的权衡”）。

所以“只影响显存”两头都错：改微批次时它还动了气泡和通信，改全局批次时它**唯一没动的**恰恰是显存。

## 误区二：“全局批大小必须等于所有设备上同时处理的样本”

梯度累积把一个批次分 $k$ 次前向、反向，梯度相加后再更新一次参数。只要损失按**整个批次**归一化，
它与一次性处理整批得到的是同一个梯度：$\nabla \frac{1}{N}\sum_i \ell_i = \sum_{j=1}^{k} \nabla \frac{1}{N}\sum_{i \in \text{微批次}_j} \ell_i$。

**判据**：两种算法得到的梯度，最大差异与最大梯度分量之比不超过 $10^{-5}$（float32 的舍入误差约 $10^{-7}$），判为“同一次更新”。
"""),
    code(r"""
from batchlab.accumulation import batch_gradients, relative_gap
from batchlab.verdicts import same_update

gpt = GPT(get_config("pico"))
x, y = data.inputs[:32], data.targets[:32]
whole_batch = batch_gradients(gpt, x, y)
gaps = {k: relative_gap(batch_gradients(gpt, x, y, num_microbatches=k), whole_batch) for k in (2, 4, 8, 32)}
pipe_gap = relative_gap(run["grads"], batch_gradients(pipe_model, inputs, targets))
text_table(["做法", "与一次处理整批的相对差异", "同一次更新"],
           [*[[f"{k} 个微批次累积", g, VERDICT[same_update(g)]] for k, g in gaps.items()],
            ["4 级 1F1B 流水线（8 个微批次）", pipe_gap, VERDICT[same_update(pipe_gap)]]], digits=9)
"""),
    md(r"""
所以全局批大小是**一次参数更新用了多少样本**，不是“同一时刻在所有卡上”的样本数：8 张卡每张每次只放得下 2 条序列，
也可以用 64 的全局批大小训练，只是分成几次算完再更新。这正是 4.5 节案例把微批次从 2 改成 4 而不必重新调学习率的原因。

这个等价有前提。下面三个实验各破坏一个前提，而且**展示**它怎样破坏：

1. **样本之间有交互的层**：批归一化（BatchNorm）用整个批次的均值和方差归一化每个样本，切成微批次后统计量变成了每个微批次各自的。
   `BatchNormLM` 是最小的例子：嵌入 → BatchNorm → 输出头。GPT 用的是层归一化（LayerNorm），每个 token 单独归一化，不受影响。
2. **Dropout 的随机数**：每次前向都从随机数流里抽遮罩，切法不同，抽到的遮罩就不同。作为对照，再看同一整批、只换一个随机种子的差异——
   如果两者同量级，说明差的只是噪声，不是偏差。
3. **按微批次归一化的损失**：序列长短不一（有填充）时，若每个微批次先对自己的 token 求平均、再除以微批次数，
   短序列多的微批次里每个 token 的权重就更大；应当按整个批次的有效 token 总数归一化（`batchlab.batching.token_weights`）。
"""),
    code(r"""
from batchlab.accumulation import BatchNormLM, mask_after, random_lengths

bn = BatchNormLM(data.source.vocab_size)
dropout_gpt = GPT(get_config("pico", dropout=0.1))
padded = mask_after(y, random_lengths(len(y), y.shape[1], shortest=2, seed=0))
cases = {
    "BatchNorm，4 个微批次": (batch_gradients(bn, x, y, 4), batch_gradients(bn, x, y)),
    "Dropout 0.1，4 个微批次（同一种子）": (batch_gradients(dropout_gpt, x, y, 4, seed=0), batch_gradients(dropout_gpt, x, y, seed=0)),
    "Dropout 0.1，整批换一个种子（对照）": (batch_gradients(dropout_gpt, x, y, seed=1), batch_gradients(dropout_gpt, x, y, seed=0)),
    "变长序列，按微批次平均": (batch_gradients(gpt, x, padded, 4, normalize="per_microbatch"), batch_gradients(gpt, x, padded)),
    "变长序列，按全局 token 数归一化": (batch_gradients(gpt, x, padded, 4), batch_gradients(gpt, x, padded)),
}
breaks = {name: relative_gap(*pair) for name, pair in cases.items()}
text_table(["情形", "与一次处理整批的相对差异", "同一次更新"],
           [[name, g, VERDICT[same_update(g)]] for name, g in breaks.items()], digits=9)
"""),
    md(r"""
读这张表：BatchNorm 与按微批次平均都给出**系统性的**差异——它们算的是另一个目标函数的梯度；
改成按全局 token 数归一化后，变长序列的累积又回到了“同一次更新”。Dropout 的差异与“换一个随机种子”同量级：
累积后的梯度仍是同一个随机梯度的一次抽样，只是抽到了另一组遮罩——分布相同、数值不同。
4.4 节的流水线不能用 Dropout（`run_pipeline_local` 会拒绝），原因正在于此：它要与梯度累积逐位比较。

## 误区三：“小 Batch Size 一定收敛慢”

原文的说法有两半：训练初期小批次可能更快；后期需要逐步增大批大小或降低学习率来稳定收敛。
后一半的依据是 {cite:t}`smith2018dont`：SGD 的噪声大致与 学习率 × 数据量 / 批大小 成正比，
所以“把批大小增大 $k$ 倍”与“把学习率降低 $k$ 倍”对噪声的作用相同，而前者的参数更新次数更少。

实验（`BigramLM`，SGD，学习率 30，4096 条样本的预算，3 个随机种子）：

- 小批次 $B=8$ 与大批次 $B=64$，学习率相同，**按已见样本数**比较；
- 原文的两种补救，都作用在 $B=8$ 上：余弦衰减学习率；或者在看完一半样本（2048 条）时把批大小增大到 4 倍（$B=32$）。

**判据**（先写下来）：

1. “小批次一定慢”：若在前期的两个样本预算（256 与 512 条）处 $B=8$ 的验证损失都严格低于 $B=64$，且每个种子都如此，判这个说法**不成立**。
2. “后期需增大批大小或降低学习率”：若一种补救的最终验证损失在每个种子都严格低于恒定学习率的 $B=8$，判这种补救**有效**。
"""),
    code(r"""
from batchlab.ui.misconceptions import plot_early_late
from batchlab.verdicts import beats, holds_in_every_seed, loss_at_samples, lowest_at_budgets

budget, lr, seeds = 4096, 30.0, (0, 1, 2)
plans = {"B=8，恒定学习率": dict(batch_size=8, steps=budget // 8),
         "B=64，恒定学习率": dict(batch_size=64, steps=budget // 64),
         "B=8，余弦衰减": dict(batch_size=8, steps=budget // 8, decay="cosine"),
         "B=8，2048 条后增大到 32": dict(batch_size=8, steps=budget // 16 + budget // 64, batch_increase=(budget // 16 + 1, 4))}
runs3 = {seed: {name: bigram_run(lr=lr, seed=seed, eval_every=max(1, 128 // kw["batch_size"]), **kw)
                for name, kw in plans.items()} for seed in seeds}
fig = plot_early_late(list(runs3[0].values()), list(runs3[0]), split=budget // 2, floor=floor)
plt.show()
""", caption="恒定学习率下小批次与大批次的验证损失（按已见样本数），以及作用在小批次上的两种补救（种子 0）。"
             "左：全程；右：后半程放大。", name="fig-4-6-early-late"),
    code(r"""
small, large, remedies = "B=8，恒定学习率", "B=64，恒定学习率", ["B=8，余弦衰减", "B=8，2048 条后增大到 32"]
early = [256, 512]
early_fast = holds_in_every_seed([lowest_at_budgets({8: (r[small].eval_samples, r[small].eval_loss),
                                                     64: (r[large].eval_samples, r[large].eval_loss)}, early)
                                  for r in runs3.values()])
helps = {name: holds_in_every_seed([beats(r[name].final_eval_loss, [r[small].final_eval_loss]) for r in runs3.values()])
         for name in remedies}
display(text_table(["做法", "更新次数", *[f"{n} 条样本后（种子 0）" for n in early], *[f"最终损失（种子 {s}）" for s in seeds]],
                   [[name, len(runs3[0][name].step), *[loss_at_samples(runs3[0][name].eval_samples, runs3[0][name].eval_loss, n)
                                                       for n in early],
                     *[runs3[s][name].final_eval_loss for s in seeds]] for name in plans], digits=4))
print(f"“小批次一定收敛慢”：{VERDICT[not early_fast]}（前期 B=8 在每个种子都更低：{early_fast}）")
for name, ok in helps.items():
    print(f"补救“{name}”在每个种子都胜过恒定学习率的 B=8：{VERDICT[ok]}")
"""),
    md(r"""
读图和表：

- **前期**，按样本计，$B=8$ 比 $B=64$ 快得多：同样看过 256 条样本，$B=8$ 已经走了 32 步，$B=64$ 才走 4 步。
  这就是原文“小批次初期可能更快”的可测量的部分——它来自**每个样本的利用率**（{cite:t}`mccandlish2018empirical` 的
  $B \ll B_\text{noise}$ 区间），不需要“探索”来解释。
- **后期**，恒定学习率的 $B=8$ 停在熵率上方一小段、来回抖动：这是梯度噪声留下的“噪声地板”。两种补救都把噪声降下来，
  最终损失更低；增大批大小的做法还少用了三成多的参数更新（见表中“更新次数”），这正是 {cite:t}`smith2018dont` 的论点。
- $B=64$ 在同样的学习率下到最后都落后：它每步的梯度更准，却用了同样小的步长——学习率没有随批大小调整，这是误区四的内容。

**这里检验不了的**：原文说小批次的噪声“有助于探索”。`BigramLM` 的损失是凸的，只有一个最优解，没有什么可“探索”的；
在非凸的大模型上，小批次噪声与泛化的关系是 {cite:t}`keskar2017large`（大批次趋向“尖锐”极小值）与
{cite:t}`hoffer2017train`（泛化差距主要来自更新次数太少，训练更久即可弥补）争论的问题，需要真实数据和长时间训练，
本书的小实验无法判断谁对。

## 误区四：“只关注 Batch Size 而忽略学习率”

{cite:t}`goyal2017accurate` 的线性缩放法则：对 SGD，批大小增大 $k$ 倍时学习率也增大 $k$ 倍，并在开头用几步**预热**把学习率逐渐升上去。
两个实验，都用 `BigramLM` 和 SGD、相同的样本预算（1024 条）、3 个随机种子取平均：

1. **学习率扫描**：$B=8$ 与 $B=64$ 各自扫描同一组学习率（以 30 为中心、相邻两点相差 $\sqrt 8$ 倍），看最好的学习率如何随批大小移动。
   **判据**：$B=64$ 的最优学习率严格大于 $B=8$ 的，判“批大小与学习率耦合”成立。
2. **同一个大批次作业，调与不调学习率**：$B=64$ 直接沿用 $B=8$ 的最优学习率，对比按线性法则放大 8 倍、以及放大后再加 4 步预热。
   **判据**：放大后的平均最终损失低于沿用的，判“不调学习率会明显退化”成立；预热在每个种子都更好，判“预热有帮助”成立。
"""),
    code(r"""
import math
import statistics
from batchlab.scaling import scale_lr
from batchlab.train import sweep
from batchlab.ui.misconceptions import plot_lr_sweep
from batchlab.verdicts import best_rate_grows

sweep_budget, base_lr = 1024, 30.0
grid = [base_lr * math.sqrt(8) ** k for k in range(-2, 4)]
final = {}
for batch in (8, 64):
    per_seed = [sweep([dict(lr=rate) for rate in grid], model=lambda: BigramLM(data.source.vocab_size), data=data,
                      batch_size=batch, steps=sweep_budget // batch, optimizer="sgd", eval_data=held_out,
                      eval_every=max(1, 128 // batch), seed=seed) for seed in seeds]
    final[batch] = {rate: statistics.mean(runs[i].final_eval_loss for runs in per_seed) for i, rate in enumerate(grid)}
best = {batch: min(losses, key=losses.get) for batch, losses in final.items()}
fig = plot_lr_sweep(final, floor=floor)
plt.show()
edge = [b for b, rate in best.items() if rate in (grid[0], grid[-1])]
print(f"最优学习率：{ {b: round(r, 1) for b, r in best.items()} }；比值 {best[64] / best[8]:.2f}（线性法则预测 {64 // 8}）"
      + (f"；注意 B={edge} 的最优值落在扫描区间的边上" if edge else "；两者都在扫描区间内部"))
print(f"“批大小与学习率耦合”：{VERDICT[best_rate_grows(best)]}")
""", caption="相同样本预算（1024 条）后的验证损失与学习率（3 个种子的平均）。星号是每个批大小的最优学习率。",
         name="fig-4-6-lr-sweep"),
    code(r"""
tuned_lr = best[8]
variants = {"沿用 B=8 的学习率": dict(lr=tuned_lr),
            "线性放大 8 倍": dict(lr=scale_lr(tuned_lr, 8, 64, "linear")),
            "线性放大 8 倍 + 4 步预热": dict(lr=scale_lr(tuned_lr, 8, 64, "linear"), warmup_steps=4)}
large_runs = {name: [bigram_run(batch_size=64, steps=sweep_budget // 64, eval_every=2, seed=seed, **kw) for seed in seeds]
              for name, kw in variants.items()}
mean_final = {name: statistics.mean(h.final_eval_loss for h in hs) for name, hs in large_runs.items()}
display(text_table(["B=64 的做法", "学习率", *[f"种子 {s}" for s in seeds], "平均"],
                   [[name, variants[name]["lr"], *[h.final_eval_loss for h in hs], mean_final[name]]
                    for name, hs in large_runs.items()], digits=3))
scaled, kept, warm = "线性放大 8 倍", "沿用 B=8 的学习率", "线性放大 8 倍 + 4 步预热"
print(f"“不调学习率会明显退化”：{VERDICT[beats(mean_final[scaled], [mean_final[kept]])]}")
print(f"“预热有帮助”（每个种子）：{VERDICT[holds_in_every_seed([beats(w.final_eval_loss, [s.final_eval_loss]) for w, s in zip(large_runs[warm], large_runs[scaled])])]}")
"""),
    md(r"""
在 SGD 下，最优学习率随批大小几乎正好按线性法则移动；不调学习率的 $B=64$ 在同样的样本预算后远远落后——
它比 $B=8$ 少走 8 倍的步数，每一步却一样小。这就是原文“调整 Batch Size 时必须同步调整学习率”的含义，也说明
4.2 节里“大批次追不上”的一部分原因是学习率，而不只是批次本身。

预热在这里帮助不大、甚至取决于种子：`BigramLM` 从全零出发、损失是凸的，一开始就用大学习率也不会发散。
预热要解决的是深层网络在训练最初几步里梯度剧烈变化、大学习率会把参数推离的问题（{cite:t}`goyal2017accurate` 在 ResNet-50 上观察到的）；
这个小实验缺少这种机制，所以不能用来否定预热，只能说明预热的作用取决于模型。

还有两点需要记住：线性法则是对 SGD 说的；对 Adam 类优化器，{cite:t}`malladi2022sdes` 的分析给出的是平方根缩放
（4.2 节的实验可以对照）。而且法则只在批大小低于临界批大小时成立，超过以后再加大学习率也追不回步数（4.2 节）；
{cite:t}`nado2021large` 则指出，只要各自认真调好学习率等超参数，普通的动量 SGD 和 Adam 在大批次下也能做到 LARS、LAMB 的效果——
“调学习率”本身就是大批次训练最重要的一步。

## 总结：调参速查表

在 910B 上给一个流水线并行的作业定批次，按下面的顺序检查。每一步的命令都可以直接复制运行（`tests/test_misconceptions.py`
会按这里写的参数逐条运行它们，确认都能正常退出）；括号里是讲解它的章节。

| 步骤 | 要回答的问题 | 命令、函数或控件 | 章节 |
|---|---|---|---|
| 1. 批次算术 | 全局批大小、微批次大小、数据并行度、微批次数对得上吗？原文的“梯度累积步数”按哪种读法？ | `python -m batchlab plan --model gpt2-xl --seq-len 1024 --global-batch 64 --micro-batch 2 --pipeline-stages 4 --data-parallel 2 --grad-accum 4`；`BatchCalculator` | 4.1 |
| 2. 每阶段显存 | 最满的阶段放得下吗？换调度或重计算能省多少？ | `python -m batchlab plan --model gpt2-xl --seq-len 1024 --global-batch 64 --micro-batch 4 --pipeline-stages 4 --data-parallel 2 --schedule 1f1b --recompute selective`；`MemoryExplorer` | 4.3 |
| 3. 微批次的计算效率 | 在这张卡上，$M$ = 微批次大小 × 序列长度的矩阵乘法跑多快？ | `python -m batchlab bench-matmul --m 1 8 64 --k 1024 --n 1024`；`batchlab.matmul_bench.bench_matmul` | 4.4 |
| 4. 气泡 | 这个 $m$ 和 $p$ 下流水线空等多少？ | `python -m batchlab pipeline --schedule 1f1b --stages 4 --micro-batches 8` | 4.4 |
| 5. 综合权衡 | 哪个微批次大小在放得下的前提下吞吐最高？ | `python -m batchlab tune --model gpt2-xl --seq-len 1024 --global-batch 64 --pipeline-stages 4 --data-parallel 2`；`TradeoffExplorer` | 4.4、4.5 |
| 6. 通信与梯度累积 | 每步收发多少消息、All-Reduce 多少字节？累积的损失按全局 token 数归一化了吗？ | `batchlab.comm.step_communication`；`batchlab.accumulation.batch_gradients` | 4.6 |
| 7. 学习率 | 全局批大小变了吗？变了就按优化器选缩放法则、加预热，并在新批大小上重新扫描学习率 | `batchlab.scaling.scale_lr`；`NoiseExplorer` | 4.2、4.6 |

第 3 步量的是**你手上的设备**：在 910B 上运行（装好 `torch_npu`，见 README）得到的才是要用的曲线；4.5 节的 `tune` 也可以换用这条实测曲线。

## 小结

- **误区一**：改微批次动的是显存、气泡和通信，收敛步数不变；改全局批大小在 1F1B 下显存不变，动的是收敛、气泡和通信。“只影响显存”两头都不成立。
- **误区二**：梯度累积与一次处理整批给出同一次更新（float32 舍入以内），也穿过流水线成立；前提是样本之间没有交互（不用 BatchNorm）、
  损失按全局批次的 token 总数归一化；Dropout 只让两者成为同一随机梯度的不同抽样。
- **误区三**：按样本计，小批次前期更快；恒定学习率下它在后期停在噪声地板上，增大批大小或衰减学习率都能再降一截 {cite}`smith2018dont`。
  “噪声有助于探索”在凸的小模型上无从检验。
- **误区四**：SGD 的最优学习率随批大小近乎线性地移动；不调学习率的大批次在相同样本预算下明显落后。预热的作用取决于模型。
- 速查表把全书串成一个顺序：批次算术 → 显存 → 效率 → 气泡 → 综合权衡 → 通信 → 学习率。

## 练习
"""),
    code(r"""
from batchlab.ui.exercises import ask, check
"""),
    *[code(f'ask("4.6-{k}")\nanswer = None\ncheck("4.6-{k}", answer)') for k in range(1, 6)],
]


def main() -> None:
    nb = new_notebook(cells=CELLS)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    nbformat.write(nb, OUT)
    print(f"wrote {OUT.relative_to(ROOT)} ({len(CELLS)} cells)")


if __name__ == "__main__":
    main()
