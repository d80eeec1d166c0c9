"""The CTranslate2 runtime: a directory written by `aiayn export ctranslate2` behind aiayn's
`Translator` and `Generator` interfaces (`aiayn.inference.interface`).

    translator = aiayn.load("runs/multi30k-ct2")   # recognised by its model.bin
    translator.translate(["Ein Hund läuft."], beam=4)

Decoding follows aiayn's conventions (see `aiayn.decoding`) as closely as CTranslate2 allows:
the source ends with `<eos>`, the decoder starts from `<bos>`, `<pad>` and `<bos>` are never
generated, and each sentence may generate (source length + max_len_extra) tokens including
`<eos>`, capped by the model's `max_len` (sentences are batched by source length so that each
gets its own limit). Two differences remain:

- CTranslate2 removes the forbidden tokens before its softmax, aiayn after (its scores are
  log-probabilities under the full softmax, which label smoothing makes differ by ~1e-3 a
  token). The search runs on CTranslate2's numbers; the hypotheses it returns are scored
  again by forced decoding wherever scores are shown (`translate_nbest`), so they are aiayn's.
- Length penalty: CTranslate2 divides by |Y|^alpha. Here CTranslate2 searches with
  raw log-probabilities and returns `beam` finished hypotheses, which are then ranked with
  aiayn's GNMT penalty ((5 + |Y|) / 6)^alpha. Its search stops once the best beam has ended
  and `beam` hypotheses are finished, where aiayn's stops when no open beam can still win
  under the penalty; with alpha = 0 both return the same best hypothesis.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from aiayn.core.errors import CheckpointError, ConfigError
from aiayn.core.optional import require
from aiayn.decoding.common import Hypothesis, length_penalty, never_generated, output_length_limit
from aiayn.decoding.constraints import SentenceConstraints
from aiayn.decoding.controls import NO_CONTROLS, Controls
from aiayn.decoding.sampling import Sampling
from aiayn.formats import load_tokenizers
from aiayn.formats.ctranslate2_format import read_export, vocabulary
from aiayn.inference.base import GeneratorBase, TranslatorBase
from aiayn.model.config import ModelConfig


def _sampling_arguments(controls: Controls) -> dict[str, Any]:
    """CTranslate2's sampling arguments for `controls` (none unless `sample`): top-k 0 draws
    from the whole vocabulary, temperature 0 is the arg-max."""
    if not controls.sample:
        return {}
    if controls.temperature == 0:
        return {"sampling_topk": 1}
    return {
        "sampling_topk": controls.top_k or 0,
        "sampling_topp": controls.top_p if controls.top_p is not None else 1.0,
        "sampling_temperature": controls.temperature,
    }


def _export_config(directory: Path, expected_type: str) -> ModelConfig:
    model_type, config = read_export(directory)
    if model_type != expected_type:
        raise CheckpointError(f"{directory} holds a {model_type!r} model, not a {expected_type!r}")
    return config


def device_arguments(device: str) -> dict[str, Any]:
    """CTranslate2's device and device_index for 'cpu', 'cuda', 'cuda:1' or 'auto'."""
    name, _, index = device.partition(":")
    if name not in ("cpu", "cuda", "auto") or (index and not index.isdigit()):
        raise ConfigError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {device!r}")
    return {"device": name, "device_index": int(index or 0)}


def _open_runtime(kind: Any, directory: Path, device: str, compute_type: str, threads: int) -> Any:
    """A `ctranslate2.Translator` or `ctranslate2.Generator` (`kind`) on `directory`."""
    try:
        return kind(
            str(directory), compute_type=compute_type, intra_threads=threads, **device_arguments(device)
        )
    except (RuntimeError, ValueError) as error:
        raise CheckpointError(f"{directory}: CTranslate2 cannot load it ({error})") from None


class CTranslate2Translator(TranslatorBase):
    """aiayn's `Translator` interface on a CTranslate2 translation export.

    Args:
        directory: written by `aiayn export ctranslate2` from a translation model.
        device: 'cpu', 'cuda', 'cuda:N' or 'auto'.
        compute_type: CTranslate2's compute type ('default': the type the weights were saved in).
        threads: intra-op threads (0: CTranslate2's default).
    """

    engine = "ctranslate2"

    def __init__(
        self, directory: str | Path, device: str = "cpu", compute_type: str = "default", threads: int = 0
    ) -> None:
        ctranslate2 = require("ctranslate2", "running a CTranslate2 export")
        directory = Path(directory)
        config = _export_config(directory, "transformer")
        super().__init__(config, load_tokenizers(directory, config, "transformer"), directory)
        self._source_tokens = vocabulary(self.tokenizers.source, config.src_vocab_size, "source")
        target_tokens = vocabulary(self.tokenizers.target, config.tgt_vocab_size, "target")
        self._target_tokens = target_tokens
        self._target_ids = {token: i for i, token in enumerate(target_tokens)}
        never = never_generated(config.pad_id, config.bos_id, config.eos_id)
        self._forbidden = [[target_tokens[i]] for i in never]
        self.runtime = _open_runtime(ctranslate2.Translator, directory, device, compute_type, threads)
        self._opening = (ctranslate2.Translator, directory, device, compute_type, threads)
        self.device = f"{self.runtime.device} (CTranslate2, {compute_type})"

    def _seeded_runtime(self, seed: int | None) -> Any:
        """A fresh `ctranslate2.Translator` whose sampling starts from `seed`: CTranslate2 seeds
        each worker thread's generator once, from the global seed, at its first draw, so only
        a new runtime (new threads) makes a seed reproducible."""
        ctranslate2 = require("ctranslate2", "sampling")
        ctranslate2.set_random_seed(seed if seed is not None else random.SystemRandom().randrange(2**31))
        return _open_runtime(*self._opening)

    def _search(
        self, sources: list[list[int]], beam: int, alpha: float, max_len_extra: int, nbest: int,
        batch_tokens: int, exact_scores: bool, controls: Controls = NO_CONTROLS,
        prefixes: list[list[int]] | None = None, constraints: list[SentenceConstraints] | None = None,
    ) -> list[list[Hypothesis]]:
        """One CTranslate2 call per group of sources of one length (each gets its own limit)
        and one set of excluded sequences (CTranslate2's `suppress_sequences` is per call).

        `exact_scores`: score the chosen hypotheses again by forced decoding, under the full
        softmax as aiayn does (CTranslate2's search scores leave out the suppressed tokens'
        probability, about 1e-3 a token for a model trained with label smoothing).
        """
        results: list[list[Hypothesis]] = [[] for _ in sources]
        runtime = self._seeded_runtime(controls.seed) if controls.sample else self.runtime
        by_length: dict[tuple[int, tuple], list[int]] = {}
        for j, ids in enumerate(sources):
            excluded = () if constraints is None else constraints[j].exclude
            by_length.setdefault((len(ids) + 1, excluded), []).append(j)  # + 1: the <eos> CTranslate2 appends
        for (length, excluded), group in sorted(by_length.items(), key=lambda kv: -kv[0][0]):
            suppress = [[self._target_tokens[i] for i in sequence] for sequence in excluded]
            limit = output_length_limit(
                length, max_len_extra, None, self.config.max_len, controls.max_output_ratio
            )
            per_batch = max(1, batch_tokens // length)
            for start in range(0, len(group), per_batch):
                batch = group[start : start + per_batch]
                source = [[self._source_tokens[i] for i in sources[j]] for j in batch]
                prefix = None if prefixes is None else [
                    [self._target_tokens[i] for i in prefixes[j]] or None for j in batch
                ]
                nbests = self._search_batch(
                    runtime, source, beam, alpha, nbest, limit, exact_scores, controls, prefix, suppress
                )
                for j, hyps in zip(batch, nbests, strict=True):
                    results[j] = hyps
        return results

    def _search_batch(
        self, runtime: Any, source: list[list[str]], beam: int, alpha: float, nbest: int, limit: int,
        exact: bool, controls: Controls = NO_CONTROLS, prefix: list[list[str] | None] | None = None,
        suppress: list[list[str]] | None = None,
    ) -> list[list[Hypothesis]]:
        """One CTranslate2 search; hypotheses ranked here with the GNMT penalty (beam > 1)."""
        beam = 1 if controls.sample else beam
        outputs = runtime.translate_batch(
            source,
            prefix,
            beam_size=beam,
            num_hypotheses=beam,
            no_repeat_ngram_size=controls.no_repeat_ngram_size,
            repetition_penalty=controls.repetition_penalty,
            **_sampling_arguments(controls),
            length_penalty=0.0,
            max_decoding_length=limit,
            min_decoding_length=0,  # CTranslate2's default (1) forbids <eos> first; aiayn does not
            max_input_length=0,
            suppress_sequences=(self._forbidden + (suppress or [])) or None,
            end_token=[self.config.eos_id],
            return_end_token=True,
            return_scores=True,
        )
        found = [
            [([self._target_ids[token] for token in tokens], raw)
             for tokens, raw in zip(out.hypotheses, out.scores, strict=True)]
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
        scored = iter(self.runtime.score_batch(kept, targets, max_input_length=0) if kept else [])
        log_probs = []
        for end, force, search_score in zip(ended, forced, search_scores, strict=True):
            if not force:
                log_probs.append(float(search_score))
                continue
            result = next(scored)  # score_batch appends <eos> itself
            log_probs.append(float(sum(result.log_probs if end else result.log_probs[:-1])))
        return log_probs

    def _token_log_probs(
        self, sources: list[list[int]], targets: list[list[int]], batch_tokens: int
    ) -> list[list[float]]:
        """CTranslate2's own per-token log-probabilities (`score_batch`, `<eos>` last). An output
        that search cut at the model's max_len is scored on the tokens it can read back: all but
        its last, and no `<eos>` step."""
        limit = self.config.max_len - 1  # score_batch appends <eos> and needs its position
        results = self.runtime.score_batch(
            [[self._source_tokens[i] for i in ids] for ids in sources],
            [[self._target_tokens[i] for i in ids[:limit]] for ids in targets],
            max_batch_size=batch_tokens, batch_type="tokens", max_input_length=0,
        )
        return [
            [float(x) for x in r.log_probs][: limit if len(ids) > limit else None]
            for r, ids in zip(results, targets, strict=True)
        ]

    def _check_constraints(self, include: bool, exclude: bool, beam: int, controls: Controls) -> None:
        if include:
            raise ConfigError(
                "phrases to include (include, --constraints include, --glossary) are not available with "
                "a CTranslate2 model: its search has no constrained beam (use the aiayn model directory)"
            )

    def check_alignments(self) -> None:
        raise ConfigError(
            "alignments are not available with a CTranslate2 model (translate with the aiayn model "
            "directory for them)"
        )


class CTranslate2Generator(GeneratorBase):
    """aiayn's `Generator` interface on a CTranslate2 language-model export.

    Arguments as `CTranslate2Translator`'s. Greedy (temperature 0) gives the same tokens as
    aiayn; sampling draws from the same distribution with CTranslate2's own random numbers.
    """

    engine = "ctranslate2"

    def __init__(
        self, directory: str | Path, device: str = "cpu", compute_type: str = "default", threads: int = 0
    ) -> None:
        self._ctranslate2 = ctranslate2 = require("ctranslate2", "running a CTranslate2 export")
        directory = Path(directory)
        config = _export_config(directory, "decoder_only")
        super().__init__(config, load_tokenizers(directory, config, "decoder_only").target, directory)
        self._tokens = vocabulary(self.tokenizer, config.tgt_vocab_size, "language model")
        self.runtime = _open_runtime(ctranslate2.Generator, directory, device, compute_type, threads)
        self.device = f"{self.runtime.device} (CTranslate2, {compute_type})"

    def logits(self, ids: Sequence[int]) -> torch.Tensor:
        """(T, V) next-token logits for the (T,) token ids `ids`, as `DecoderOnlyLM` gives them."""
        output = self.runtime.forward_batch([[int(i) for i in ids]])  # a (1, T, V) StorageView
        if output.device != "cpu":
            output = output.to_device(self._ctranslate2.Device.cpu)
        return torch.from_numpy(np.array(output, dtype=np.float32))[0]

    def _round(
        self, prompt_ids: list[int], count: int, sampling: Sampling, seed: int, stop_ids: set[int]
    ) -> Iterator[int]:
        self._ctranslate2.set_random_seed(seed % 2**31)
        options: dict[str, Any] = {"sampling_topk": 1}  # temperature 0: greedy
        if sampling.temperature > 0:
            options = {"sampling_topk": sampling.top_k or 0, "sampling_topp": sampling.top_p or 1.0,
                       "sampling_temperature": sampling.temperature}
        steps = self.runtime.generate_tokens(
            [self._tokens[i] for i in prompt_ids], max_length=count, end_token=sorted(stop_ids), **options
        )
        return (int(step.token_id) for step in steps)
