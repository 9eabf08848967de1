import pytest
import torch

from batchlab.formulas.presets import PRESETS, PUBLISHED_PARAMS, GPTConfig, count_params, get_config
from batchlab.measure.data import MARKOV_MAX_VOCAB, make_corpus, markov_source, random_tokens
from batchlab.measure.model import GPT


@pytest.mark.parametrize("name", list(PUBLISHED_PARAMS))
def test_gpt2_presets_have_published_parameter_counts(name):
    config = get_config(name)
    assert count_params(config) == PUBLISHED_PARAMS[name]
    with torch.device("meta"):  # builds the real module without allocating 6 GB
        model = GPT(config, seed=None)
    assert model.num_params() == PUBLISHED_PARAMS[name]


def test_tiny_model_count_and_shapes():
    config = get_config("tiny")
    model = GPT(config)
    assert model.num_params() == count_params(config) == 108_288
    x = torch.zeros(3, 10, dtype=torch.long)
    assert model(x).shape == (3, 10, config.vocab_size)
    with pytest.raises(ValueError, match="seq_len = 65：必须在 1 到 tiny 的 n_positions = 64 之间"):
        model(torch.zeros(1, 65, dtype=torch.long))


def test_model_init_is_seeded_and_does_not_touch_global_rng():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = GPT(get_config("tiny"), seed=7)
    assert torch.equal(torch.rand(1), before)
    b = GPT(get_config("tiny"), seed=7)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    c = GPT(get_config("tiny"), seed=8)
    assert not torch.equal(a.wte.weight, c.wte.weight)


def test_config_validation():
    with pytest.raises(ValueError, match="d_model = 66 不能被 n_head = 4 整除"):
        GPTConfig(n_layer=1, n_head=4, d_model=66, vocab_size=8, n_positions=8)
    with pytest.raises(ValueError, match="n_layer = True：必须是 ≥ 1 的整数"):
        GPTConfig(n_layer=True, n_head=1, d_model=8, vocab_size=8, n_positions=8)
    with pytest.raises(ValueError, match="n_layer = 0"):
        GPTConfig(n_layer=0, n_head=1, d_model=8, vocab_size=8, n_positions=8)
    with pytest.raises(ValueError, match="model = 'gpt3'：未知模型"):
        get_config("gpt3")
    assert get_config("tiny", n_layer=4).n_layer == 4 and "tiny" in PRESETS


def test_tiny_model_learns_the_markov_corpus():
    data = make_corpus(128, 32, seed=0)
    model = GPT(get_config("tiny"))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    first = model.loss(data.inputs, data.targets).item()
    for _ in range(40):
        loss = model.loss(data.inputs, data.targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < first - 1.5
    held_out = make_corpus(512, 32, seed=0, sample_seed=99)
    assert torch.equal(held_out.source.transition, data.source.transition)
    with torch.no_grad():
        fresh = model.loss(held_out.inputs, held_out.targets).item()
    # On fresh text nothing beats the entropy rate (beyond sampling error of 16k tokens).
    assert fresh > data.source.entropy_rate() - 0.03


def test_corpus_is_deterministic_and_consistent():
    a, b = make_corpus(16, 8, seed=3), make_corpus(16, 8, seed=3)
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    assert torch.equal(a.inputs[:, 1:], a.targets[:, :-1])  # targets are inputs shifted by one
    assert not torch.equal(make_corpus(16, 8, seed=4).inputs, a.inputs)
    x, y = a.batch([0, 5])
    assert x.shape == (2, 8) and torch.equal(y, a.targets[[0, 5]])


def test_markov_source_entropy_rate_and_stationarity():
    src = markov_source(32, branching=1, seed=0)
    pi = src.stationary()
    assert torch.allclose(pi @ src.transition.double(), pi, atol=1e-10)
    assert 0 < src.entropy_rate() < markov_source(32, branching=8, seed=0).entropy_rate()
    with pytest.raises(ValueError, match="branching = 40"):
        markov_source(32, branching=40)


@pytest.mark.parametrize("name", ["tiny", "pico"])
def test_small_presets_build_with_the_counted_parameters(name):
    assert GPT(get_config(name)).num_params() == count_params(get_config(name))


def test_head_is_a_copy_of_the_first_sequences_cut_to_length():
    data = make_corpus(num_sequences=16, seq_len=12, seed=0)
    x, y = data.head(4, 5)
    assert x.shape == y.shape == (4, 5)
    assert torch.equal(x, data.inputs[:4, :5]) and torch.equal(y, data.targets[:4, :5])
    # its own storage: a memory measurement of this batch does not count the corpus
    assert x.untyped_storage().nbytes() == x.numel() * x.element_size()
    assert data.head(3)[0].shape == (3, 12)


def test_markov_source_refuses_a_gpt2_vocabulary_in_one_line():
    # dense vocab² chain: GPT-2's 50,257 tokens would take 10 GB (and 20 GB more for π) before failing
    with pytest.raises(ValueError, match="vocab_size = 50257 超过了 马尔可夫语料的词表上限"):
        markov_source(50257)
    assert markov_source(MARKOV_MAX_VOCAB, seed=1).vocab_size == MARKOV_MAX_VOCAB


def test_random_tokens_are_seeded_shifted_and_cheap_at_gpt2_vocabulary():
    x, y = random_tokens(3, 1024, 50257, seed=5)
    assert x.shape == y.shape == (3, 1024)
    assert torch.equal(x[:, 1:], y[:, :-1])                      # next-token targets
    assert torch.equal(x, random_tokens(3, 1024, 50257, seed=5)[0])
    assert not torch.equal(x, random_tokens(3, 1024, 50257, seed=6)[0])
    assert int(x.max()) < 50257 and int(x.max()) > 4096          # the whole vocabulary is used
    assert x.untyped_storage().data_ptr() != y.untyped_storage().data_ptr()  # two buffers
