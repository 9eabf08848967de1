"""The layer partition: which layers and parameters each pipeline stage holds."""
import pytest
import torch
from hypothesis import given, strategies as st

from batchlab.formulas.partition import PARTITION_METHODS, partition_layers, stage_forward_flops
from batchlab.formulas.presets import (PUBLISHED_PARAMS, count_params, get_config, head_forward_flops,
                                       layer_forward_flops)
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


@given(config=SMALL, p=st.integers(1, 24), method=st.sampled_from(list(PARTITION_METHODS)))
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


@given(config=SMALL, p=st.integers(1, 6), seq_len=st.integers(1, 64))
def test_each_balance_is_never_worse_than_uniform_in_what_it_balances(config, p, seq_len):
    if p > config.n_layer or seq_len > config.n_positions:
        return
    split = {m: partition_layers(config, p, m, seq_len) for m in PARTITION_METHODS}
    params = {m: max(s.params for s in stages) for m, stages in split.items()}
    flops = {m: max(stage_forward_flops(config, stages, seq_len)) for m, stages in split.items()}
    assert params["parameters"] <= params["uniform"] and flops["compute"] <= flops["uniform"]


def test_gpt2_xl_compute_balance_unloads_only_the_last_stage():
    """The embedding is a lookup (≈ 0 FLOPs), the head ≈ 2.4 layers: balancing time takes layers off the last
    stage only; balancing parameters also takes them off the first (which is not slow)."""
    xl = get_config("gpt2-xl")
    assert head_forward_flops(xl, 1, 1024) / layer_forward_flops(xl, 1, 1024) == pytest.approx(2.37, abs=0.01)
    compute = partition_layers(xl, 4, "compute", 1024)
    parameters = partition_layers(xl, 4, "parameters", 1024)
    assert [s.num_layers for s in compute] == [12, 13, 13, 10]      # contiguous: the first keeps the remainder
    assert [s.num_layers for s in parameters] == [11, 13, 13, 11]
    uniform = stage_forward_flops(xl, partition_layers(xl, 4, "uniform"), 1024)
    balanced = stage_forward_flops(xl, compute, 1024)
    assert uniform.index(max(uniform)) == 3 and max(balanced) / max(uniform) == pytest.approx(13 / 14.37, abs=0.01)
    assert max(stage_forward_flops(xl, parameters, 1024)) > max(balanced) * 0.99


def test_bad_method_is_named():
    with pytest.raises(ValueError, match="method = 'random'：只能取 'uniform', 'compute', 'parameters' 之一"):
        partition_layers(get_config("tiny"), 2, "random")
