"""The layer partition: which layers and parameters each pipeline stage holds."""
import pytest
import torch
from hypothesis import given, strategies as st

from batchlab.formulas.partition import (PARTITION_METHODS, chunk_layers, partition_chunks, partition_layers,
                                         stage_forward_flops)
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


# ── several model chunks per device: interleaved 1F1B (loop placement) and ZB-V (V placement) ─────────

@given(config=SMALL, p=st.integers(1, 6), v=st.integers(2, 4), placement=st.sampled_from(["loop", "v"]))
def test_chunks_cover_each_layer_once_and_place_the_head(config, p, v, placement):
    if placement == "v":
        v = 2
    if config.n_layer % (p * v):
        with pytest.raises(ValueError, match="pipeline_stages × virtual_stages"):
            partition_chunks(config, p, v, placement)
        return
    stages = partition_chunks(config, p, v, placement)
    chunks = chunk_layers(config, p, v)
    assert [i for c in chunks for i in c] == list(range(config.n_layer))
    assert sorted(i for s in stages for i in s.layers) == list(range(config.n_layer))
    assert all(len(s.chunks) == v and s.num_layers == config.n_layer // p for s in stages)
    assert [s.has_embedding for s in stages] == [d == 0 for d in range(p)]
    head = 0 if placement == "v" else p - 1     # ZB-V's V ends where it began
    assert [s.has_head for s in stages] == [d == head for d in range(p)]
    tied_copy = config.vocab_size * config.d_model if (config.tie_embeddings and head != 0) else 0
    assert sum(s.params for s in stages) == count_params(config) + tied_copy


def test_the_case_cut_into_chunks():
    xl = get_config("gpt2-xl")
    loop = partition_chunks(xl, 4, 2)
    assert [s.chunks for s in loop] == [(range(0, 6), range(24, 30)), (range(6, 12), range(30, 36)),
                                        (range(12, 18), range(36, 42)), (range(18, 24), range(42, 48))]
    v = partition_chunks(xl, 4, 2, "v")
    assert [s.chunks for s in v] == [(range(0, 6), range(42, 48)), (range(6, 12), range(36, 42)),
                                     (range(12, 18), range(30, 36)), (range(18, 24), range(24, 30))]
    one = partition_layers(xl, 4)
    # the head on device 0: its embedding, the final LayerNorm, and no second copy of the tied matrix
    assert v[0].params == one[0].params + 2 * xl.d_model and v[3].params == one[1].params
    assert loop[3].params == one[3].params and [s.chunks for s in one] == [(s.layers,) for s in one]


def test_chunks_refuse_an_uneven_cut():
    with pytest.raises(ValueError, match="method = 'compute'：每张卡多段模型时各段层数相等"):
        partition_chunks(get_config("gpt2-xl"), 4, 2, method="compute")
    with pytest.raises(ValueError, match="placement = 'w'"):
        partition_chunks(get_config("gpt2-xl"), 4, 2, "w")
