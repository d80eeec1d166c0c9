"""`aiayn.paper`: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017), as written.

Two files. `transformer.py` is the paper: the model of Sec. 3, the schedule and optimizer of
Sec. 5.3, the label-smoothed loss of Sec. 5.4 and greedy decoding, each layer with the paper's
values as defaults, importing nothing from aiayn. `bridge.py` connects it to aiayn: config
checks, weight conversion, and `load` of a trained model directory. Tests (tests/paper) bind the
reference to the engine (`aiayn.model`): equal log-probabilities, equal greedy outputs and equal
gradients from the same weights.

    model, tokenizers = aiayn.paper.load("runs/dates")  # an aiayn post-LN, ReLU translation model
    log_probs = model.log_probs(src, tgt_in)             # (B, S), (B, T) ids -> (B, T, V)
    outputs = greedy_decode(model, src)                  # B lists of token ids
"""

from aiayn.paper.bridge import (
    check_config,
    engine_state_dict,
    from_config,
    load,
    paper_state_dict,
    transformer_arguments,
)
from aiayn.paper.transformer import (
    ADAM_BETAS,
    ADAM_EPS,
    Decoder,
    DecoderLayer,
    Embeddings,
    Encoder,
    EncoderLayer,
    LearnedPositions,
    MultiHeadAttention,
    PositionalEncoding,
    PositionwiseFeedForward,
    SublayerConnection,
    Transformer,
    attention,
    greedy_decode,
    label_smoothed_loss,
    optimizer,
    padding_mask,
    rate,
    subsequent_mask,
    target_mask,
)

__all__ = [
    "ADAM_BETAS", "ADAM_EPS", "Decoder", "DecoderLayer", "Embeddings", "Encoder", "EncoderLayer",
    "LearnedPositions", "MultiHeadAttention", "PositionalEncoding", "PositionwiseFeedForward",
    "SublayerConnection", "Transformer", "attention", "check_config", "engine_state_dict", "from_config",
    "greedy_decode", "label_smoothed_loss", "load", "optimizer", "padding_mask", "paper_state_dict", "rate",
    "subsequent_mask", "target_mask", "transformer_arguments",
]  # fmt: skip
