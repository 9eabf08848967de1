"""GPT-2 shapes as plain numbers: the tiny model's and the four published sizes.

Pure math, no torch: parameter counts (and, in later chapters, memory and FLOPs) of models that
are never built. ``batchlab.measure.model`` builds the same shapes as torch modules.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from batchlab.formulas.checks import divides, fraction, one_of, whole

__all__ = ["GPTConfig", "PRESETS", "PUBLISHED_PARAMS", "get_config", "check_seq_len", "count_params",
           "check_tensor_parallel", "check_context_parallel", "embedding_params", "layer_params", "head_params", "layer_forward_flops", "head_forward_flops"]


@dataclass(frozen=True)
class GPTConfig:
    """Shape of a GPT-2-style decoder (pre-LayerNorm, GELU MLP of width 4·d).

    ``tie_embeddings`` (GPT-2's choice, the default) makes the output head reuse the token-embedding
    matrix; False gives the head its own V × d matrix (no bias), as many later models do.
    """

    n_layer: int
    n_head: int
    d_model: int
    vocab_size: int
    n_positions: int
    dropout: float = 0.0
    name: str = "custom"
    tie_embeddings: bool = True

    def __post_init__(self) -> None:
        for name in ("n_layer", "n_head", "d_model", "vocab_size", "n_positions"):
            whole(name, getattr(self, name))
        divides("d_model", self.d_model, "n_head", self.n_head)  # each head needs d_model / n_head dims
        fraction("dropout", self.dropout)
        one_of("tie_embeddings", self.tie_embeddings, (True, False))


# Shapes from the GPT-2 release (Radford et al. 2019). Dropout 0.1 is not from that release (OpenAI's released
# src/model.py has no dropout): it is Hugging Face GPT2Config's default (resid/embd/attn_pdrop) and
# Megatron-LM's hidden/attention dropout default, what a reader training GPT-2 meets. The tiny ones are ours,
# without dropout.
PRESETS: dict[str, GPTConfig] = {
    "tiny": GPTConfig(n_layer=2, n_head=4, d_model=64, vocab_size=64, n_positions=64, name="tiny"),
    # One layer of width 32: small enough that 4.2 can train a dozen runs in seconds on a laptop.
    # (Not "nano": nanoGPT readers know that name as GPT-2 124M.)
    "pico": GPTConfig(n_layer=1, n_head=2, d_model=32, vocab_size=64, n_positions=64, name="pico"),
    "gpt2": GPTConfig(n_layer=12, n_head=12, d_model=768, vocab_size=50257, n_positions=1024, dropout=0.1, name="gpt2"),
    "gpt2-medium": GPTConfig(n_layer=24, n_head=16, d_model=1024, vocab_size=50257, n_positions=1024, dropout=0.1, name="gpt2-medium"),
    "gpt2-large": GPTConfig(n_layer=36, n_head=20, d_model=1280, vocab_size=50257, n_positions=1024, dropout=0.1, name="gpt2-large"),
    "gpt2-xl": GPTConfig(n_layer=48, n_head=25, d_model=1600, vocab_size=50257, n_positions=1024, dropout=0.1, name="gpt2-xl"),
}

# Parameter counts of the released checkpoints (tied input/output embedding): the audit of 4.5 sets the
# book's count beside them, and the tests hold count_params and the built model to them.
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
    except (KeyError, TypeError):  # TypeError: an unhashable value (a list from a page) is no name either
        raise ValueError(f"model = {name!r}：未知模型，可选 {', '.join(PRESETS)}") from None
    return replace(config, **overrides) if overrides else config


def check_tensor_parallel(config: GPTConfig, tensor_parallel: int) -> int:
    """``tensor_parallel`` if each of the t devices can take whole attention heads (Megatron-LM splits the
    heads, and the MLP's 4·d columns, across t): n_head divisible by t. ValueError otherwise."""
    t = whole("tensor_parallel", tensor_parallel)
    divides(f"{config.name} 的注意力头数 n_head", config.n_head, "tensor_parallel", t)
    return t


def check_context_parallel(seq_len: int, context_parallel: int) -> int:
    """``context_parallel`` if the sequence splits into 2·cp equal pieces, as Megatron-LM's context
    parallelism cuts it (two pieces per device, one early and one late, to balance causal attention)."""
    cp = whole("context_parallel", context_parallel)
    if cp > 1:
        divides("seq_len", whole("seq_len", seq_len), "2 × context_parallel", 2 * cp)
    return cp


def check_seq_len(config: GPTConfig, seq_len: object) -> int:
    """``seq_len`` if it is a whole number from 1 to the model's context ``n_positions``; else ValueError.

    The one wording of this rule: the job record, the torch model, the pipeline stages and the data
    all call it (the position embedding has ``n_positions`` rows, so a longer sequence has no position).
    """
    s = whole("seq_len", seq_len)
    if s > config.n_positions:
        raise ValueError(f"seq_len = {s}：必须在 1 到 {config.name} 的 n_positions = {config.n_positions} 之间")
    return s


def embedding_params(config: GPTConfig) -> int:
    """Token and position embeddings: V·d + n_positions·d."""
    return (config.vocab_size + config.n_positions) * config.d_model


def layer_params(config: GPTConfig) -> int:
    """One transformer layer: 12·d² + 13·d (QKV, attention output, the 4·d MLP, two LayerNorms,
    all with biases)."""
    d = config.d_model
    return 12 * d * d + 13 * d


def head_params(config: GPTConfig) -> int:
    """The final LayerNorm (2·d) plus the output head's own matrix: V·d when untied, 0 when the head
    reuses the token embedding (the tied matrix is counted once, with the embeddings)."""
    own = 0 if config.tie_embeddings else config.vocab_size * config.d_model
    return 2 * config.d_model + own


def count_params(config: GPTConfig) -> int:
    """Exact parameter count of :class:`batchlab.measure.model.GPT` for ``config``, without building it.

    embeddings + n_layer · layer + head, i.e. (V + n_positions)·d + n_layer·(12·d² + 13·d) + 2·d
    (+ V·d for an untied head). Checked against the released GPT-2 checkpoints and a model built on
    the ``meta`` device.
    """
    return embedding_params(config) + config.n_layer * layer_params(config) + head_params(config)


def layer_forward_flops(config: GPTConfig, micro_batch_size: int, seq_len: int, causal: bool = False) -> float:
    """One transformer layer's forward matmul FLOPs for one micro-batch: 24·b·s·h²·(1 + s/(6h)), Narayanan
    et al. 2021's count, which the book uses throughout.

    ``causal=True`` halves the attention term (the QKᵀ and score·V matmuls, 4·b·s²·h): a causal mask needs
    only the lower triangle, and current Megatron-LM's FLOPs count does halve it — 24·b·s·h²·(1 + s/(12h)).
    """
    b, s, h = micro_batch_size, seq_len, config.d_model
    return 24 * b * s * h * h * (1 + s / ((12 if causal else 6) * h))


def head_forward_flops(config: GPTConfig, micro_batch_size: int, seq_len: int) -> float:
    """The output head's forward FLOPs (logits): 2·b·s·h·V."""
    return 2 * micro_batch_size * seq_len * config.d_model * config.vocab_size
