"""What the evaluation report needs from a model: its translations' tokens and attention.

The report shows the translations that `aiayn translate` / `aiayn evaluate` produced; it never
decodes. Given the loaded translator and the best `Translation` of each sentence (what the
command printed), `report_outputs` adds what the report needs besides the text:

    outputs = report_outputs(translator, sources, best, seconds)

For an aiayn model the encoder-decoder attention of every layer and head (Sec. 3.2.3) comes
from one teacher-forced pass of the same loaded model over the source and the output's own
token ids (`Transformer.attention_maps`): eager code whether or not the decoding step was
compiled, and through the int8 linear layers for a model loaded with `quantize="int8"`, so the
weights are those of the model that produced the output. A CTranslate2 export translates, but
gives no per-layer, per-head attention, so `attention_note` says why it is unavailable and
`cross` stays None.

This is the report's only door into the translation engines and the attention code, so that
a change to their interface is met here alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from aiayn.evaluation.report_flags import unknown

if TYPE_CHECKING:
    from aiayn.inference.interface import Translation, Translator


def display_token(token: str) -> str:
    """A token as the attention view labels it (whitespace made visible, as the explorer)."""
    from aiayn.plots.attention_data import display_token as explorer_display_token

    return explorer_display_token(token)


@dataclass
class SentenceOutput:
    """One translated sentence as the report sees it.

    `source_tokens` are the model's source tokens + `<eos>` (S), `target_tokens` are `<bos>` +
    the hypothesis tokens (T); `cross` is the encoder-decoder attention (L, H, T, S) float32,
    or None where it is unavailable (model without attention, empty or over-long sentence).
    `source_unknown` / `target_unknown` are positions of unknown or byte-fallback tokens, and
    `unknown_tokens` those tokens' text (source first), as the model saw and produced them.
    `word_scores` are the hypothesis' whitespace words with their log-probabilities (the sum of
    their tokens', `aiayn.inference.words`), None when the translation came without token scores.
    """

    hypothesis: str
    source_tokens: list[str]
    target_tokens: list[str]
    source_unknown: list[int] = field(default_factory=list)
    target_unknown: list[int] = field(default_factory=list)
    unknown_tokens: list[str] = field(default_factory=list)
    cross: np.ndarray | None = None
    word_scores: list[tuple[str, float]] | None = None


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


def report_outputs(
    translator: Translator, sources: Sequence[str], best: Sequence[Translation], seconds: float = 0.0,
    attention: bool = True, name: str | None = None,
) -> ModelOutputs:
    """The report's view of `translator`'s translations `best` (one per source, as decoded by
    the command) of `sources`: per sentence its tokens and (aiayn models, `attention=True`) the
    encoder-decoder attention of the output's tokens. `seconds`: the decoding time."""
    if len(best) != len(sources):
        raise ValueError(f"{len(sources)} sources but {len(best)} translations")
    from aiayn.inference.words import translation_details

    ids = [translation.tokens for translation in best]
    target_tok, source_tok = translator.tokenizers.target, translator.tokenizers.source
    specials = translator.tokenizers.specials
    unk_id = specials.unk_id
    eos, bos = source_tok.id_to_token(specials.eos_id), target_tok.id_to_token(specials.bos_id)
    sentences = []
    source_ids = source_tok.encode_batch(list(sources)) if sources else []
    for translation, src_ids, target_ids in zip(best, source_ids, ids, strict=True):
        src_tokens = [source_tok.id_to_token(t) for t in src_ids]
        tgt_tokens = [target_tok.id_to_token(t) for t in target_ids]
        src_unknown = unknown(src_tokens, src_ids, unk_id)
        tgt_unknown = unknown(tgt_tokens, target_ids, unk_id)
        details = translation_details(translation, target_tok)
        sentences.append(SentenceOutput(
            hypothesis=translation.text,
            source_tokens=[*src_tokens, eos],
            target_tokens=[bos, *tgt_tokens],
            source_unknown=src_unknown,
            target_unknown=[1 + i for i in tgt_unknown],
            unknown_tokens=[src_tokens[i] for i in src_unknown] + [tgt_tokens[i] for i in tgt_unknown],
            word_scores=list(zip(details["words"], details["word_scores"], strict=True)) if details else None,
        ))
    config = translator.config
    directory = str(translator.directory) if translator.directory is not None else ""
    model = {
        "directory": directory, "d_model": config.d_model, "num_heads": config.num_heads,
        "num_encoder_layers": config.num_encoder_layers, "num_decoder_layers": config.num_decoder_layers,
        "device": str(translator.device),
    }
    outputs = ModelOutputs(name or directory, sentences, model, seconds=seconds,
                           generated_tokens=sum(map(len, ids)))
    if translator.engine == "ctranslate2":
        outputs.attention_note = (
            "unavailable: a CTranslate2 model does not give the encoder-decoder attention of every "
            "layer and head (translate with the aiayn model directory for attention)"
        )
    elif not attention:
        outputs.attention_note = "unavailable: not computed"
    else:
        _add_attention(translator, list(sources), source_ids, ids, sentences)
    return outputs


def _add_attention(
    translator: Any, sources: list[str], source_ids: list[list[int]], target_ids: list[list[int]],
    sentences: list[SentenceOutput],
) -> None:
    """Fill `cross` of each sentence the model can take whole (non-empty, within max_len), from
    the translator's own attention pass (`aiayn.inference.torch_translator.cross_attention`)."""
    from aiayn.inference.torch_translator import cross_attention

    limit = translator.config.max_len - 1
    whole = [
        i for i in range(len(sentences))
        if sources[i].strip() and len(source_ids[i]) <= limit and len(target_ids[i]) <= limit
    ]
    maps = cross_attention(
        translator.network, [source_ids[i] for i in whole], [target_ids[i] for i in whole], translator.device
    )
    for i, cross in zip(whole, maps, strict=True):
        sentences[i].cross = cross
