"""The attention weights of a trained model on given sentences, ready to draw or to export.

For a source sentence X (and a target Y, or the model's own translation of X when none is
given) one teacher-forced pass `Transformer.attention_maps(src, tgt_in)` gives the softmax
probabilities of every layer and head (Sec. 3.2.1, 3.2.2):

- encoder self-attention (Sec. 3.2.3): queries and keys are the source tokens + `<eos>`;
- decoder self-attention: queries and keys are `<bos>` + target tokens, masked so that a
  position attends only to itself and earlier positions (weights above the diagonal are 0);
- encoder-decoder ("cross") attention: queries are `<bos>` + target tokens, keys the source.

Each sentence is run alone (batch of one), so there is no padding to mask out.
A decoder-only language model has the decoder self-attention only (`lm_attention_example`):
its text's tokens are both queries and keys, and encoder and cross maps are empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from aiayn.core.errors import ConfigError
from aiayn.core.eval_mode import eval_mode
from aiayn.data.tokenizer import Tokenizer
from aiayn.inference.interface import Translator
from aiayn.inference.torch_translator import TorchTranslator
from aiayn.model.decoder_only import DecoderOnlyLM

KINDS = ("encoder", "decoder", "cross")
KIND_TITLES = {
    "encoder": "encoder self-attention",
    "decoder": "decoder self-attention (masked)",
    "cross": "encoder-decoder attention",
}
_VISIBLE = {" ": "␣", "\t": "⇥", "\n": "↵", "\r": "␍"}


def display_token(token: str) -> str:
    """A token as a label: whitespace characters become visible symbols (' ' -> '␣')."""
    return "".join(_VISIBLE.get(ch, ch) for ch in token) or "∅"


@dataclass
class AttentionExample:
    """One sentence pair and the model's attention on it.

    Shapes (L = layers, H = heads, S = source length incl. `<eos>`, T = target length
    incl. `<bos>`): encoder (L, H, S, S), decoder (L, H, T, T), cross (L, H, T, S), float32;
    entry [l, h, i, j] is how much query position i attends to key position j.
    """

    source: str
    target: str
    translated: bool
    source_tokens: list[str]
    target_tokens: list[str]
    encoder: np.ndarray
    decoder: np.ndarray
    cross: np.ndarray

    def maps(self, kind: str) -> np.ndarray:
        """The (L, H, queries, keys) weights of `kind` ('encoder', 'decoder' or 'cross')."""
        if kind not in KINDS:
            raise ConfigError(f"attention kind must be one of {', '.join(KINDS)}, got {kind!r}")
        return getattr(self, kind)

    def query_tokens(self, kind: str) -> list[str]:
        return self.source_tokens if kind == "encoder" else self.target_tokens

    def key_tokens(self, kind: str) -> list[str]:
        return self.target_tokens if kind == "decoder" else self.source_tokens

    @property
    def num_heads(self) -> int:
        return int(self.encoder.shape[1])


def _source_ids(translator: TorchTranslator, text: str, where: str) -> list[int]:
    if not text.strip():
        raise ConfigError(f"{where}: the sentence is empty")
    ids = translator.tokenizers.source.encode(text)
    limit = translator.config.max_len - 1
    if len(ids) > limit:
        raise ConfigError(
            f"{where}: the sentence has {len(ids)} tokens; the model takes at most {limit} "
            f"(max_len {limit + 1} including <eos>)"
        )
    return [*ids, translator.config.eos_id]


def _target_ids(translator: TorchTranslator, text: str, where: str) -> list[int]:
    ids = translator.tokenizers.target.encode(text)
    limit = translator.config.max_len - 1
    if len(ids) > limit:
        raise ConfigError(
            f"{where}: the target has {len(ids)} tokens; the model takes at most {limit} "
            f"(max_len {limit + 1} including <bos>)"
        )
    return ids


def _stack(layers: list[torch.Tensor]) -> np.ndarray:
    """Per-layer (1, H, Q, K) maps -> one (L, H, Q, K) float32 array."""
    return torch.stack([m[0] for m in layers]).float().cpu().numpy()


def attention_examples(
    translator: Translator,
    sources: Sequence[str],
    targets: Sequence[str | None] | None = None,
    beam: int = 4,
    where: Sequence[str] | None = None,
) -> list[AttentionExample]:
    """Attention of the model on each source sentence.

    Args:
        translator: the model and its tokenizers: a `TorchTranslator` (`aiayn.load` of an
            aiayn model directory; a CTranslate2 export gives no attention weights).
        sources: source sentences (non-empty).
        targets: a target per source, or None (for all, or for one) to use the model's own
            translation (beam search with `beam`; 1 = greedy).
        beam: beam size for the translations.
        where: a name per sentence for error messages (e.g. 'input.txt line 3');
            defaults to '--text'.
    """
    if not isinstance(translator, TorchTranslator):
        raise ConfigError(
            f"attention maps need aiayn's own model (an aiayn model directory); the {translator.engine} "
            "engine gives no attention weights"
        )
    targets = list(targets) if targets is not None else [None] * len(sources)
    if len(targets) != len(sources):
        raise ConfigError(f"{len(sources)} sources but {len(targets)} targets")
    names = list(where) if where is not None else ["--text"] * len(sources)
    src_ids = [_source_ids(translator, s, n) for s, n in zip(sources, names, strict=True)]
    todo = [i for i, t in enumerate(targets) if t is None]
    tgt_ids: list[list[int]] = [[] for _ in sources]
    texts: list[str] = ["" for _ in sources]
    if todo:
        translations = translator.translate_nbest([sources[i] for i in todo], 1, beam=beam)
        limit = translator.config.max_len - 1
        for i, nbest in zip(todo, translations, strict=True):
            tgt_ids[i] = nbest[0].tokens[:limit]
            texts[i] = translator.tokenizers.target.decode(tgt_ids[i])
    for i, target in enumerate(targets):
        if target is not None:
            tgt_ids[i] = _target_ids(translator, target, names[i])
            texts[i] = target
    model, device = translator.network, translator.device
    source_tok, target_tok = translator.tokenizers.source, translator.tokenizers.target
    bos_id = model.config.bos_id
    examples = []
    with eval_mode(model):
        for i, source in enumerate(sources):
            src = torch.tensor([src_ids[i]], dtype=torch.long, device=device)  # (1, S)
            tgt_in = torch.tensor([[bos_id, *tgt_ids[i]]], dtype=torch.long, device=device)  # (1, T)
            maps = model.attention_maps(src, tgt_in)
            examples.append(
                AttentionExample(
                    source=source,
                    target=texts[i],
                    translated=targets[i] is None,
                    source_tokens=[source_tok.id_to_token(t) for t in src_ids[i]],
                    target_tokens=[target_tok.id_to_token(t) for t in [bos_id, *tgt_ids[i]]],
                    encoder=_stack(maps.encoder),
                    decoder=_stack(maps.decoder),
                    cross=_stack(maps.cross),
                )
            )
    return examples


def attention_example(
    translator: Translator, text: str, target: str | None = None, beam: int = 4
) -> AttentionExample:
    """`attention_examples` for one sentence."""
    return attention_examples(translator, [text], [target], beam)[0]


def lm_attention_example(model: DecoderOnlyLM, tokenizer: Tokenizer, text: str) -> AttentionExample:
    """The masked self-attention of a language model on `text` (its tokens as the model reads
    a prompt: no `<bos>` added); encoder and cross maps are empty (0 layers)."""
    ids = tokenizer.encode(text)
    if not ids:
        raise ConfigError("the text is empty")
    limit = model.config.max_len
    if len(ids) > limit:
        raise ConfigError(f"the text has {len(ids)} tokens; the model takes at most {limit} (its max_len)")
    with eval_mode(model):
        tokens = torch.tensor([ids], dtype=torch.long, device=next(model.parameters()).device)  # (1, T)
        decoder = _stack(model.attention_maps(tokens))  # (L, H, T, T)
    empty = np.zeros((0, decoder.shape[1], 0, 0), dtype=np.float32)
    return AttentionExample(
        source="",
        target=text,
        translated=False,
        source_tokens=[],
        target_tokens=[tokenizer.id_to_token(t) for t in ids],
        encoder=empty,
        decoder=decoder,
        cross=empty,
    )
