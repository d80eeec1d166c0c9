"""What the PyTorch and the CTranslate2 backends share, written once.

`TranslatorBase` checks the arguments, tokenizes (truncating a line longer than the model's
max_len, or raising), leaves empty lines out of decoding, and detokenizes; a backend only
searches (`_search`) and scores (`_score_ids`) token ids. `GeneratorBase` checks the sampling
arguments and runs the sliding context of a language model; a backend only samples one round
within the model's positions (`_round`). `TorchBackend` is what the PyTorch translators and
generators hold: the model and the step runner that computes it (`aiayn.runtime.steps`).
"""

from __future__ import annotations

import dataclasses
import logging
import random
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from aiayn.core.errors import CheckpointError, ConfigError, DataError
from aiayn.data.special_tokens import SpecialTokens
from aiayn.data.tokenizer import Tokenizer, TokenizerPair
from aiayn.decoding.common import Hypothesis, output_length_limit
from aiayn.decoding.constraints import SentenceConstraints
from aiayn.decoding.controls import NO_CONTROLS, Controls, check_finite_scores
from aiayn.decoding.sampling import Sampling
from aiayn.inference.constraint_input import text_constraints
from aiayn.inference.interface import DEFAULT_BATCH_TOKENS, LONG_LINE_ACTIONS, Translation
from aiayn.model.config import ModelConfig
from aiayn.runtime.steps import StepRunner, as_runner

log = logging.getLogger("aiayn.inference")

MAX_PENDING_TOKENS = 4  # a UTF-8 character has at most 4 bytes, a token at least one
_SEED_STEP = 0x9E3779B97F4A7C15  # odd constant spreading the seeds of successive rounds


def check_tokenizers(tokenizers: TokenizerPair, config: ModelConfig) -> None:
    """Raise unless the tokenizers fit the model's embeddings and use its special ids."""
    tokenizers.source.check_fits(config.src_vocab_size, "the model's source embedding")
    tokenizers.target.check_fits(config.tgt_vocab_size, "the model's target embedding")
    if tokenizers.specials != SpecialTokens.of(config):
        raise CheckpointError(
            f"the tokenizers' special ids {tokenizers.specials} are not the model's "
            f"{SpecialTokens.of(config)}"
        )


class TorchBackend:
    """`device` and `parameters` of a backend that decodes with a PyTorch `model`, which its
    `runner` computes (`aiayn.runtime.steps`: the model's own modules, or a runtime's)."""

    model: nn.Module
    runner: StepRunner

    def _hold(
        self, model: nn.Module | StepRunner, kind: type[nn.Module] | tuple[type[nn.Module], ...], needed: str
    ) -> None:
        """Keep `model` (or a runner's model, and the runner), or raise `CheckpointError`
        (`needed`) unless the model is a `kind` (or one of them)."""
        runner = as_runner(model)
        if not isinstance(runner.model, kind):
            raise CheckpointError(f"{needed}, got a {type(runner.model).__name__}")
        self.model, self.runner = runner.model, runner

    @property
    def network(self) -> nn.Module:
        """The module the runner computes with (the model, or the runtime's copy of it):
        teacher-forced passes (scores, attention) run it, as the searches do."""
        return self.runner.network

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())


def __getattr__(name: str) -> Any:
    """`TorchRuntime`, the earlier name of `TorchBackend` ("runtime" now names `aiayn.runtime`
    alone), kept for one release with a `DeprecationWarning`."""
    if name == "TorchRuntime":
        warnings.warn(
            "aiayn.inference.base.TorchRuntime is deprecated and will be removed in the next release: "
            "use aiayn.inference.base.TorchBackend",
            DeprecationWarning,
            stacklevel=2,
        )
        return TorchBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class TranslatorBase:
    """The `aiayn.inference.Translator` interface around a backend's `_search` and `_score_ids`.

    Args:
        config: the model's settings (max_len, special ids).
        tokenizers: the model's tokenizers (checked against `config`).
        directory: the model directory, if loaded from one.
    """

    engine = "aiayn"
    parameters: int | None = None

    def __init__(self, config: ModelConfig, tokenizers: TokenizerPair, directory: Path | None) -> None:
        check_tokenizers(tokenizers, config)
        self.config = config
        self.tokenizers = tokenizers
        self.directory = directory

    # ---------------------------------------------------------------- what a backend does
    def _search(
        self, sources: list[list[int]], beam: int, alpha: float, max_len_extra: int, nbest: int,
        batch_tokens: int, exact_scores: bool, controls: Controls = NO_CONTROLS,
        prefixes: list[list[int]] | None = None, constraints: list[SentenceConstraints] | None = None,
    ) -> list[list[Hypothesis]]:
        """Per source (token ids without `<eos>`), up to `nbest` hypotheses, best first.
        `exact_scores` False allows scores that are only good enough to rank (none are shown).
        `controls` and `prefixes` (target ids per source, checked to fit the length limit):
        see `aiayn.decoding.controls`; with `controls.sample` the search is one draw per step.
        `constraints` (one per source, given only when some has one; checked by
        `_check_constraints`): see `aiayn.decoding.constraints`."""
        raise NotImplementedError

    def _check_constraints(self, include: bool, exclude: bool, beam: int, controls: Controls) -> None:
        """`ConfigError` (one line) for constraints this backend or these settings cannot honour."""
        raise ConfigError(f"lexical constraints are not available with a {type(self).__name__}")

    def _token_log_probs(
        self, sources: list[list[int]], targets: list[list[int]], batch_tokens: int
    ) -> list[list[float]]:
        """log p of each target token, then of `<eos>`, given the source and the tokens before
        it, for each pair of token-id lists (without `<eos>`): forced decoding."""
        raise ConfigError(f"per-token scores are not available with a {type(self).__name__}")

    def _cross_attention(self, sources: list[list[int]], targets: list[list[int]]) -> list[np.ndarray]:
        """(L, H, T, S) encoder-decoder attention of each pair (see `torch_translator.cross_attention`),
        or `ConfigError` from a backend that does not give it."""
        raise ConfigError(f"alignments are not available with a {type(self).__name__}")

    def _score_ids(
        self, sources: list[list[int]], targets: list[list[int]], batch_tokens: int
    ) -> list[float]:
        """log P(target | source) of each pair of token-id lists (without `<eos>`)."""
        return [sum(scores) for scores in self._token_log_probs(sources, targets, batch_tokens)]

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
        limit = self.config.max_len - 1
        encoded = tokenizer.encode_batch(list(texts)) if texts else []
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

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Source tokens the model reads for each text (its tokens + `<eos>`; 0 for a blank text)."""
        if not texts:
            return []
        encoded = self.tokenizers.source.encode_batch(list(texts))
        return [len(ids) + 1 if text.strip() else 0 for text, ids in zip(texts, encoded, strict=True)]

    # ---------------------------------------------------------------- decoding
    def _hypotheses(
        self, texts: Sequence[str], nbest: int, beam: int, alpha: float, max_len_extra: int,
        batch_tokens: int, line_offset: int, on_long_line: str, exact_scores: bool,
        controls: Controls = NO_CONTROLS, prefix: str | Sequence[str | None] | None = None,
        encoded_sources: dict[int, list[int]] | None = None,
        include: Sequence[Sequence[str] | None] | None = None,
        exclude: Sequence[Sequence[str] | None] | None = None,
    ) -> list[list[Hypothesis]]:
        """Up to `nbest` hypotheses of each text; `encoded_sources` (when given) receives the
        source ids of each text that was decoded, by its index; `include` / `exclude`: the
        constraint phrases of each text (`aiayn.inference.constraint_input`)."""
        if beam < 1 or not 1 <= nbest <= beam:
            raise ConfigError(f"need beam >= 1 and 1 <= nbest <= beam, got beam={beam}, nbest={nbest}")
        if batch_tokens < 1:
            raise ConfigError(f"batch_tokens must be >= 1, got {batch_tokens}")
        if max_len_extra < 0:
            raise ConfigError(f"max_len_extra must be >= 0, got {max_len_extra}")
        results: list[list[Hypothesis]] = [[Hypothesis([], 0.0)] for _ in texts]
        todo = [i for i, text in enumerate(texts) if text.strip()]
        line_numbers = [line_offset + i + 1 for i in todo]
        if controls.sample and nbest != 1:
            raise ConfigError(f"sample gives one translation per text; nbest must be 1, got {nbest}")
        encoded = self._encode([texts[i] for i in todo], "source", line_numbers, on_long_line)
        prefixes = self._prefixes(prefix, texts, todo, encoded, max_len_extra, controls, line_numbers)
        constraints = None if include is None and exclude is None else text_constraints(
            self, include, exclude, texts, todo, encoded, prefixes, max_len_extra, beam, controls,
            line_numbers,
        )
        if include is not None:  # an empty text gives an empty output: its phrases are not in it
            for i in sorted(set(range(len(texts))) - set(todo)):
                if include[i]:
                    results[i] = [Hypothesis([], 0.0, False)]
        if encoded_sources is not None:
            encoded_sources.update(zip(todo, encoded, strict=True))
        if encoded:
            more = {} if constraints is None else {"constraints": constraints}
            found = self._search(
                encoded, beam, alpha, max_len_extra, nbest, batch_tokens, exact_scores, controls, prefixes,
                **more,
            )
            for i, hyps in zip(todo, found, strict=True):
                results[i] = hyps
        if exact_scores:
            self._score_blank_lines(texts, results, line_offset, on_long_line, batch_tokens, encoded_sources)
        check_finite_scores(results, controls, alpha, line_offset)
        return results

    def _score_blank_lines(
        self, texts: Sequence[str], results: list[list[Hypothesis]], line_offset: int, on_long_line: str,
        batch_tokens: int, encoded_sources: dict[int, list[int]] | None,
    ) -> None:
        """The one rule for a blank (empty or whitespace-only) line, shared with `score`: nothing is
        decoded, its output is empty, and that empty output is scored with its `<eos>`, as
        `score(line, "")` scores it (|Y| = 1, so the length penalty is 1); in place."""
        blank = [i for i, text in enumerate(texts) if not text.strip()]
        if not blank:
            return
        numbers = [line_offset + i + 1 for i in blank]
        ids = self._encode([texts[i] for i in blank], "source", numbers, on_long_line)
        scores = self._score_ids(ids, [[] for _ in blank], batch_tokens)
        for i, score in zip(blank, scores, strict=True):
            results[i] = [Hypothesis([], float(score))]
        if encoded_sources is not None:
            encoded_sources.update(zip(blank, ids, strict=True))

    def _prefixes(
        self, prefix: str | Sequence[str | None] | None, texts: Sequence[str], todo: list[int],
        encoded: list[list[int]], max_len_extra: int, controls: Controls, line_numbers: Sequence[int],
    ) -> list[list[int]] | None:
        """The target prefix ids of the texts `todo` (None without prefixes), each checked to
        fit its sentence's output length limit."""
        if prefix is None:
            return None
        if isinstance(prefix, str):
            prefix = [prefix] * len(texts)
        if len(prefix) != len(texts):
            raise ConfigError(f"{len(prefix)} prefixes for {len(texts)} texts: give one per text, or one str")
        wanted = [prefix[i] or "" for i in todo]
        ids = self.tokenizers.target.encode_batch(wanted) if wanted else []
        for source, prefix_ids, line in zip(encoded, ids, line_numbers, strict=True):
            limit = output_length_limit(  # + 1: <eos> included
                len(source) + 1, max_len_extra, None, self.config.max_len, controls.max_output_ratio
            )
            if len(prefix_ids) > limit:
                raise ConfigError(
                    f"the prefix of line {line} has {len(prefix_ids)} tokens; its output length "
                    f"limit is {limit} tokens"
                )
        return ids if any(ids) else None

    def translate(
        self, texts: Sequence[str], beam: int = 4, alpha: float = 0.6, max_len_extra: int = 50,
        batch_tokens: int = DEFAULT_BATCH_TOKENS, line_offset: int = 0, on_long_line: str = "truncate",
        *, prefix: str | Sequence[str | None] | None = None,
        include: Sequence[Sequence[str] | None] | None = None,
        exclude: Sequence[Sequence[str] | None] | None = None, **controls: Any,
    ) -> list[str]:
        """See `aiayn.inference.Translator.translate`."""
        hypotheses = self._hypotheses(
            texts, 1, beam, alpha, max_len_extra, batch_tokens, line_offset, on_long_line, False,
            make_controls(controls), prefix, None, include, exclude,
        )
        return self.tokenizers.target.decode_batch([hyps[0].tokens for hyps in hypotheses])

    def translate_nbest(
        self, texts: Sequence[str], nbest: int, beam: int = 4, alpha: float = 0.6, max_len_extra: int = 50,
        batch_tokens: int = DEFAULT_BATCH_TOKENS, line_offset: int = 0, on_long_line: str = "truncate",
        *, prefix: str | Sequence[str | None] | None = None, token_scores: bool = False,
        alignments: bool = False, include: Sequence[Sequence[str] | None] | None = None,
        exclude: Sequence[Sequence[str] | None] | None = None, **controls: Any,
    ) -> list[list[Translation]]:
        """See `aiayn.inference.Translator.translate_nbest`."""
        if alignments:
            self.check_alignments()
        sources: dict[int, list[int]] = {}
        hypotheses = self._hypotheses(
            texts, nbest, beam, alpha, max_len_extra, batch_tokens, line_offset, on_long_line, True,
            make_controls(controls), prefix, sources, include, exclude,
        )
        flat = iter(self.tokenizers.target.decode_batch([h.tokens for hyps in hypotheses for h in hyps]))
        results = [
            [Translation(next(flat), float(h.score), h.tokens, constraints_met=h.constraints_met)
             for h in hyps]
            for hyps in hypotheses
        ]
        if token_scores or alignments:
            self._add_details(results, sources, batch_tokens, token_scores, alignments, texts)
        return results

    def check_alignments(self) -> None:
        """Raise `ConfigError` (one line) when this backend cannot give alignments."""

    def _add_details(
        self, results: list[list[Translation]], sources: dict[int, list[int]], batch_tokens: int,
        token_scores: bool, alignments: bool, texts: Sequence[str],
    ) -> None:
        """Fill `token_scores` / `alignment` of every translation in `results`, in place (the
        alignments in words of `texts`, the input lines)."""
        from aiayn.inference.words import align_words, source_token_words, token_words

        pairs = [(i, k) for i, hyps in enumerate(results) for k in range(len(hyps)) if i in sources]
        src = [sources[i] for i, _ in pairs]
        tgt = [results[i][k].tokens for i, k in pairs]
        scores = self._token_log_probs(src, tgt, batch_tokens) if token_scores and pairs else None
        maps = self._cross_attention(src, tgt) if alignments and pairs else None
        source_tokenizer, target_tokenizer = self.tokenizers.source, self.tokenizers.target
        for hyps in results:  # every text decoded or blank is in `sources`; these are filled below
            hyps[:] = [h._replace(token_scores=[] if token_scores else None,
                                  alignment=[] if alignments else None) for h in hyps]
        for n, (i, k) in enumerate(pairs):
            entry = results[i][k]
            if scores is not None:
                entry = entry._replace(token_scores=scores[n])
            if maps is not None:
                words = (source_token_words(source_tokenizer, texts[i], len(src[n])),
                         token_words(target_tokenizer, tgt[n]))
                entry = entry._replace(alignment=align_words(maps[n], *words))
            results[i][k] = entry

    # ---------------------------------------------------------------- scoring
    def score(
        self, sources: Sequence[str], targets: Sequence[str], batch_tokens: int = DEFAULT_BATCH_TOKENS
    ) -> list[float]:
        """log P(target | source) (natural log, `<eos>` included) of each pair, by forced
        decoding: the decoder reads `<bos>` + target and is scored on target + `<eos>`."""
        if len(sources) != len(targets):
            raise ConfigError(f"{len(sources)} sources but {len(targets)} targets")
        if batch_tokens < 1:
            raise ConfigError(f"batch_tokens must be >= 1, got {batch_tokens}")
        if not sources:
            return []
        line_numbers = range(1, len(sources) + 1)
        src_ids = self._encode(sources, "source", line_numbers)
        tgt_ids = self._encode(targets, "target", line_numbers)
        return self._score_ids(src_ids, tgt_ids, batch_tokens)


def make_controls(settings: dict[str, Any]) -> Controls:
    """`Controls` from keyword arguments, one clear error for an unknown name."""
    known = {f.name for f in dataclasses.fields(Controls)}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ConfigError(f"unknown decoding control(s) {unknown}; known: {sorted(known)}")
    return Controls(**settings)


def context_length(config: ModelConfig) -> int:
    """Positions a language model was trained on: `extra['block_size']` if recorded, else `max_len`."""
    extra = config.extra if isinstance(config.extra, dict) else {}
    block = extra.get("block_size")
    return min(config.max_len, block) if isinstance(block, int) and block > 0 else config.max_len


def stream_text(tokenizer: Tokenizer, ids: Iterable[int]) -> Iterator[str]:
    """Decode `ids` into text pieces as they come; the pieces join to `tokenizer.decode(ids)`,
    a piece held back while it ends inside a multi-byte UTF-8 character (byte-level BPE
    tokens can split one)."""
    pending: list[int] = []
    for token in ids:
        pending.append(token)
        piece = tokenizer.decode(pending)
        if piece.endswith("\ufffd") and len(pending) < MAX_PENDING_TOKENS:
            continue  # possibly the first bytes of a character whose rest is still to come
        pending = []
        if piece:
            yield piece
    if pending and (piece := tokenizer.decode(pending)):
        yield piece


class GeneratorBase:
    """The `aiayn.inference.Generator` interface around a backend's `_round`.

    A model only knows positions up to the block size it was trained on; when the context
    fills those, generation goes on from the last `context // 2` tokens: they are fed again
    as a new prompt, and sampling continues with the next round's seed. The same seed gives
    the same tokens.
    """

    engine = "aiayn"
    parameters: int | None = None

    def __init__(self, config: ModelConfig, tokenizer: Tokenizer, directory: Path | None) -> None:
        tokenizer.check_fits(config.tgt_vocab_size, "the model's embedding")
        self.config = config
        self.tokenizer = tokenizer
        self.directory = directory

    def _round(
        self, prompt_ids: list[int], count: int, sampling: Sampling, seed: int, stop_ids: set[int]
    ) -> Iterator[int]:
        """Up to `count` ids sampled after `prompt_ids` (which leave room for them in the
        model's positions), stopping after a stop id; `seed` seeds this round."""
        raise NotImplementedError

    def generate_ids(
        self, prompt_ids: Sequence[int], max_new_tokens: int = 100, temperature: float = 1.0,
        top_k: int | None = None, top_p: float | None = None, seed: int | None = None,
        stop_ids: Iterable[int] | None = None, context: int | None = None,
    ) -> Iterator[int]:
        """See `aiayn.inference.Generator.generate_ids`."""
        sampling = Sampling(temperature, top_k, top_p)  # checks them
        if max_new_tokens < 0:
            raise ConfigError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
        context = min(context or context_length(self.config), self.config.max_len)
        if context < 2:
            raise ConfigError(f"the context must hold at least 2 positions, got {context}")
        return self._generate(prompt_ids, max_new_tokens, sampling, seed, stop_ids, context)

    def _generate(
        self, prompt_ids: Sequence[int], max_new_tokens: int, sampling: Sampling, seed: int | None,
        stop_ids: Iterable[int] | None, context: int,
    ) -> Iterator[int]:
        stops = {self.config.eos_id} if stop_ids is None else set(stop_ids)
        seed = random.SystemRandom().randrange(2**63) if seed is None else seed
        history = [int(i) for i in prompt_ids] or [self.config.bos_id]
        keep, remaining, round_index = context, max_new_tokens, 0
        while remaining > 0:
            prompt = history[-keep:]
            room = context - len(prompt) + 1  # the last token drawn is never fed back
            round_seed = (seed + round_index * _SEED_STEP) % 2**63
            for token in self._round(prompt, min(remaining, room), sampling, round_seed, stops):
                yield token
                history.append(token)
                remaining -= 1
                if token in stops:
                    return
            keep, round_index = context // 2, round_index + 1

    def generate_stream(
        self, prompt: str, max_new_tokens: int = 100, temperature: float = 1.0, top_k: int | None = None,
        top_p: float | None = None, seed: int | None = None,
    ) -> Iterator[str]:
        """See `aiayn.inference.Generator.generate_stream`."""
        eos_id = self.config.eos_id
        prompt_ids = self.tokenizer.encode(prompt)
        ids = self.generate_ids(prompt_ids, max_new_tokens, temperature, top_k, top_p, seed)
        return stream_text(self.tokenizer, (i for i in ids if i != eos_id))

    def generate(
        self, prompt: str, max_new_tokens: int = 100, temperature: float = 1.0, top_k: int | None = None,
        top_p: float | None = None, seed: int | None = None,
    ) -> str:
        """See `aiayn.inference.Generator.generate`."""
        prompt_ids = self.tokenizer.encode(prompt)
        ids = self.generate_ids(prompt_ids, max_new_tokens, temperature, top_k, top_p, seed)
        return self.tokenizer.decode([i for i in ids if i != self.config.eos_id])
