"""`train.implementation: paper`: translation training on `aiayn.paper` instead of the engine.

The run is the ordinary one (`aiayn.training.run`, the `Trainer`); only the task's model, loss
and decoding change (`PaperTranslationTask`, which `aiayn train` runs through `paper_task`):

- the model is `PaperModel`, an `aiayn.paper.Transformer` whose state dict carries the
  engine's names (the fused `in_proj` of each attention, `aiayn.paper`'s module docstring), so
  that checkpoints, resumption, averaging and the saved model directory are the engine's own:
  `aiayn.load` opens what it writes; it starts from the engine's initialisation
  (`aiayn.model.initialization`) for the same seed;
- the loss is `aiayn.paper.label_smoothed_loss` over the paper model's log-probabilities;
- validation BLEU and exact match, and the final test, decode with `aiayn.paper.greedy_decode`
  (`PaperTranslator`): the paper module has no beam search, so `train.test_beam` does not apply
  (the results say `"decoding": "greedy"`, and the log says so).
"""

from __future__ import annotations

import logging
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn import paper
from aiayn.core.errors import ConfigError
from aiayn.core.eval_mode import eval_mode
from aiayn.data.batching import Batch
from aiayn.data.tokenizer import TokenizerPair
from aiayn.decoding.common import Hypothesis
from aiayn.decoding.controls import NO_CONTROLS, Controls
from aiayn.inference.base import TorchBackend, TranslatorBase
from aiayn.inference.torch_translator import length_batches, pad_batch
from aiayn.model import ModelConfig, Transformer
from aiayn.training.config import RunConfig
from aiayn.training.state import TrainState
from aiayn.training.task import Task
from aiayn.translation.data import PreparedData
from aiayn.translation.evaluate import evaluate_translation
from aiayn.translation.task import NUM_EXAMPLES, TranslationTask, build_model_config
from aiayn.translation.validation import capped_validation_metrics

log = logging.getLogger(__name__)


class PaperModel(paper.Transformer):
    """`aiayn.paper.Transformer` with the engine's state-dict names and `model_type`, so that
    `aiayn.formats.save_pretrained` writes it as the engine's model.

    `state_dict()` stacks W^Q, W^K, W^V into `in_proj` (`aiayn.paper.engine_state_dict`);
    `load_state_dict` slices them apart again (`aiayn.paper.paper_state_dict`).
    """

    model_type = Transformer.model_type

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(**paper.transformer_arguments(config))
        self.config = config

    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        return paper.engine_state_dict(super().state_dict(*args, **kwargs))

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        return super().load_state_dict(paper.paper_state_dict(dict(state_dict)), strict=strict, assign=assign)


def paper_model(config: ModelConfig) -> PaperModel:
    """A `PaperModel` for `config`, initialised as the engine initialises its `Transformer`.

    A setting `aiayn.paper` does not implement is a `ConfigError` naming it."""
    try:
        model = PaperModel(config)
    except ValueError as error:
        raise ConfigError(f"train.implementation=paper: {error}") from None
    model.load_state_dict(Transformer(config).state_dict())
    return model


def paper_loss(model: nn.Module, batch: Batch, smoothing: float) -> tuple[Tensor, int]:
    """The summed label-smoothed loss of a translation batch (Sec. 5.4) on the paper model."""
    log_probs = F.log_softmax(model(batch.src, batch.tgt_in).float(), dim=-1)  # (B, T, V)
    return paper.label_smoothed_loss(log_probs, batch.labels, smoothing, batch.pad_id), batch.num_targets


class PaperTranslator(TorchBackend, TranslatorBase):
    """The `aiayn.inference.Translator` interface on `aiayn.paper.greedy_decode` (beam 1, no
    decoding controls or prefixes: the paper module has none)."""

    def __init__(self, model: PaperModel, tokenizers: TokenizerPair) -> None:
        self._hold(model, PaperModel, "PaperTranslator needs a PaperModel (an aiayn.paper.Transformer)")
        super().__init__(model.config, tokenizers, None)

    def _search(
        self, sources: list[list[int]], beam: int, alpha: float, max_len_extra: int, nbest: int,
        batch_tokens: int, exact_scores: bool, controls: Controls = NO_CONTROLS,
        prefixes: list[list[int]] | None = None,
    ) -> list[list[Hypothesis]]:
        if beam != 1 or nbest != 1 or controls != NO_CONTROLS or prefixes is not None:
            raise ConfigError(
                "aiayn.paper decodes greedily only: beam 1, one hypothesis, no controls or prefix"
            )
        eos_id = self.config.eos_id
        with_eos = [[*ids, eos_id] for ids in sources]
        outputs: list[list[int]] = [[] for _ in sources]
        for batch in length_batches([len(s) for s in with_eos], batch_tokens):
            src = pad_batch([with_eos[j] for j in batch], self.config.pad_id, self.device)  # (B, S)
            with eval_mode(self.model):
                decoded = paper.greedy_decode(self.model, src, max_len_extra)
            for j, tokens in zip(batch, decoded, strict=True):
                outputs[j] = tokens
        # A hypothesis cut at its length limit has no <eos> to score (`aiayn.decoding.common`).
        limits = [min(len(s) + max_len_extra, self.config.max_len) for s in with_eos]
        ended = [len(tokens) < limit for tokens, limit in zip(outputs, limits, strict=True)]
        scores = self._sequence_scores(sources, outputs, ended, batch_tokens)
        return [[Hypothesis(tokens, score)] for tokens, score in zip(outputs, scores, strict=True)]

    def _score_ids(
        self, sources: list[list[int]], targets: list[list[int]], batch_tokens: int
    ) -> list[float]:
        """log P(target + <eos> | source) by teacher forcing (`aiayn.paper.Transformer.log_probs`)."""
        return self._sequence_scores(sources, targets, [True] * len(targets), batch_tokens)

    def _sequence_scores(
        self, sources: list[list[int]], targets: list[list[int]], ended: list[bool], batch_tokens: int
    ) -> list[float]:
        """log P(target | source), with <eos> after each target where `ended` says so."""
        bos_id, eos_id, pad_id = self.config.bos_id, self.config.eos_id, self.config.pad_id
        labels_of = [[*t, eos_id] if end else t for t, end in zip(targets, ended, strict=True)]
        lengths = [max(len(s) + 1, len(t)) for s, t in zip(sources, labels_of, strict=True)]
        scores = [0.0] * len(sources)
        with eval_mode(self.model), torch.no_grad():
            for batch in length_batches(lengths, batch_tokens):
                src = pad_batch([[*sources[i], eos_id] for i in batch], pad_id, self.device)  # (B, S)
                tgt_in = pad_batch([[bos_id, *labels_of[i][:-1]] for i in batch], pad_id, self.device)
                labels = pad_batch([labels_of[i] for i in batch], pad_id, self.device)  # (B, T)
                picked = self.model.log_probs(src, tgt_in).gather(2, labels[:, :, None]).squeeze(2)
                sums = picked.masked_fill(labels == pad_id, 0.0).sum(dim=1)  # (B,)
                for i, value in zip(batch, sums.tolist(), strict=True):
                    scores[i] = value
        return scores


def greedy_metrics(
    model: PaperModel, tokenizers: TokenizerPair, pairs: list[tuple[str, str]]
) -> dict[str, Any]:
    """BLEU, chrF and exact match of `aiayn.paper.greedy_decode` on `pairs`."""
    references = [t for _, t in pairs]
    translator = PaperTranslator(model, tokenizers)
    evaluation = evaluate_translation(translator, [s for s, _ in pairs], references, beam=1)
    matches = sum(h == r for h, r in zip(evaluation.hypotheses, references, strict=True))
    return evaluation.to_dict() | {
        "signature": evaluation.bleu.signature,
        "exact_match": 100.0 * matches / max(len(pairs), 1),
        "hypotheses": evaluation.hypotheses,
    }


class PaperTranslationTask(TranslationTask):
    """`aiayn train` with `train.implementation: paper` (see the module docstring)."""

    implementation = "paper"

    def check_config(self, config: RunConfig) -> None:
        super().check_config(config)
        if config.train.init_from is not None:
            raise ConfigError(
                "train.implementation=paper trains from fresh weights; leave out train.init_from"
            )
        if config.train.bleu_beam != 1:
            raise ConfigError(
                "train.implementation=paper validates with greedy decoding; set train.bleu_beam=1"
            )

    def build_model(self, config: RunConfig, data: PreparedData) -> PaperModel:  # type: ignore[override]
        return paper_model(build_model_config(config, data.tokenizers))

    def loss(self, model: nn.Module, batch: Batch, smoothing: float) -> tuple[Tensor, int]:
        return paper_loss(model, batch, smoothing)

    def validation_metrics(
        self, model: nn.Module, config: RunConfig, data: PreparedData, allowance_s: float | None = None
    ) -> dict[str, float]:
        """BLEU and exact match of greedy decoding on up to `train.bleu_max_sentences` pairs,
        within the length and time caps (`aiayn.translation.validation`)."""
        pairs = data.valid_pairs[: config.train.bleu_max_sentences]
        if not pairs:
            return {}
        translator = PaperTranslator(model, data.tokenizers)  # type: ignore[arg-type]
        return capped_validation_metrics(
            translator, pairs, beam=1, max_len_extra=config.train.bleu_max_len_extra, allowance_s=allowance_s
        )

    def final_results(
        self, best: nn.Module, config: RunConfig, data: PreparedData, state: TrainState
    ) -> dict[str, Any]:
        """The best model (read back as the engine wrote it, put into `aiayn.paper`'s names) on
        the test split, decoded greedily."""
        pairs = data.test_pairs[: config.train.test_max_sentences]
        if not pairs:
            return {}
        log.info("train.implementation=paper: the test split is decoded greedily (not train.test_beam)")
        model = PaperModel(best.config).to(next(best.parameters()).device)  # type: ignore[arg-type]
        model.load_state_dict(best.state_dict())
        metrics = greedy_metrics(model, data.tokenizers, pairs)
        hypotheses = metrics.pop("hypotheses")
        shown = zip(data.test_pairs[:NUM_EXAMPLES], hypotheses[:NUM_EXAMPLES], strict=False)
        examples = [{"source": s, "reference": r, "output": h} for (s, r), h in shown]
        return {"test": metrics | {"decoding": "greedy", "implementation": "paper"}, "examples": examples}


def paper_task(task: Task[Any, Any]) -> PaperTranslationTask:
    """The paper-trained version of `task`; only translation (`aiayn train`) has one."""
    if not isinstance(task, TranslationTask):
        raise ConfigError(
            f"train.implementation=paper trains translation models (aiayn train), not {task.command}"
        )
    return PaperTranslationTask()

