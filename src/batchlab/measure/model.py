"""A tiny GPT-2-style decoder you can read in one sitting, in the spirit of nanoGPT.

Shapes come from :mod:`batchlab.formulas.presets`: the tiny model trains on a laptop CPU
in seconds; the four published GPT-2 sizes are only ever counted, or built on the ``meta`` device,
which allocates nothing.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable, Iterable

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from batchlab.formulas.checks import one_of
from batchlab.formulas.job import RECOMPUTE_MODES, Job
from batchlab.formulas.presets import GPTConfig, check_seq_len

__all__ = ["IGNORE_INDEX", "LossFn", "next_token_loss", "run_blocks", "GPT", "BigramLM", "job_config", "build_model",
           "check_runnable_job", "check_job_model"]

IGNORE_INDEX = -100
"""Targets equal to this are padding and count for nothing (``F.cross_entropy``'s default ``ignore_index``)."""

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""A loss of (logits, targets), as :func:`next_token_loss`."""


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Next-token cross-entropy of logits [..., vocab] against targets [...]: the one loss of the book's
    models, pipeline stages, accumulation and training. ``reduction``: ``"mean"`` over the counted
    positions, or ``"sum"`` (accumulation weighs the sums itself); targets equal to
    :data:`IGNORE_INDEX` are skipped."""
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), reduction=reduction,
                           ignore_index=IGNORE_INDEX)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.c_attn = nn.Linear(config.d_model, 3 * config.d_model)
        self.c_proj = nn.Linear(config.d_model, config.d_model)
        self.attn_drop = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, recompute_scores: bool = False) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.n_head, d // self.n_head).transpose(1, 2) for z in (q, k, v))
        # Selective recomputation (Korthikanti et al. 2022): keep q, k, v and redo the s×s part in the
        # backward pass instead of storing it.
        y = checkpoint(self._attend, q, k, v, use_reentrant=False) if recompute_scores else self._attend(q, k, v)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, d))

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        t = q.shape[-2]
        # Written out rather than F.scaled_dot_product_attention: readable, vmap-friendly (per-sample
        # gradients), and it materialises the s×s score matrix that the memory model of 4.3 counts.
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        causal = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
        att = self.attn_drop(scores.masked_fill(~causal, float("-inf")).softmax(dim=-1))
        return att @ v


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

    def forward(self, x: torch.Tensor, recompute_scores: bool = False) -> torch.Tensor:
        x = x + self.drop(self.attn(self.ln_1(x), recompute_scores=recompute_scores))
        return x + self.drop(self.mlp(self.ln_2(x)))


def run_blocks(blocks: Iterable[nn.Module], x: torch.Tensor, recompute: str) -> torch.Tensor:
    """Transformer blocks in order under a recomputation mode (``RECOMPUTE_MODES``), for the whole GPT and
    for a pipeline stage alike: ``"full"`` checkpoints each block, ``"selective"`` each block's attention
    scores; only while gradients are recorded (nothing is saved otherwise)."""
    training = torch.is_grad_enabled()
    for block in blocks:
        if recompute == "full" and training:
            x = checkpoint(block, x, use_reentrant=False)
        else:
            x = block(x, recompute_scores=recompute == "selective" and training)
    return x


class GPT(nn.Module):
    """A GPT-2-style decoder of any preset's shape, from ``tiny`` (trains on a laptop) to ``gpt2-xl``
    (built only on the ``meta`` device). ``forward(idx)`` returns logits of shape [batch, seq, vocab].

    ``recompute`` trades compute for activation memory while training (4.3): ``"selective"``
    recomputes each layer's attention scores in the backward pass, ``"full"`` keeps only each layer's
    input and recomputes the whole layer (``torch.utils.checkpoint``, non-reentrant). Gradients are
    the same; only what is stored, and the time, change.
    """

    def __init__(self, config: GPTConfig, seed: int | None = 0, recompute: str = "none") -> None:
        super().__init__()
        self.config = config
        self.recompute = one_of("recompute", recompute, RECOMPUTE_MODES)
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
        # Tied (GPT-2): the head reuses wte.weight. Untied: a V × d matrix of its own, no bias.
        self.lm_head = None if config.tie_embeddings else nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.apply(self._init_weights)
        # GPT-2's scaled init of residual projections keeps the residual stream's variance flat.
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:  # an untied head has none
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = check_seq_len(self.config, idx.shape[-1])
        pos = torch.arange(t, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        x = run_blocks(self.blocks, x, one_of("recompute", self.recompute, RECOMPUTE_MODES))
        head = self.wte.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(self.ln_f(x), head)

    def loss(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy over every position of every sequence."""
        return next_token_loss(self(idx), targets)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


class BigramLM(nn.Module):
    """The smallest language model of the book: a V × V table of next-token logits, started at zero.

    On the book's first-order Markov corpus it can reach the entropy rate exactly, and its loss is
    convex in the table, so a run shows within a few thousand cheap steps what a GPT shows only much
    later: the floor that a constant learning rate's gradient noise leaves above the optimum (4.6).
    Convexity also means there is nothing to explore — no other minimum to find.
    """

    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.table = nn.Embedding(vocab_size, vocab_size)
        nn.init.zeros_(self.table.weight)  # uniform prediction: the same start for every run

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.table(idx)


# ── A job's model: what a measured run trains ──────────────────────────────────────────────────────────

def job_config(job: Job) -> GPTConfig:
    """The shape a job trains, with the job's dropout: ``Job.dropout`` is the one setting (it defaults to the
    model's own, and a run builds its modules with it), so a job's model and its memory bytes never disagree."""
    return replace(job.model, dropout=job.dropout)


def check_runnable_job(job: Job) -> Job:
    """``job`` if this package's GPT can run it as written; else ValueError, in one line. The measured runs
    compute in fp32 with the attention written out (the s×s scores kept, 4.3's "materialized"): a job that says
    16-bit or fused attention would be modelled one way and measured another."""
    if job.precision != "fp32":
        raise ValueError(f"precision = {job.precision!r}：实测运行用 fp32 计算，请用 replace(job, precision='fp32') "
                         "描述要测的作业")
    if job.attention != "materialized":
        raise ValueError(f"attention = {job.attention!r}：实测的 GPT 显式计算注意力（保存 s×s 分数），"
                         "请用 replace(job, attention='materialized')")
    return job


def build_model(job: Job, seed: int | None = 0) -> GPT:
    """The :class:`GPT` that ``job`` trains: its shape and dropout (:func:`job_config`), its recompute mode,
    weights from ``seed``. Refuses a job this GPT cannot run as written (:func:`check_runnable_job`)."""
    check_runnable_job(job)
    return GPT(job_config(job), seed=seed, recompute=job.recompute)


def check_job_model(job: Job, model: nn.Module) -> GPT:
    """``model`` if it is the GPT ``job`` describes (shape, dropout and recompute mode); else ValueError. A run
    handed both a job and a model instance measures the model, so the two must be one job."""
    check_runnable_job(job)
    if not isinstance(model, GPT):
        raise ValueError(f"model = {type(model).__name__}：必须是 batchlab.measure.model.GPT")
    want = job_config(job)
    if model.config != want or model.recompute != job.recompute:
        raise ValueError(f"model：它的 {model.config}、recompute = {model.recompute!r} 与作业的 {want}、"
                         f"recompute = {job.recompute!r} 不符（用 build_model(job) 建模型）")
    return model
