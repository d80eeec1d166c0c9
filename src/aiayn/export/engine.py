"""Run a CTranslate2 export behind aiayn's own interfaces.

    translator = load_translator("runs/multi30k-ct2")   # or a model directory: same interface
    translator.translate(["Ein Hund läuft."], beam=4)

`load_translator(DIR)` returns aiayn's `Translator` for a model directory and a
`CTranslate2Translator` for a directory written by `aiayn export ctranslate2` (recognised by
its `model.bin`). Both answer the same calls, the interface a translation engine offers:

- `translate(sentences, beam, alpha, max_len_extra, nbest, ...)` -> strings, or n-best lists
  of `Translation(text, score)`;
- `translate_hypotheses(...)` -> per sentence, n-best `Hypothesis(token_ids, score)`;
- `score(sources, targets)` -> log P(target | source);
- `tokenizers` (a `TokenizerPair`), `device` (printed by `aiayn evaluate`).

`CTranslate2Generator` does the same for language models (`generate_stream`, `logits`).

Decoding follows aiayn's conventions (see `aiayn.decoding`) as closely as CTranslate2 allows:
the source ends with `<eos>`, the decoder starts from `<bos>`, `<pad>` and `<bos>` are never
generated, and each sentence may generate (source length + max_len_extra) tokens including
`<eos>`, capped by the model's `max_len` (sentences are batched by source length so that each
gets its own limit). Two differences remain:

- CTranslate2 removes the forbidden tokens before its softmax, aiayn after (its scores are
  log-probabilities under the full softmax, which label smoothing makes differ by ~1e-3 a
  token). The search runs on CTranslate2's numbers; the hypotheses it returns are scored
  again by forced decoding wherever scores are shown (`exact_scores`), so they are aiayn's.
- Length penalty: CTranslate2 divides by |Y|^alpha. Here CTranslate2 searches with
  raw log-probabilities and returns `beam` finished hypotheses, which are then ranked with
  aiayn's GNMT penalty ((5 + |Y|) / 6)^alpha. Its search stops once the best beam has ended
  and `beam` hypotheses are finished, where aiayn's stops when no open beam can still win
  under the penalty; with alpha = 0 both return the same best hypothesis.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from aiayn.decoding.common import Hypothesis, length_penalty, never_generated
from aiayn.errors import CheckpointError, ConfigError, DataError
from aiayn.export.common import load_tokenizers, require, vocabulary
from aiayn.export.ctranslate2 import AIAYN_FILE, CT2_WEIGHTS
from aiayn.lm.generate import context_length
from aiayn.model.config import ModelConfig
from aiayn.translator import DEFAULT_BATCH_TOKENS, LONG_LINE_ACTIONS, Translation, Translator

log = logging.getLogger(__name__)


def is_ctranslate2_dir(directory: str | Path) -> bool:
    """True for a directory holding a CTranslate2 model (`model.bin`)."""
    return (Path(directory) / CT2_WEIGHTS).is_file()


def load_translator(directory: str | Path, device: str | None = None) -> Translator | CTranslate2Translator:
    """The translation engine for `directory`: CTranslate2 for an export, else aiayn's own."""
    if is_ctranslate2_dir(directory):
        return CTranslate2Translator(directory, device or "auto")
    return Translator.load(directory, device)


def _read_settings(directory: Path, expected_type: str) -> ModelConfig:
    """The `ModelConfig` stored in an export's `aiayn.json`."""
    path = directory / AIAYN_FILE
    if not path.is_file():
        raise CheckpointError(
            f"{directory} holds a CTranslate2 model but no {AIAYN_FILE}: only directories written "
            "by `aiayn export ctranslate2` can be run by aiayn"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        config = ModelConfig.from_dict(data["config"])
        model_type = data["model_type"]
    except (ValueError, KeyError, TypeError) as error:
        raise CheckpointError(f"{path}: not an aiayn model description ({error})") from None
    if model_type != expected_type:
        raise CheckpointError(f"{directory} holds a {model_type!r} model, not a {expected_type!r}")
    return config


def _device_arguments(device: str) -> dict[str, Any]:
    """CTranslate2's device and device_index for 'cpu', 'cuda', 'cuda:1' or 'auto'."""
    name, _, index = device.partition(":")
    if name not in ("cpu", "cuda", "auto") or (index and not index.isdigit()):
        raise ConfigError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {device!r}")
    return {"device": name, "device_index": int(index or 0)}


class CTranslate2Translator:
    """aiayn's `Translator` interface on a CTranslate2 translation export.

    Args:
        directory: written by `aiayn export ctranslate2` from a translation model.
        device: 'cpu', 'cuda', 'cuda:N' or 'auto'.
        compute_type: CTranslate2's compute type ('default': the type the weights were saved in).
        threads: intra-op threads (0: CTranslate2's default).
    """

    def __init__(
        self, directory: str | Path, device: str = "cpu", compute_type: str = "default", threads: int = 0
    ) -> None:
        ctranslate2 = require("ctranslate2", "running a CTranslate2 export")
        directory = Path(directory)
        self.config = config = _read_settings(directory, "transformer")
        self.tokenizers = load_tokenizers(directory, config, "transformer")
        self._source_tokens = vocabulary(self.tokenizers.source, config.src_vocab_size, "source")
        target_tokens = vocabulary(self.tokenizers.target, config.tgt_vocab_size, "target")
        self._target_tokens = target_tokens
        self._target_ids = {token: i for i, token in enumerate(target_tokens)}
        never = never_generated(config.pad_id, config.bos_id, config.eos_id)
        self._forbidden = [[target_tokens[i]] for i in never]
        try:
            self.engine = ctranslate2.Translator(
                str(directory), compute_type=compute_type, intra_threads=threads, **_device_arguments(device)
            )
        except (RuntimeError, ValueError) as error:
            raise CheckpointError(f"{directory}: CTranslate2 cannot load it ({error})") from None
        self.device = f"{self.engine.device} (CTranslate2, {compute_type})"

    # ---------------------------------------------------------------- tokens
    def _encode(
        self, texts: Sequence[str], line_numbers: Sequence[int], on_long_line: str
    ) -> list[list[int]]:
        """Source ids of each text, cut so that text + `<eos>` fits max_len (as `Translator`)."""
        if on_long_line not in LONG_LINE_ACTIONS:
            raise ConfigError(f"on_long_line must be one of {LONG_LINE_ACTIONS}, got {on_long_line!r}")
        limit = self.config.max_len - 1
        encoded = self.tokenizers.source.encode_batch(texts) if texts else []
        for i, ids in enumerate(encoded):
            if len(ids) > limit and on_long_line == "error":
                raise DataError(
                    f"source line {line_numbers[i]} has {len(ids)} tokens; the model takes at most "
                    f"{limit} (its max_len is {limit + 1})"
                )
            if len(ids) > limit:
                log.warning(
                    "source line %d has %d tokens; truncated to %d (the model's max_len is %d)",
                    line_numbers[i], len(ids), limit, limit + 1,
                )
                encoded[i] = ids[:limit]
        return encoded

    def _target_id_list(self, tokens: Iterable[str]) -> list[int]:
        return [self._target_ids[t] for t in tokens]

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
        exact_scores: bool = True,
    ) -> list[list[Hypothesis]]:
        """Per sentence, up to `nbest` `Hypothesis(token_ids, score)`, best first (as `Translator`).

        `exact_scores`: score the chosen hypotheses again by forced decoding, under the full
        softmax as aiayn does (CTranslate2's search scores leave out the suppressed tokens'
        probability); without it the scores differ by that mass, about 1e-3 a token for a
        model trained with label smoothing.
        """
        if beam < 1 or not 1 <= nbest <= beam:
            raise ConfigError(f"need beam >= 1 and 1 <= nbest <= beam, got beam={beam}, nbest={nbest}")
        if batch_tokens < 1:
            raise ConfigError(f"batch_tokens must be >= 1, got {batch_tokens}")
        results: list[list[Hypothesis]] = [[Hypothesis([], 0.0)] for _ in sentences]
        todo = [i for i, text in enumerate(sentences) if text.strip()]
        lines = [line_offset + i + 1 for i in todo]
        encoded = self._encode([sentences[i] for i in todo], lines, on_long_line)
        by_length: dict[int, list[int]] = {}
        for j, ids in enumerate(encoded):
            by_length.setdefault(len(ids) + 1, []).append(j)  # + 1: the <eos> CTranslate2 appends
        for length, group in sorted(by_length.items(), reverse=True):
            limit = max(1, min(length + max_len_extra, self.config.max_len))
            per_batch = max(1, batch_tokens // length)
            for start in range(0, len(group), per_batch):
                batch = group[start : start + per_batch]
                source = [[self._source_tokens[i] for i in encoded[j]] for j in batch]
                nbests = self._search(source, beam, alpha, nbest, limit, exact_scores)
                for j, hyps in zip(batch, nbests, strict=True):
                    results[todo[j]] = hyps
        return results

    def _search(
        self, source: list[list[str]], beam: int, alpha: float, nbest: int, limit: int, exact: bool
    ) -> list[list[Hypothesis]]:
        """One CTranslate2 search; hypotheses ranked here with the GNMT penalty (beam > 1)."""
        outputs = self.engine.translate_batch(
            source,
            beam_size=beam,
            num_hypotheses=beam,
            length_penalty=0.0,
            max_decoding_length=limit,
            min_decoding_length=0,  # CTranslate2's default (1) forbids <eos> first; aiayn does not
            max_input_length=0,
            suppress_sequences=self._forbidden or None,
            end_token=[self.config.eos_id],
            return_end_token=True,
            return_scores=True,
        )
        found = [
            [(self._target_id_list(t), raw) for t, raw in zip(out.hypotheses, out.scores, strict=True)]
            for out in outputs
        ]
        ranked = [self._rank(hyps, beam, alpha)[:nbest] for hyps in found]
        if exact:
            ids = [[ids for ids, _ in hyps] for hyps in ranked]
            raw = [{tuple(i): log_p for i, log_p in hyps} for hyps in found]
            sources = [src for src, hyps in zip(source, ids, strict=True) for _ in hyps]
            fallback = [raw_of[tuple(i)] for raw_of, hyps in zip(raw, ids, strict=True) for i in hyps]
            log_probs = iter(self._log_probs(sources, [i for hyps in ids for i in hyps], fallback))
            ranked = [self._rank([(i, next(log_probs)) for i in hyps], beam, alpha) for hyps in ids]
        eos = self.config.eos_id
        return [
            [Hypothesis(ids[:-1] if ids and ids[-1] == eos else ids, score) for ids, score in hyps]
            for hyps in ranked
        ]

    @staticmethod
    def _rank(
        hypotheses: list[tuple[list[int], float]], beam: int, alpha: float
    ) -> list[tuple[list[int], float]]:
        """(ids, log P) -> (ids, score), best first; score = log P / lp(|Y|) for beam search
        (|Y| = len(ids): the generated tokens, `<eos>` included when reached)."""

        def score(ids: list[int], log_p: float) -> float:
            return log_p if beam == 1 else log_p / float(length_penalty(len(ids), alpha))

        return sorted(((ids, score(ids, log_p)) for ids, log_p in hypotheses), key=lambda pair: -pair[1])

    def _log_probs(
        self, sources: list[list[str]], outputs: list[list[int]], search_scores: list[float]
    ) -> list[float]:
        """log P(output | source) under the full softmax, by forced decoding; an output that
        ends with `<eos>` counts it, one cut at the length limit does not. An output cut at the
        model's `max_len` cannot be forced (scoring it would need one position more than the
        table has): it keeps its `search_scores` entry, the search's own log-probability."""
        if not outputs:
            return []
        eos = self.config.eos_id
        ended = [bool(ids) and ids[-1] == eos for ids in outputs]
        forced = [end or len(ids) < self.config.max_len for ids, end in zip(outputs, ended, strict=True)]
        targets = [
            [self._target_tokens[i] for i in (ids[:-1] if end else ids)]
            for ids, end, force in zip(outputs, ended, forced, strict=True)
            if force
        ]
        kept = [source for source, force in zip(sources, forced, strict=True) if force]
        scored = iter(self.engine.score_batch(kept, targets, max_input_length=0) if kept else [])
        log_probs = []
        for end, force, search_score in zip(ended, forced, search_scores, strict=True):
            if not force:
                log_probs.append(float(search_score))
                continue
            result = next(scored)  # score_batch appends <eos> itself
            log_probs.append(float(sum(result.log_probs if end else result.log_probs[:-1])))
        return log_probs

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
        """Translate sentences; arguments and results as `Translator.translate` (scores, shown
        with nbest > 1, are exact: see `translate_hypotheses`)."""
        hypotheses = self.translate_hypotheses(
            sentences, beam, alpha, max_len_extra, nbest, batch_tokens, line_offset, on_long_line,
            exact_scores=nbest > 1,
        )
        target = self.tokenizers.target
        if nbest == 1:
            return target.decode_batch([hyps[0].tokens for hyps in hypotheses])
        texts = iter(target.decode_batch([h.tokens for hyps in hypotheses for h in hyps]))
        return [[Translation(next(texts), h.score) for h in hyps] for hyps in hypotheses]

    def score(
        self, sources: Sequence[str], targets: Sequence[str], batch_tokens: int = DEFAULT_BATCH_TOKENS
    ) -> list[float]:
        """log P(target | source) (natural log, `<eos>` included) of each pair."""
        if len(sources) != len(targets):
            raise ConfigError(f"{len(sources)} sources but {len(targets)} targets")
        if not sources:
            return []
        lines = range(1, len(sources) + 1)
        src = [[self._source_tokens[i] for i in ids] for ids in self._encode(sources, lines, "truncate")]
        tgt_limit = self.config.max_len - 1
        tgt = [ids[:tgt_limit] for ids in self.tokenizers.target.encode_batch(targets)]
        results = self.engine.score_batch(
            src, [[self._target_tokens[i] for i in ids] for ids in tgt],
            max_batch_size=batch_tokens, batch_type="tokens", max_input_length=0,
        )
        return [float(sum(r.log_probs)) for r in results]


class CTranslate2Generator:
    """aiayn's language-model generation on a CTranslate2 language-model export.

    Arguments as `CTranslate2Translator`.
    """

    def __init__(
        self, directory: str | Path, device: str = "cpu", compute_type: str = "default", threads: int = 0
    ) -> None:
        self._ctranslate2 = ctranslate2 = require("ctranslate2", "running a CTranslate2 export")
        directory = Path(directory)
        self.config = config = _read_settings(directory, "decoder_only")
        self.tokenizer = load_tokenizers(directory, config, "decoder_only").target
        self._tokens = vocabulary(self.tokenizer, config.tgt_vocab_size, "language model")
        self._ids = {token: i for i, token in enumerate(self._tokens)}
        try:
            self.engine = ctranslate2.Generator(
                str(directory), compute_type=compute_type, intra_threads=threads, **_device_arguments(device)
            )
        except (RuntimeError, ValueError) as error:
            raise CheckpointError(f"{directory}: CTranslate2 cannot load it ({error})") from None

    def logits(self, ids: Sequence[int]) -> torch.Tensor:
        """(T, V) next-token logits for the (T,) token ids `ids`, as `DecoderOnlyLM` gives them."""
        output = self.engine.forward_batch([[int(i) for i in ids]])  # a (1, T, V) StorageView
        if output.device != "cpu":
            output = output.to_device(self._ctranslate2.Device.cpu)
        return torch.from_numpy(np.array(output, dtype=np.float32))[0]

    def generate_stream(
        self,
        prompt_ids: Sequence[int],
        max_new_tokens: int = 100,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        stop_ids: Iterable[int] | None = None,
        context: int | None = None,
    ) -> Iterator[int]:
        """Yield up to `max_new_tokens` ids, as `aiayn.lm.generate.generate_stream` does.

        Greedy (temperature 0) gives the same tokens as aiayn; sampling draws from the same
        distribution with CTranslate2's own random numbers. When the context fills the model's
        positions, generation goes on from the last half of it, as aiayn's does.
        """
        if max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        context = min(context or context_length(self), self.config.max_len)  # type: ignore[arg-type]
        if context < 2:
            raise ValueError(f"the context must hold at least 2 positions, got {context}")
        stops = sorted(set(stop_ids) if stop_ids is not None else {self.config.eos_id})
        self._ctranslate2.set_random_seed(random.SystemRandom().randrange(2**31) if seed is None else seed)
        sampling: dict[str, Any] = {"sampling_topk": 1}  # temperature 0: greedy
        if temperature > 0:
            sampling = {"sampling_topk": top_k or 0, "sampling_topp": top_p or 1.0,
                        "sampling_temperature": temperature}
        history = [int(i) for i in prompt_ids] or [self.config.bos_id]
        keep, remaining = context, max_new_tokens
        while remaining > 0:
            prompt = history[-keep:]
            room = context - len(prompt) + 1  # the last token drawn is never fed back
            count = min(remaining, room)
            steps = self.engine.generate_tokens(
                [self._tokens[i] for i in prompt], max_length=count, end_token=stops, **sampling
            )
            for step in steps:
                token = int(step.token_id)
                yield token
                history.append(token)
                remaining -= 1
                if token in stops:
                    return
            keep = context // 2
