"""Deterministic training data made on the spot: no downloads, same tokens on every machine.

The corpus is drawn from a sparse first-order Markov chain over a small vocabulary. A model
can learn it (loss falls quickly), and its entropy rate is known exactly, so the book can
draw the floor that no batch size can beat.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from batchlab.formulas.checks import at_most, whole

__all__ = ["MarkovSource", "TokenDataset", "markov_source", "make_corpus", "random_tokens", "MARKOV_MAX_VOCAB"]

MARKOV_MAX_VOCAB = 4096
"""The largest vocabulary :func:`markov_source` builds: its transition matrix is dense (vocab² floats, 64 MiB
at 4096); GPT-2's 50,257 would need 10 GB, and 20 GB more for the stationary distribution."""


@dataclass(frozen=True)
class MarkovSource:
    """A first-order Markov chain: ``transition[i, j]`` = P(next = j | current = i)."""

    transition: torch.Tensor  # [vocab, vocab], rows sum to 1
    seed: int

    @property
    def vocab_size(self) -> int:
        return self.transition.shape[0]

    def stationary(self) -> torch.Tensor:
        """Stationary distribution π with π P = π (power iteration, float64)."""
        p = self.transition.double()
        pi = torch.full((self.vocab_size,), 1.0 / self.vocab_size, dtype=torch.float64)
        for _ in range(2000):
            nxt = pi @ p
            if torch.allclose(nxt, pi, atol=1e-13, rtol=0):
                break
            pi = nxt
        return pi

    def entropy_rate(self) -> float:
        """Entropy rate in nats/token: the lowest *expected* cross-entropy on fresh text from this
        source. A model can dip below it on the very sequences it trained on (memorisation)."""
        p = self.transition.double()
        row_entropy = -(p * torch.log(p.clamp_min(1e-300))).sum(dim=1)
        return float(self.stationary() @ row_entropy)


@dataclass(frozen=True)
class TokenDataset:
    """Inputs and next-token targets, each of shape [num_sequences, seq_len]."""

    inputs: torch.Tensor
    targets: torch.Tensor
    source: MarkovSource

    def __len__(self) -> int:
        return self.inputs.shape[0]

    def batch(self, indices: torch.Tensor | list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.as_tensor(indices, dtype=torch.long)
        return self.inputs[idx], self.targets[idx]

    def head(self, count: int, seq_len: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The first ``count`` sequences, cut to their first ``seq_len`` tokens, as copies: a memory
        measurement of this batch sees only its own storage, not the whole corpus's."""
        x, y = self.batch(range(count))
        seq_len = x.shape[1] if seq_len is None else seq_len
        return x[:, :seq_len].clone(), y[:, :seq_len].clone()


def markov_source(vocab_size: int = 64, branching: int = 4, seed: int = 0) -> MarkovSource:
    """A chain in which each token is followed by one of ``branching`` likely successors."""
    # the matrix is dense: refuse a GPT-2-sized vocabulary in one line instead of eating the host's memory
    at_most("vocab_size", whole("vocab_size", vocab_size, 2), MARKOV_MAX_VOCAB,
            "马尔可夫语料的词表上限（内容无关的测量请用 random_tokens）")
    at_most("branching", whole("branching", branching), vocab_size, "vocab_size")
    g = torch.Generator().manual_seed(seed)
    weights = torch.full((vocab_size, vocab_size), 1e-3)  # a little mass everywhere: no zero rows
    for row in range(vocab_size):
        successors = torch.randperm(vocab_size, generator=g)[:branching]
        weights[row, successors] += torch.rand(branching, generator=g) + 0.5
    return MarkovSource(transition=weights / weights.sum(dim=1, keepdim=True), seed=seed)


def make_corpus(
    num_sequences: int,
    seq_len: int,
    vocab_size: int = 64,
    branching: int = 4,
    seed: int = 0,
    sample_seed: int | None = None,
) -> TokenDataset:
    """Sample ``num_sequences`` sequences of ``seq_len`` + 1 tokens from :func:`markov_source`.

    ``seed`` fixes the source (the "language"); ``sample_seed`` (default ``seed + 1``) fixes which
    sequences are drawn, so a held-out set is the same ``seed`` with another ``sample_seed``.
    """
    whole("num_sequences", num_sequences)
    whole("seq_len", seq_len)
    source = markov_source(vocab_size, branching, seed)
    g = torch.Generator().manual_seed(seed + 1 if sample_seed is None else sample_seed)
    tokens = torch.empty(num_sequences, seq_len + 1, dtype=torch.long)
    tokens[:, 0] = torch.multinomial(source.stationary().float(), num_sequences, replacement=True, generator=g)
    for t in range(seq_len):
        tokens[:, t + 1] = torch.multinomial(source.transition[tokens[:, t]], 1, generator=g).squeeze(1)
    return TokenDataset(inputs=tokens[:, :-1].contiguous(), targets=tokens[:, 1:].contiguous(), source=source)


def random_tokens(num_sequences: int, seq_len: int, vocab_size: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Uniformly random token ids ``(inputs, targets)``, each [num_sequences, seq_len], targets shifted by one.

    For measurements whose result does not depend on what the tokens are (memory peaks, timings): it costs
    O(tokens) at any vocabulary, where :func:`make_corpus` needs a dense vocab² chain.
    """
    whole("num_sequences", num_sequences)
    whole("seq_len", seq_len)
    g = torch.Generator().manual_seed(whole("seed", seed, minimum=0))
    tokens = torch.randint(0, whole("vocab_size", vocab_size, 2), (num_sequences, seq_len + 1), generator=g)
    # two buffers of their own (a slice of one row would share the whole row's storage)
    return (tokens[:, :-1].clone(memory_format=torch.contiguous_format),
            tokens[:, 1:].clone(memory_format=torch.contiguous_format))
