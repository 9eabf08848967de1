"""The layer partition: which layers and parameters each pipeline stage holds."""
import pytest
import torch
from hypothesis import given, strategies as st

from batchlab.formulas.partition import partition_layers
from batchlab.formulas.presets import PUBLISHED_PARAMS, count_params, get_config
from batchlab.measure.model import GPT

SMALL = st.builds(lambda layers, width, tied: get_config("tiny", n_layer=layers, d_model=width, tie_embeddings=tied),
                  st.integers(1, 24), st.sampled_from([8, 16, 64]), st.booleans())


def test_case_study_split_is_megatrons():
    xl = get_config("gpt2-xl")
    stages = partition_layers(xl, 4)
    assert [s.layers for s in stages] == [range(0, 12), range(12, 24), range(24, 36), range(36, 48)]
    assert [s.has_embedding for s in stages] == [True, False, False, False]
    assert [s.has_head for s in stages] == [False, False, False, True]
    d, v, layer = 1600, 50257, 12 * 1600**2 + 13 * 1600
    # first: wte + wpe + 12 layers; middle: 12 layers; last: 12 layers + ln_f + a copy of the tied wte
    assert [s.params for s in stages] == [(v + 1024) * d + 12 * layer, 12 * layer, 12 * layer,
                                          12 * layer + 2 * d + v * d]


def test_tied_matrix_sits_on_two_stages_and_untied_sums_exactly():
    tied = get_config("gpt2-xl")
    untied = get_config("gpt2-xl", tie_embeddings=False)
    vd = tied.vocab_size * tied.d_model
    assert sum(s.params for s in partition_layers(tied, 4)) == PUBLISHED_PARAMS["gpt2-xl"] + vd
    assert sum(s.params for s in partition_layers(tied, 1)) == PUBLISHED_PARAMS["gpt2-xl"]
    assert count_params(untied) == PUBLISHED_PARAMS["gpt2-xl"] + vd
    assert sum(s.params for s in partition_layers(untied, 4)) == count_params(untied)


@pytest.mark.parametrize("tied", [True, False])
def test_untied_option_follows_the_built_model(tied):
    config = get_config("tiny", tie_embeddings=tied)
    model = GPT(config)
    assert model.num_params() == count_params(config)
    assert (model.lm_head is None) == tied
    assert model(torch.zeros(2, 5, dtype=torch.long)).shape == (2, 5, config.vocab_size)


@given(config=SMALL, p=st.integers(1, 24), method=st.sampled_from(["uniform", "balanced"]))
def test_every_split_covers_each_layer_once(config, p, method):
    if p > config.n_layer:
        with pytest.raises(ValueError, match=f"pipeline_stages = {p} 超过了"):
            partition_layers(config, p, method)
        return
    stages = partition_layers(config, p, method)
    assert [i for s in stages for i in s.layers] == list(range(config.n_layer))
    assert all(s.num_layers >= 1 for s in stages)
    tied_copy = config.vocab_size * config.d_model if (config.tie_embeddings and p > 1) else 0
    assert sum(s.params for s in stages) == count_params(config) + tied_copy
    if method == "uniform":
        sizes = [s.num_layers for s in stages]
        assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


@given(config=SMALL, p=st.integers(1, 6))
def test_balanced_is_never_worse_than_uniform(config, p):
    if p > config.n_layer:
        return
    worst = {m: max(s.params for s in partition_layers(config, p, m)) for m in ("uniform", "balanced")}
    assert worst["balanced"] <= worst["uniform"]


def test_balanced_moves_layers_off_the_embedding_and_head_stages():
    sizes = [s.num_layers for s in partition_layers(get_config("gpt2-xl"), 4, "balanced")]
    assert sum(sizes) == 48 and sizes[0] < 12 and sizes[-1] < 12


def test_bad_method_is_named():
    with pytest.raises(ValueError, match="method = 'random'：只能取 'uniform', 'balanced' 之一"):
        partition_layers(get_config("tiny"), 2, "random")
