"""Decoding: greedy and beam search for the Transformer, sampling for language models.

greedy_search (Sec. 3, auto-regressive decoding) -> beam_search (Sec. 6.1: beam 4, length
penalty alpha 0.6, max length input + 50) -> sample_stream (decoder-only LMs;
`aiayn.inference` turns these into translators and generators).
This package knows the model, not training or the command line.
"""

from aiayn.decoding.beam_search import beam_search
from aiayn.decoding.common import Hypothesis, length_penalty, output_limits
from aiayn.decoding.greedy import GreedyOutput, greedy_search
from aiayn.decoding.sampling import Sampling, filter_logits, sample_stream

__all__ = [
    "GreedyOutput",
    "Hypothesis",
    "Sampling",
    "beam_search",
    "filter_logits",
    "greedy_search",
    "length_penalty",
    "output_limits",
    "sample_stream",
]
