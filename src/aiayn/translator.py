"""The Python API for translation: `aiayn.load(DIR)` -> `Translator`.

    translator = aiayn.load("runs/multi30k")
    translator.translate(["Ein Hund läuft."])            # ['A dog runs.']
    translator.translate(["Ein Hund läuft."], nbest=2)   # [[Translation('A dog runs.', -0.21), ...]]
    translator.score(["Ein Hund läuft."], ["A dog runs."])  # [-0.93]

A `Translator` tokenizes each source (tokens + `<eos>`; the special ids are the model
config's), sorts the sentences by length into
batches of about `batch_tokens` padded source tokens (little padding, so little wasted work),
decodes each batch with beam search (Sec. 6.1) or greedy search (beam 1), puts the outputs
back in input order and detokenizes them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F

from aiayn.data.special_tokens import SpecialTokens
from aiayn.data.tokenizer import TokenizerPair
from aiayn.decoding.beam_search import beam_search
from aiayn.decoding.common import Hypothesis
from aiayn.decoding.greedy import greedy_search
from aiayn.errors import CheckpointError, ConfigError, DataError
from aiayn.eval_mode import eval_mode
from aiayn.model.transformer import Transformer
from aiayn.model_dir import load_model

log = logging.getLogger(__name__)

DEFAULT_BATCH_TOKENS = 4096
"""Padded source tokens per decoding batch (beam search decodes beam x as many rows)."""

LONG_LINE_ACTIONS = ("truncate", "error")
"""What to do with a line longer than the model's max_len: cut it (with a warning) or raise."""


class Translation(NamedTuple):
    """One n-best entry: detokenized text and its score (log P(Y|X) / lp(Y))."""

    text: str
    score: float


def length_batches(lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Group indices by length, longest first, so that each batch's padded size
    (number of sentences x longest length) stays within `batch_tokens` (a longer sentence
    gets a batch of its own)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches and lengths[batches[-1][0]] * (len(batches[-1]) + 1) <= batch_tokens:
            batches[-1].append(i)  # the first index of a batch is its longest sentence
        else:
            batches.append([i])
    return batches


def pad_batch(rows: Sequence[Sequence[int]], pad_id: int, device: torch.device) -> torch.Tensor:
    """Token id lists -> (B, longest) LongTensor, right-padded with `pad_id`."""
    out = torch.full((len(rows), max(map(len, rows))), pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out.to(device)


class Translator:
    """A Transformer and its tokenizers, ready to translate text.

    Args:
        model: a trained `Transformer` (its device is used; it is put in eval mode while
            decoding and returned to its previous mode after, so this works mid-training).
        tokenizers: the `TokenizerPair` the model was trained with; its special ids must be
            the model config's.
    """

    def __init__(self, model: Transformer, tokenizers: TokenizerPair) -> None:
        if not isinstance(model, Transformer):
            raise CheckpointError(
                f"translation needs an encoder-decoder Transformer, got a {type(model).__name__}"
            )
        config = model.config
        tokenizers.source.check_fits(config.src_vocab_size, "the model's source embedding")
        tokenizers.target.check_fits(config.tgt_vocab_size, "the model's target embedding")
        if tokenizers.specials != SpecialTokens.of(config):
            raise CheckpointError(
                f"the tokenizers' special ids {tokenizers.specials} are not the model's "
                f"{SpecialTokens.of(config)}"
            )
        self.model = model
        self.tokenizers = tokenizers

    @classmethod
    def load(cls, directory: str | Path, device: str | torch.device | None = None) -> Translator:
        """Load the model (`config.json` + `model.safetensors`) and tokenizers of a model
        directory; `device` None picks CUDA when available."""
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        model = load_model(directory, device)
        if not isinstance(model, Transformer):
            raise CheckpointError(
                f"{directory} holds a {model.model_type!r} model; translation needs a "
                "'transformer' (encoder-decoder) model"
            )
        return cls(model, TokenizerPair.load(directory, SpecialTokens.of(model.config)))

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # ---------------------------------------------------------------- tokens
    def _encode(
        self, texts: Sequence[str], side: str, line_numbers: Sequence[int], on_long_line: str = "truncate"
    ) -> list[list[int]]:
        """Token ids of each text, truncated so that text + `<eos>` fits the model's max_len
        (`on_long_line="error"`: a `DataError` naming the line instead). `line_numbers[i]` is
        the 1-based input line of `texts[i]`, for the messages."""
        if on_long_line not in LONG_LINE_ACTIONS:
            raise ConfigError(f"on_long_line must be one of {LONG_LINE_ACTIONS}, got {on_long_line!r}")
        tokenizer = self.tokenizers.source if side == "source" else self.tokenizers.target
        limit = self.model.config.max_len - 1
        encoded = tokenizer.encode_batch(texts) if texts else []
        for i, ids in enumerate(encoded):
            if len(ids) > limit and on_long_line == "error":
                raise DataError(
                    f"{side} line {line_numbers[i]} has {len(ids)} tokens; the model takes at most "
                    f"{limit} (its max_len is {limit + 1})"
                )
            if len(ids) > limit:
                log.warning(
                    "%s line %d has %d tokens; truncated to %d (the model's max_len is %d)",
                    side, line_numbers[i], len(ids), limit, limit + 1,
                )
                encoded[i] = ids[:limit]
        return encoded

    # ---------------------------------------------------------------- decoding
    def translate_hypotheses(
        self,
        sentences: Sequence[str],
        beam: int = 4,
        alpha: float = 0.6,
        max_len_extra: int = 50,
        nbest: int = 1,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        line_offset: int = 0,
        on_long_line: str = "truncate",
    ) -> list[list[Hypothesis]]:
        """Token-level n-best lists: for each sentence up to `nbest` `Hypothesis(tokens, score)`.

        An empty (or blank) sentence gives `[Hypothesis([], 0.0)]` without decoding.
        `line_offset` is added to the line numbers in truncation warnings. A sentence longer
        than the model's max_len is truncated with a warning, or with `on_long_line="error"`
        raises `DataError` naming its line.
        """
        if beam < 1 or not 1 <= nbest <= beam:
            raise ConfigError(f"need beam >= 1 and 1 <= nbest <= beam, got beam={beam}, nbest={nbest}")
        if batch_tokens < 1:
            raise ConfigError(f"batch_tokens must be >= 1, got {batch_tokens}")
        results: list[list[Hypothesis]] = [[Hypothesis([], 0.0)] for _ in sentences]
        todo = [i for i, text in enumerate(sentences) if text.strip()]
        line_numbers = [line_offset + i + 1 for i in todo]
        encoded = self._encode([sentences[i] for i in todo], "source", line_numbers, on_long_line)
        eos_id = self.model.config.eos_id
        sources = [[*ids, eos_id] for ids in encoded]
        pad_id = self.model.config.pad_id
        for batch in length_batches([len(s) for s in sources], batch_tokens):
            src = pad_batch([sources[j] for j in batch], pad_id, self.device)  # (B, S)
            if beam == 1:  # greedy: the length penalty does not change an arg-max path
                greedy = greedy_search(self.model, src, max_len_extra)
                nbests = [[Hypothesis(t, s)] for t, s in zip(greedy.tokens, greedy.scores, strict=True)]
            else:
                nbests = beam_search(self.model, src, beam, alpha, max_len_extra, nbest)
            for j, hyps in zip(batch, nbests, strict=True):
                results[todo[j]] = hyps
        return results

    def translate(
        self,
        sentences: Sequence[str],
        beam: int = 4,
        alpha: float = 0.6,
        max_len_extra: int = 50,
        nbest: int = 1,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        line_offset: int = 0,
        on_long_line: str = "truncate",
    ) -> list[str] | list[list[Translation]]:
        """Translate sentences (paper defaults: beam 4, alpha 0.6, max length source + 50).

        Args:
            sentences: source texts; empty lines give empty outputs.
            beam: beam size; 1 = greedy search (alpha then plays no part).
            alpha: length penalty exponent (see `aiayn.decoding.beam_search`).
            max_len_extra: output tokens allowed beyond the source length.
            nbest: 1 returns one string per sentence; N > 1 (<= beam) returns per sentence
                a list of up to N `Translation(text, score)`, best first.
            batch_tokens: padded source tokens per batch.
            line_offset: added to line numbers in warnings (for streamed input).
            on_long_line: 'truncate' (with a warning) or 'error' for a sentence longer than
                the model's max_len.
        """
        hypotheses = self.translate_hypotheses(
            sentences, beam, alpha, max_len_extra, nbest, batch_tokens, line_offset, on_long_line
        )
        target = self.tokenizers.target
        if nbest == 1:
            return target.decode_batch([hyps[0].tokens for hyps in hypotheses])
        flat = target.decode_batch([h.tokens for hyps in hypotheses for h in hyps])
        texts = iter(flat)
        return [[Translation(next(texts), h.score) for h in hyps] for hyps in hypotheses]

    # ---------------------------------------------------------------- scoring
    def score(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
    ) -> list[float]:
        """log P(target | source) (natural log, `<eos>` included) of each pair, by forced
        decoding: the decoder reads `<bos>` + target and is scored on target + `<eos>`."""
        if len(sources) != len(targets):
            raise ConfigError(f"{len(sources)} sources but {len(targets)} targets")
        line_numbers = range(1, len(sources) + 1)
        bos_id, eos_id = self.model.config.bos_id, self.model.config.eos_id
        src_ids = [[*ids, eos_id] for ids in self._encode(sources, "source", line_numbers)]
        tgt_ids = self._encode(targets, "target", line_numbers)
        pad_id = self.model.config.pad_id
        lengths = [max(len(s), len(t) + 1) for s, t in zip(src_ids, tgt_ids, strict=True)]
        scores = [0.0] * len(sources)
        with eval_mode(self.model):
            for batch in length_batches(lengths, batch_tokens):
                src = pad_batch([src_ids[i] for i in batch], pad_id, self.device)  # (B, S)
                tgt_in = pad_batch([[bos_id, *tgt_ids[i]] for i in batch], pad_id, self.device)
                labels = pad_batch([[*tgt_ids[i], eos_id] for i in batch], pad_id, self.device)
                logp = F.log_softmax(self.model(src, tgt_in).float(), dim=-1)  # (B, T, V)
                token_logp = logp.gather(2, labels[:, :, None]).squeeze(2)  # (B, T)
                sums = token_logp.masked_fill(labels == pad_id, 0.0).sum(dim=1)
                for i, value in zip(batch, sums.tolist(), strict=True):
                    scores[i] = value
        return scores


def load(directory: str | Path, device: str | torch.device | None = None) -> Translator:
    """Load a model directory as a `Translator` (`device` None: CUDA when available)."""
    return Translator.load(directory, device)
