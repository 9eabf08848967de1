"""A tiny GPT-2-style decoder, in the spirit of nanoGPT, plus the GPT-2 presets.

The same ``GPTConfig`` describes the tiny model that trains on a laptop CPU in seconds
and the four published GPT-2 sizes, which are only ever *counted* (or built on the
``meta`` device, which allocates nothing).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["GPTConfig", "PRESETS", "PUBLISHED_PARAMS", "get_config", "count_params", "TinyGPT"]


@dataclass(frozen=True)
class GPTConfig:
    """Shape of a GPT-2-style decoder (pre-LayerNorm, GELU MLP of width 4·d, tied embeddings)."""

    n_layer: int
    n_head: int
    d_model: int
    vocab_size: int
    n_positions: int
    dropout: float = 0.0
    name: str = "custom"

    def __post_init__(self) -> None:
        for field in ("n_layer", "n_head", "d_model", "vocab_size", "n_positions"):
            value = getattr(self, field)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{field} = {value!r} must be a positive integer")
        if self.d_model % self.n_head:
            raise ValueError(
                f"d_model {self.d_model} is not divisible by n_head {self.n_head}: "
                "each attention head needs d_model / n_head dimensions"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout = {self.dropout!r} must lie in [0, 1)")


# Shapes from the GPT-2 release (Radford et al. 2019); the tiny one is ours.
PRESETS: dict[str, GPTConfig] = {
    "tiny": GPTConfig(n_layer=2, n_head=4, d_model=64, vocab_size=64, n_positions=64, name="tiny"),
    "gpt2": GPTConfig(n_layer=12, n_head=12, d_model=768, vocab_size=50257, n_positions=1024, name="gpt2"),
    "gpt2-medium": GPTConfig(n_layer=24, n_head=16, d_model=1024, vocab_size=50257, n_positions=1024, name="gpt2-medium"),
    "gpt2-large": GPTConfig(n_layer=36, n_head=20, d_model=1280, vocab_size=50257, n_positions=1024, name="gpt2-large"),
    "gpt2-xl": GPTConfig(n_layer=48, n_head=25, d_model=1600, vocab_size=50257, n_positions=1024, name="gpt2-xl"),
}

# Parameter counts of the released checkpoints (tied input/output embedding), for tests and prose.
PUBLISHED_PARAMS: dict[str, int] = {
    "gpt2": 124_439_808,
    "gpt2-medium": 354_823_168,
    "gpt2-large": 774_030_080,
    "gpt2-xl": 1_557_611_200,
}


def get_config(name: str, **overrides: object) -> GPTConfig:
    """Return the preset called ``name`` (e.g. ``"gpt2-xl"``), optionally with fields replaced."""
    try:
        config = PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(PRESETS)}") from None
    return replace(config, **overrides) if overrides else config


def count_params(config: GPTConfig) -> int:
    """Exact parameter count of :class:`TinyGPT` for ``config``, without building it.

    Token and position embeddings, then per layer 12·d² + 13·d (QKV, attention output,
    the 4·d MLP, two LayerNorms, all with biases), then the final LayerNorm. The output
    head shares the token-embedding matrix, so it adds nothing.
    """
    d = config.d_model
    embeddings = config.vocab_size * d + config.n_positions * d
    per_layer = 12 * d * d + 13 * d
    return embeddings + config.n_layer * per_layer + 2 * d


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.c_attn = nn.Linear(config.d_model, 3 * config.d_model)
        self.c_proj = nn.Linear(config.d_model, config.d_model)
        self.attn_drop = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.n_head, d // self.n_head).transpose(1, 2) for z in (q, k, v))
        # Written out rather than F.scaled_dot_product_attention: readable, vmap-friendly (per-sample
        # gradients), and it materialises the s×s score matrix that the memory model of 4.3 counts.
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.n_head)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = self.attn_drop(scores.masked_fill(~causal, float("-inf")).softmax(dim=-1))
        return self.c_proj((att @ v).transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.d_model, 4 * config.d_model)
        self.c_proj = nn.Linear(4 * config.d_model, config.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    """One transformer layer; pipeline stages are contiguous runs of these."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.d_model)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.d_model)
        self.mlp = MLP(config)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.attn(self.ln_1(x)))
        return x + self.drop(self.mlp(self.ln_2(x)))


class TinyGPT(nn.Module):
    """A GPT-2-style decoder. ``forward(idx)`` returns logits of shape [batch, seq, vocab]."""

    def __init__(self, config: GPTConfig, seed: int | None = 0) -> None:
        super().__init__()
        self.config = config
        if seed is not None:
            # Build under a private generator state so that model init never depends on
            # (or disturbs) whatever random numbers the caller drew before.
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                self._build(config)
        else:
            self._build(config)

    def _build(self, config: GPTConfig) -> None:
        self.wte = nn.Embedding(config.vocab_size, config.d_model)
        self.wpe = nn.Embedding(config.n_positions, config.d_model)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.d_model)
        self.apply(self._init_weights)
        # GPT-2's scaled init of residual projections keeps the residual stream's variance flat.
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[-1]
        if t > self.config.n_positions:
            raise ValueError(f"sequence length {t} exceeds n_positions = {self.config.n_positions}")
        pos = torch.arange(t, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied output head

    def loss(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy over every position of every sequence."""
        logits = self(idx)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())
