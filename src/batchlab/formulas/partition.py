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

from batchlab.formulas.checks import at_most, one_of, whole
from batchlab.formulas.presets import GPTConfig, embedding_params, head_params, layer_params

__all__ = ["Stage", "PARTITION_METHODS", "partition_layers"]

PARTITION_METHODS: dict[str, str] = {
    "uniform": "均匀切分：每段 ⌊L/p⌋ 层，余下的层从第一段起各加一层",
    "balanced": "均衡切分：让参数最多的那一段尽量小（嵌入和输出头计入首末两段）",
}


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: the transformer layers it runs and the parameters it holds."""

    index: int
    layers: range
    has_embedding: bool
    has_head: bool
    params: int
    """Parameters held on this stage; a tied embedding counts on both the first and the last stage."""

    @property
    def num_layers(self) -> int:
        return len(self.layers)


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


def _balanced_sizes(config: GPTConfig, p: int) -> list[int]:
    """Contiguous split, ≥ 1 layer per stage, minimising the largest stage's parameters (exact DP)."""
    n = config.n_layer
    inf = float("inf")
    # best[s][k]: the smallest possible maximum over stages 0..s−1 holding the first k layers.
    best = [[inf] * (n + 1) for _ in range(p + 1)]
    cut = [[0] * (n + 1) for _ in range(p + 1)]
    best[0][0] = 0
    for s in range(1, p + 1):
        for k in range(s, n - (p - s) + 1):
            for j in range(s - 1, k):
                cost = max(best[s - 1][j], _stage_params(config, p, s - 1, k - j))
                if cost < best[s][k]:
                    best[s][k], cut[s][k] = cost, j
    sizes, k = [], n
    for s in range(p, 0, -1):
        j = cut[s][k]
        sizes.append(k - j)
        k = j
    return sizes[::-1]


def partition_layers(config: GPTConfig, pipeline_stages: int, method: str = "uniform") -> list[Stage]:
    """Split ``config``'s layers into ``pipeline_stages`` contiguous stages.

    ``"uniform"`` (default, as Megatron-LM): ⌊L/p⌋ layers per stage, the remainder one each to the
    first stages. ``"balanced"``: the contiguous split whose largest stage, counted in parameters with
    the embedding on the first and the head on the last stage, is smallest. Every stage gets at least
    one layer, so ``pipeline_stages`` cannot exceed ``n_layer``.
    """
    p = whole("pipeline_stages", pipeline_stages)
    at_most("pipeline_stages", p, config.n_layer, f"{config.name} 的层数 n_layer")  # every stage needs a layer
    one_of("method", method, PARTITION_METHODS)
    sizes = _uniform_sizes(config.n_layer, p) if method == "uniform" else _balanced_sizes(config, p)
    stages, start = [], 0
    for s, size in enumerate(sizes):
        stages.append(Stage(index=s, layers=range(start, start + size), has_embedding=s == 0,
                            has_head=s == p - 1, params=_stage_params(config, p, s, size)))
        start += size
    return stages
