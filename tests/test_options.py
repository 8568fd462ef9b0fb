"""The choices of TransformerConfig (positions: sinusoidal, learned, RoPE; feed-forward: ReLU, GELU,
SwiGLU): each builds a model that decodes alike with and without caches, and trains the reversal
task to the bar the default reaches with the same recipe."""
import pytest
import torch

from transformer_lib.data import batches, collate, make_reversal_data
from transformer_lib.generation import greedy
from transformer_lib.kv_cache import NoCacheDecoding
from transformer_lib.model import Transformer, TransformerConfig
from transformer_lib.preallocated_cache import PreallocatedDecoding
from transformer_lib.recipe import TrainingConfig
from transformer_lib.training import exact_match, train

CHOICES = [{}, {"positional": "learned"}, {"positional": "rope"}, {"activation": "gelu"},
           {"activation": "swiglu"}]
BAR = 0.95        # every choice, the default included, reached 1.000 of 200 at 800 steps (seed 0)


def tiny(**choice):
    return TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=32, nhead=4, num_encoder_layers=2,
                             num_decoder_layers=2, dim_feedforward=64, dropout=0.0, max_len=16, **choice)


@pytest.mark.parametrize("choice", CHOICES, ids=lambda c: "-".join(c.values()) or "default")
def test_each_choice_trains_the_reversal_task_to_the_default_bar(choice):
    pairs = make_reversal_data(3000, seed=0)
    train_pairs, test_pairs = pairs[:2800], pairs[2800:]
    torch.manual_seed(0)
    model = Transformer(tiny(**choice))
    generator = torch.Generator().manual_seed(0)
    recipe = TrainingConfig(steps=800, lr=3e-3, warmup=30, eval_every=800, seed=0)
    train(model, lambda epoch: batches(train_pairs, 32, shuffle=True, generator=generator),
          list(batches(test_pairs[:64], 64)), recipe)
    src, _, labels = collate(test_pairs)
    outputs = greedy(model.eval(), src, 10)
    assert exact_match(outputs, labels).float().mean().item() >= BAR
    assert torch.equal(outputs, greedy(model, src, 10, state=NoCacheDecoding))
    assert torch.equal(outputs, greedy(model, src, 10, state=PreallocatedDecoding))


def test_the_choices_build_what_they_name():
    from transformer_lib.feedforward import FeedForward, SwiGLU

    rope = Transformer(tiny(positional="rope"))
    assert rope.src_embed.position is None and rope.decoder.layers[0].self_attn.rotary is not None
    assert rope.decoder.layers[0].cross_attn.rotary is None               # RoPE in self-attention only
    learned = Transformer(tiny(positional="learned"))
    assert learned.src_embed.position.embedding.weight.requires_grad
    swiglu = Transformer(tiny(activation="swiglu"))
    assert isinstance(swiglu.encoder.layers[0].feed_forward, SwiGLU)
    assert isinstance(Transformer(tiny(activation="gelu")).encoder.layers[0].feed_forward, FeedForward)
    # the same parameter budget, within d per network (swiglu_hidden_dim rounds)
    plain = Transformer(tiny()).num_parameters()
    assert abs(swiglu.num_parameters() - plain) <= 6 * (32 + 64 + 32)


@pytest.mark.parametrize("field, value, match", [("positional", "alibi", "positional must be one of"),
                                                 ("activation", "tanh", "activation must be one of")])
def test_an_unknown_choice_is_refused(field, value, match):
    with pytest.raises(ValueError, match=match):
        tiny(**{field: value})


def test_rope_needs_an_even_head_width():
    with pytest.raises(ValueError, match="positional='rope' needs an even d_model / nhead, got 5"):
        TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=20, nhead=4, positional="rope")


@pytest.mark.parametrize("choice", [{"positional": "learned"}, {"positional": "rope"}, {"activation": "swiglu"}])
def test_the_counters_refuse_what_they_do_not_model(choice):
    from transformer_lib.cost import count_parameters, forward_flops
    from transformer_lib.memory import activation_bytes

    for count in (count_parameters, lambda c: forward_flops(c, 1, 4, 4), lambda c: activation_bytes(c, 1, 4, 4)):
        with pytest.raises(ValueError, match="model"):
            count(tiny(**choice))
    with pytest.raises(ValueError, match="activation_bytes models activation='relu'"):
        activation_bytes(tiny(activation="gelu"), 1, 4, 4)
