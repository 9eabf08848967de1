"""Which layers each pipeline stage runs, and how many parameters it holds (pure math, no torch).

One function, :func:`partition_layers`, decides the split for everyone: the memory model of 4.3, the
torch stages of 4.4 and the CLI's check that every stage gets a layer.

Where the embeddings and the head live (Megatron-LM, Shoeybi et al. 2019; Narayanan et al. 2021):
the first stage also holds the token and position embeddings, the last stage also holds the final
LayerNorm and the output head.

**A tied weight on two stages.** GPT-2 ties the output head to the token embedding (one V × d matrix).
With one stage that matrix exists once. With p > 1 the first stage needs it for the input lookup and
the last stage for the logits, so Megatron-LM keeps a copy on each and all-reduces the two gradients
after every step to keep them equal. Both stages therefore pay for V × d parameters (and their
gradients and optimizer states), and the per-stage counts add up to ``count_params + V·d``. Untied,
the last stage holds the head's own V × d matrix instead, and the sum is exactly ``count_params``.
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Callable

from batchlab.formulas.checks import at_most, divides, one_of, whole
from batchlab.formulas.pipeline_schedules import virtual_stage
from batchlab.formulas.presets import (GPTConfig, check_seq_len, embedding_params, head_forward_flops, head_params,
                                       layer_forward_flops, layer_params)

__all__ = ["Stage", "PARTITION_METHODS", "partition_layers", "stage_forward_flops", "check_virtual_stages",
           "chunk_layers", "partition_chunks"]

PARTITION_METHODS: dict[str, str] = {
    "uniform": "均匀切分：每段 ⌊L/p⌋ 层，余下的层从第一段起各加一层",
    "compute": "按计算量均衡：让 FLOPs 最多的那一段尽量小（输出头计入末段；嵌入只是查表，几乎不花 FLOPs）",
    "parameters": "按参数量均衡：让参数最多的那一段尽量小（嵌入和输出头计入首末两段；省显存，不省时间）",
}
"""How a model's layers may be cut into stages. ``compute`` balances time (what a slow last stage needs);
``parameters`` balances model-state memory, like DeepSpeed's ``partition_method="parameters"``."""


@dataclass(frozen=True)
class Stage:
    """One pipeline stage (one device of the pipeline): the transformer layers it runs and the parameters
    it holds. With v model chunks per device (interleaved 1F1B, ZB-V) ``layers`` are all of the device's
    layers, in order (a tuple: the chunks are not contiguous), and ``chunks`` each chunk's layers, in the
    device's local chunk order (:func:`~batchlab.formulas.pipeline_schedules.virtual_stage`)."""

    index: int
    layers: range | tuple[int, ...]
    has_embedding: bool
    has_head: bool
    params: int
    """Parameters held on this stage; a tied embedding counts on both the first and the last stage (once
    when both are on this device, as under ZB-V's V placement)."""
    chunks: tuple[range, ...] = ()
    """Each model chunk's layers, local chunk 0 first (one chunk, ``(layers,)``, for one chunk per device)."""

    @property
    def num_layers(self) -> int:
        return len(self.layers)


def stage_forward_flops(config: GPTConfig, stages: list[Stage], seq_len: int) -> list[float]:
    """Each stage's forward FLOPs for one sequence of ``seq_len`` tokens (layers, and the head on the last)."""
    return [_stage_flops(config, len(stages), st.index, st.num_layers, seq_len) for st in stages]


def _head_on_last_stage(config: GPTConfig, pipeline_stages: int) -> int:
    """Final LayerNorm + head matrix as held by the last stage (see the module docstring)."""
    tied_copy = config.vocab_size * config.d_model if (config.tie_embeddings and pipeline_stages > 1) else 0
    return head_params(config) + tied_copy


def _stage_params(config: GPTConfig, pipeline_stages: int, index: int, num_layers: int) -> int:
    params = num_layers * layer_params(config)
    if index == 0:
        params += embedding_params(config)
    if index == pipeline_stages - 1:
        params += _head_on_last_stage(config, pipeline_stages)
    return params


def _uniform_sizes(n_layer: int, p: int) -> list[int]:
    # L/p each when p divides L (Megatron-LM requires that); otherwise the first L mod p stages get one
    # more, as DeepSpeed's partition_uniform does.
    base, extra = divmod(n_layer, p)
    return [base + (1 if s < extra else 0) for s in range(p)]


def _stage_flops(config: GPTConfig, pipeline_stages: int, index: int, num_layers: int, seq_len: int) -> float:
    """Forward FLOPs of one sequence on this stage: its layers, plus the output head on the last stage
    (the embedding lookup and the final LayerNorm cost next to nothing)."""
    flops = num_layers * layer_forward_flops(config, 1, seq_len)
    if index == pipeline_stages - 1:
        flops += head_forward_flops(config, 1, seq_len)
    return flops


def _balanced_sizes(n: int, p: int, cost: Callable[[int, int], float]) -> list[int]:
    """Contiguous split of ``n`` layers, ≥ 1 per stage, minimising the largest ``cost(stage, layers)`` (exact DP)."""
    inf = float("inf")
    # best[s][k]: the smallest possible maximum over stages 0..s−1 holding the first k layers.
    best = [[inf] * (n + 1) for _ in range(p + 1)]
    cut = [[0] * (n + 1) for _ in range(p + 1)]
    best[0][0] = 0
    for s in range(1, p + 1):
        for k in range(s, n - (p - s) + 1):
            for j in range(s - 1, k):
                worst = max(best[s - 1][j], cost(s - 1, k - j))
                if worst < best[s][k]:
                    best[s][k], cut[s][k] = worst, j
    sizes, k = [], n
    for s in range(p, 0, -1):
        j = cut[s][k]
        sizes.append(k - j)
        k = j
    return sizes[::-1]


def partition_layers(config: GPTConfig, pipeline_stages: int, method: str = "uniform",
                     seq_len: int | None = None) -> list[Stage]:
    """Split ``config``'s layers into ``pipeline_stages`` contiguous stages.

    ``"uniform"`` (default, as Megatron-LM): ⌊L/p⌋ layers per stage, the remainder one each to the
    first stages. ``"compute"``: the contiguous split whose slowest stage — forward FLOPs at ``seq_len``
    (default: the model's context), the output head on the last stage — is smallest; what Megatron-LM's
    uneven first/last-stage layer counts are for. ``"parameters"``: the split whose largest stage in
    parameters (the embedding on the first stage, the head on the last) is smallest. Every stage gets at
    least one layer, so ``pipeline_stages`` cannot exceed ``n_layer``.
    """
    p = whole("pipeline_stages", pipeline_stages)
    at_most("pipeline_stages", p, config.n_layer, f"{config.name} 的层数 n_layer")  # every stage needs a layer
    one_of("method", method, PARTITION_METHODS)
    tokens = config.n_positions if seq_len is None else check_seq_len(config, seq_len)
    costs = {"parameters": lambda i, n: _stage_params(config, p, i, n),
             "compute": lambda i, n: _stage_flops(config, p, i, n, tokens)}
    sizes = (_uniform_sizes(config.n_layer, p) if method == "uniform"
             else _balanced_sizes(config.n_layer, p, costs[method]))
    stages, start = [], 0
    for i, size in enumerate(sizes):
        stages.append(Stage(index=i, layers=range(start, start + size), has_embedding=i == 0,
                            has_head=i == p - 1, params=_stage_params(config, p, i, size),
                            chunks=(range(start, start + size),)))
        start += size
    return stages


def check_virtual_stages(config: GPTConfig, pipeline_stages: int, virtual_stages: int) -> int:
    """``virtual_stages`` if the layers cut into p · v equal chunks, one per virtual stage (Megatron-LM's rule
    for interleaved schedules: n_layer divisible by p · v). With v = 1 any split of :func:`partition_layers`
    will do. ValueError otherwise."""
    v = whole("virtual_stages", virtual_stages)
    p = whole("pipeline_stages", pipeline_stages)
    if v > 1:
        divides(f"{config.name} 的层数 n_layer", config.n_layer, "pipeline_stages × virtual_stages", p * v)
    return v


def chunk_layers(config: GPTConfig, pipeline_stages: int, virtual_stages: int) -> list[range]:
    """The layers of each of the p · v virtual stages (model chunks), in model order: n_layer/(p·v) each
    (:func:`check_virtual_stages`)."""
    v = check_virtual_stages(config, pipeline_stages, virtual_stages)
    size = config.n_layer // (pipeline_stages * v)
    return [range(k * size, (k + 1) * size) for k in range(pipeline_stages * v)]


def partition_chunks(config: GPTConfig, pipeline_stages: int, virtual_stages: int, placement: str = "loop",
                     method: str = "uniform") -> list[Stage]:
    """Each device's chunks when the layers are cut into p · v equal chunks (:func:`chunk_layers`), placed
    by ``placement`` (:func:`~batchlab.formulas.pipeline_schedules.virtual_stage`): ``"loop"`` (interleaved
    1F1B: device i holds chunks i, i + p, …; the head on device p − 1) or ``"v"`` (ZB-V: device i holds
    chunks i and 2p − 1 − i, so device 0 holds both the embedding and the head). The embedding goes with
    virtual stage 0 and the head with the last; a tied head needs its own copy of the embedding matrix only
    on another device. Megatron-LM cuts interleaved chunks equally, so ``method`` must be ``"uniform"``."""
    one_of("method", method, PARTITION_METHODS)
    if method != "uniform":
        raise ValueError(f"method = {method!r}：每张卡多段模型时各段层数相等（Megatron-LM 的规则），只能用 'uniform'")
    one_of("placement", placement, ("loop", "v"))
    ranges = chunk_layers(config, pipeline_stages, virtual_stages)
    p, last = pipeline_stages, len(ranges) - 1
    head_device = next(d for d in range(p) for c in range(virtual_stages)
                       if virtual_stage(d, c, p, placement) == last)
    stages = []
    for d in range(p):
        ks = [virtual_stage(d, c, p, placement) for c in range(virtual_stages)]
        chunks = tuple(ranges[k] for k in ks)
        layers = tuple(sorted(i for chunk in chunks for i in chunk))
        params = len(layers) * layer_params(config)
        if 0 in ks:
            params += embedding_params(config)
        if last in ks:
            tied_copy = config.vocab_size * config.d_model if config.tie_embeddings and head_device != 0 else 0
            params += head_params(config) + tied_copy
        stages.append(Stage(index=d, layers=layers, has_embedding=0 in ks, has_head=last in ks, params=params,
                            chunks=chunks))
    return stages
