"""Fabricated model outputs with one planted problem per sentence, and a tiny model directory,
for the evaluation report's tests (`aiayn.evaluation.report`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from aiayn import formats
from aiayn.data import Tokenizer, TokenizerPair
from aiayn.evaluation.report_inputs import ModelOutputs, SentenceOutput
from aiayn.model import ModelConfig, Transformer

LAYERS, HEADS = 2, 2

# (source, hypothesis, reference, the one flag planted in it)
CASES = [
    ("der hund läuft", "the dog runs", "the dog runs", None),
    ("der rote hund", "the dog", "the red dog", "omission"),
    ("ein mann fährt ein rad", "a man a man rides a bike", "a man rides a bike", "repetition"),
    ("die frau geht", "yes", "the woman walks along the long street", "length"),
    ("der ☃ schmilzt", "the snowman melts", "the snowman melts", "unknown"),
    ("die Katze schläft", "the Katze sleeps", "the cat sleeps", "copy"),
    ("zwei kinder", "two children", "two children", None),
]
OMITTED = [1, 2]  # the source tokens of "rote" in sentence 1 (tokens: ▁der ▁ro te ▁hund)
NO_ATTENTION = 6  # the sentence given without attention
UNKNOWN_POSITION = 1


def source_tokens(source: str) -> list[str]:
    """One token per word ('▁word'), 'rote' split in two to show subwords, + '</s>'."""
    tokens = []
    for word in source.split():
        tokens += ["▁ro", "te"] if word == "rote" else ["<unk>" if word == "☃" else f"▁{word}"]
    return [*tokens, "</s>"]


def cross_attention(num_targets: int, num_sources: int, dropped: int | list[int] | None) -> np.ndarray:
    """(L, H, T, S) weights spread over every source position but `dropped`, each row summing to 1;
    each head and layer a little different (so averaging is tested)."""
    rng = np.random.default_rng(num_targets * 31 + num_sources)
    weights = rng.uniform(0.8, 1.2, size=(LAYERS, HEADS, num_targets, num_sources))
    if dropped is not None:
        weights[..., dropped] = 0.0
    return (weights / weights.sum(axis=-1, keepdims=True)).astype(np.float32)


def fabricated() -> tuple[list[str], list[str], ModelOutputs]:
    """Sources, references and the 'model outputs' of `CASES`."""
    sentences = []
    for i, (source, hypothesis, _, flag) in enumerate(CASES):
        src_tokens = source_tokens(source)
        tgt_tokens = ["<s>", *[f"▁{w}" for w in hypothesis.split()]]
        cross = (
            None
            if i == NO_ATTENTION
            else cross_attention(len(tgt_tokens), len(src_tokens), OMITTED if flag == "omission" else None)
        )
        unknown_positions = [UNKNOWN_POSITION] if flag == "unknown" else []
        sentences.append(
            SentenceOutput(
                hypothesis=hypothesis,
                source_tokens=src_tokens,
                target_tokens=tgt_tokens,
                source_unknown=unknown_positions,
                unknown_tokens=["<unk>"] * len(unknown_positions),
                cross=cross,
            )
        )
    model = {
        "directory": "fabricated",
        "d_model": 8,
        "num_heads": HEADS,
        "num_encoder_layers": LAYERS,
        "num_decoder_layers": LAYERS,
        "device": "cpu",
    }
    outputs = ModelOutputs("fabricated", sentences, model)
    return [c[0] for c in CASES], [c[2] for c in CASES], outputs


def planted() -> dict[int, set[str]]:
    """The flags each sentence must show: the planted one, nothing else."""
    return {i: ({flag} if flag else set()) for i, (_, _, _, flag) in enumerate(CASES)}


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A random tiny Transformer with a character tokenizer (random output, real attention)."""
    directory = tmp_path_factory.mktemp("report_model")
    texts = ["ein hund läuft", "zwei katzen", "a dog runs", "two cats"]
    tokenizer = Tokenizer.train("char", texts)
    torch.manual_seed(0)
    config = ModelConfig.tiny(
        vocab_size=tokenizer.vocab_size,
        d_model=32,
        num_heads=2,
        num_encoder_layers=2,
        num_decoder_layers=2,
        d_ff=64,
        max_len=64,
    )
    model = Transformer(config)
    formats.save_pretrained(model, directory)
    TokenizerPair(tokenizer, tokenizer).save(directory)
    return directory
