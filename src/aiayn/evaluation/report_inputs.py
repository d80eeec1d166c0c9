"""What the evaluation report needs from a model: its translations, its tokens and its attention.

This is the report's only door into the translation engines and the attention code, so that
a change to their interface is met here alone:

    outputs = model_outputs("runs/de_en", sources, Decoding(beam=4, alpha=0.6))

For an aiayn model directory the best beam hypothesis of each sentence comes from
`Translator.translate_nbest` and its encoder-decoder attention (every layer and head,
Sec. 3.2.3) from one teacher-forced pass over the hypothesis (`attention_examples`). A
CTranslate2 export translates, but its attention is not the per-layer, per-head attention of
the model, so `attention_note` says why it is unavailable and `cross` stays None.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aiayn.errors import ConfigError
from aiayn.evaluation.report_flags import unknown


def display_token(token: str) -> str:
    """A token as the attention view labels it (whitespace made visible, as the explorer)."""
    from aiayn.plots.attention_data import display_token as explorer_display_token

    return explorer_display_token(token)


ATTENTION_CHUNK = 64
"""Sentences whose attention is computed at a time (only the cross-attention is kept)."""


@dataclass(frozen=True)
class Decoding:
    """The decoding settings of `aiayn translate` (paper defaults, Sec. 6.1)."""

    beam: int = 4
    alpha: float = 0.6
    max_len_extra: int = 50
    batch_tokens: int = 4096
    device: str | None = None


@dataclass
class SentenceOutput:
    """One translated sentence as the report sees it.

    `source_tokens` are the model's source tokens + `<eos>` (S), `target_tokens` are `<bos>` +
    the hypothesis tokens (T); `cross` is the encoder-decoder attention (L, H, T, S) float32,
    or None where it is unavailable (model without attention, empty or over-long sentence).
    `source_unknown` / `target_unknown` are positions of unknown or byte-fallback tokens, and
    `unknown_tokens` those tokens' text (source first), as the model saw and produced them.
    """

    hypothesis: str
    source_tokens: list[str]
    target_tokens: list[str]
    source_unknown: list[int] = field(default_factory=list)
    target_unknown: list[int] = field(default_factory=list)
    unknown_tokens: list[str] = field(default_factory=list)
    cross: np.ndarray | None = None


@dataclass
class ModelOutputs:
    """The report's view of a model on a test set: one `SentenceOutput` per source line."""

    name: str
    sentences: list[SentenceOutput]
    model: dict[str, Any]
    attention_note: str | None = None
    seconds: float = 0.0
    generated_tokens: int = 0

    @property
    def hypotheses(self) -> list[str]:
        return [s.hypothesis for s in self.sentences]


def model_outputs(
    model_dir: str, sources: Sequence[str], decoding: Decoding, attention: bool = True
) -> ModelOutputs:
    """Translate `sources` with the model in `model_dir` (aiayn or CTranslate2) and gather, per
    sentence, its tokens and (aiayn models, `attention=True`) its encoder-decoder attention."""
    from aiayn.inference import load

    translator = load(model_dir, decoding.device, task="translation")
    start = time.perf_counter()
    nbests = translator.translate_nbest(
        list(sources), 1, beam=decoding.beam, alpha=decoding.alpha, max_len_extra=decoding.max_len_extra,
        batch_tokens=decoding.batch_tokens,
    )
    ids = [hyps[0].tokens for hyps in nbests]
    hypotheses = [hyps[0].text for hyps in nbests]
    target_tok, source_tok = translator.tokenizers.target, translator.tokenizers.source
    seconds = time.perf_counter() - start
    specials = translator.tokenizers.specials
    unk_id = specials.unk_id
    eos, bos = source_tok.id_to_token(specials.eos_id), target_tok.id_to_token(specials.bos_id)
    sentences = []
    source_ids = source_tok.encode_batch(list(sources)) if sources else []
    for hypothesis, src_ids, target_ids in zip(hypotheses, source_ids, ids, strict=True):
        src_tokens = [source_tok.id_to_token(t) for t in src_ids]
        tgt_tokens = [target_tok.id_to_token(t) for t in target_ids]
        src_unknown = unknown(src_tokens, src_ids, unk_id)
        tgt_unknown = unknown(tgt_tokens, target_ids, unk_id)
        sentences.append(SentenceOutput(
            hypothesis=hypothesis,
            source_tokens=[*src_tokens, eos],
            target_tokens=[bos, *tgt_tokens],
            source_unknown=src_unknown,
            target_unknown=[1 + i for i in tgt_unknown],
            unknown_tokens=[src_tokens[i] for i in src_unknown] + [tgt_tokens[i] for i in tgt_unknown],
        ))
    config = translator.config
    model = {
        "directory": str(model_dir), "d_model": config.d_model, "num_heads": config.num_heads,
        "num_encoder_layers": config.num_encoder_layers, "num_decoder_layers": config.num_decoder_layers,
        "device": str(translator.device),
    }
    outputs = ModelOutputs(str(model_dir), sentences, model, seconds=seconds,
                           generated_tokens=sum(map(len, ids)))
    if translator.engine == "ctranslate2":
        outputs.attention_note = (
            "unavailable: a CTranslate2 model does not give the encoder-decoder attention of every "
            "layer and head (translate with the aiayn model directory for attention)"
        )
    elif not attention:
        outputs.attention_note = "unavailable: not computed"
    else:
        _add_attention(translator, list(sources), hypotheses, sentences)
    return outputs


def _add_attention(translator: Any, sources: list[str], hypotheses: list[str],
                   sentences: list[SentenceOutput]) -> None:
    """Fill `cross` of each sentence the model can take whole (non-empty, within max_len)."""
    from aiayn.plots.attention_data import attention_examples

    limit = translator.model.config.max_len - 1
    target_lengths = [len(ids) for ids in translator.tokenizers.target.encode_batch(hypotheses)]
    usable = [
        i for i, s in enumerate(sentences)
        if sources[i].strip() and len(s.source_tokens) - 1 <= limit and target_lengths[i] <= limit
    ]
    for start in range(0, len(usable), ATTENTION_CHUNK):
        chunk = usable[start : start + ATTENTION_CHUNK]
        try:
            examples = attention_examples(
                translator, [sources[i] for i in chunk], [hypotheses[i] for i in chunk]
            )
        except ConfigError:  # not expected after the checks above; the chunk goes without attention
            continue
        for i, example in zip(chunk, examples, strict=True):
            sentence = sentences[i]
            # attention_examples re-encodes the hypothesis text (decoding drops <unk>): where its
            # tokens differ from the beam's, the weights go with its tokens
            if list(example.target_tokens[1:]) != sentence.target_tokens[1:]:
                sentence.target_tokens = [sentence.target_tokens[0], *example.target_tokens[1:]]
                sentence.target_unknown = []
            sentence.cross = example.cross.astype(np.float32)
