"""`aiayn train`: the translation task of the run skeleton (see `aiayn.training.run`).

Sentence pairs (a built-in task, Multi30k or your files; `aiayn.translation.data`) ->
source and target tokenizers -> the encoder-decoder `Transformer` -> label-smoothed loss over
target tokens (Sec. 5.4). Validation adds BLEU and exact match (greedy, or `train.bleu_beam`)
on up to `train.bleu_max_sentences` validation pairs; at the end the best model translates
the test split with beam search (`train.test_beam`, `train.test_alpha`), and `results.json`
holds its BLEU, chrF and exact match with a few examples.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor, nn

from aiayn.data.batching import Batch
from aiayn.data.pair_store import tokenizer_digest
from aiayn.data.special_tokens import SpecialTokens
from aiayn.data.tokenizer import Names, TokenizerPair
from aiayn.inference.interface import DEFAULT_BATCH_TOKENS
from aiayn.inference.torch_translator import TorchTranslator
from aiayn.model import ModelConfig, Transformer
from aiayn.training.auto_rules import Choice, CorpusProfile
from aiayn.training.auto_settings import profile_corpus
from aiayn.training.config import RunConfig
from aiayn.training.loss import translation_loss
from aiayn.training.state import TrainState
from aiayn.training.task import Metric, Task, preset_config
from aiayn.translation.data import PreparedData, check_files, prepare_data, split_validation, train_sources
from aiayn.translation.evaluate import evaluate_translation
from aiayn.translation.settings import TranslationSettings
from aiayn.translation.validation import capped_validation_metrics

BLEU = Metric("bleu", higher_is_better=True)
EXACT_MATCH = Metric("exact_match", higher_is_better=True)
NUM_EXAMPLES = 8  # test translations shown in results.json


def build_model_config(config: RunConfig, tokenizers: TokenizerPair) -> ModelConfig:
    """The preset named in the config, with vocabulary sizes and special ids from the tokenizers."""
    if tokenizers.is_joint:  # one vocabulary: shared embeddings and tied output (Sec. 3.4)
        vocab = {"vocab_size": tokenizers.source.vocab_size}
    else:
        vocab = {
            "src_vocab_size": tokenizers.source.vocab_size,
            "tgt_vocab_size": tokenizers.target.vocab_size,
        }
    vocab |= tokenizers.specials.as_dict()
    defaults = {
        "max_len": max(256, config.data.max_sentence_tokens + 2),  # + <bos>/<eos>
        "extra": {"task": config.data.task},
    }
    return preset_config(config, fixed=vocab, defaults=defaults)


def translation_metrics(
    model: Transformer,
    tokenizers: TokenizerPair,
    pairs: list[tuple[str, str]],
    beam: int,
    alpha: float = 0.6,
) -> dict[str, Any]:
    """Translate the sources of `pairs`; BLEU, chrF and exact match against the targets.

    This decodes inside the training process, beside what training holds: a batch has
    `DEFAULT_BATCH_TOKENS / beam` source tokens, so that beam search's rows (and its caches)
    stay as many as greedy search's, whatever the beam.
    """
    references = [t for _, t in pairs]
    evaluation = evaluate_translation(
        TorchTranslator(model, tokenizers),
        [s for s, _ in pairs],
        references,
        beam=beam,
        alpha=alpha,
        batch_tokens=max(1, DEFAULT_BATCH_TOKENS // beam),
    )
    matches = sum(h == r for h, r in zip(evaluation.hypotheses, references, strict=True))
    return evaluation.to_dict() | {
        "signature": evaluation.bleu.signature,
        "exact_match": 100.0 * matches / max(len(pairs), 1),
        "hypotheses": evaluation.hypotheses,
    }


class TranslationTask(Task[TokenizerPair, PreparedData]):
    """Sentence pairs -> `Transformer`; validated by loss, BLEU and exact match."""

    command = "aiayn train"
    data_settings = TranslationSettings
    model_type = Transformer.model_type
    metrics = (BLEU, EXACT_MATCH)
    uses_store = True
    measures_corpus = True
    implementations = ("engine", "paper")  # the paper's: `aiayn.translation.paper_adapter.paper_task`

    def check_config(self, config: RunConfig) -> None:
        """`data.train`'s corpora are well formed (their files are checked when read)."""
        if config.data.task == "files" and config.data.train is not None:
            train_sources(config.data)

    def check_data(self, config: RunConfig) -> None:
        """Task 'files': every file of every split read once (`aiayn.translation.data.check_files`)."""
        check_files(config.data)

    def split_validation(self, config: RunConfig, run_dir: Path) -> dict[str, Any] | None:
        """Task 'files' without validation files: a seeded share of the training pairs, saved in
        `run_dir` and removed from training (`aiayn.translation.data.split_validation`)."""
        return split_validation(config.data, run_dir)

    def data_choices(self, data: PreparedData) -> tuple[Choice, ...]:
        return data.choices

    def corpus_profile(self, data: PreparedData) -> CorpusProfile | None:
        """The training pairs' token lengths (from the store) and the validation pairs' count."""
        if data.store is None:
            return None
        lengths = data.store.lengths
        return profile_corpus(lengths["src"], lengths["tgt"], len(data.valid_pairs))

    def prepare_data(
        self,
        data: TranslationSettings,
        tokenizer: TokenizerPair | None,
        *,
        cache_dir: Path | None = None,
        create: bool = True,
    ) -> PreparedData:
        return prepare_data(data, tokenizer, cache_dir=cache_dir, create=create)

    def tokenizer(self, data: PreparedData) -> TokenizerPair:
        return data.tokenizers

    def tokenizer_digest(self, data: PreparedData) -> str:
        return tokenizer_digest(data.tokenizers)

    def load_tokenizer(self, directory: Path, names: Names) -> TokenizerPair:
        return TokenizerPair.load(directory, names=names)

    def save_tokenizer(self, tokenizer: TokenizerPair, directory: Path) -> None:
        tokenizer.save(directory)

    def model_tokenizer(self, directory: Path, specials: SpecialTokens) -> TokenizerPair:
        return TokenizerPair.load(directory, specials)

    def build_model(self, config: RunConfig, data: PreparedData) -> Transformer:
        """A fresh encoder-decoder for the data's vocabularies."""
        return Transformer(build_model_config(config, data.tokenizers))

    def loss(self, model: nn.Module, batch: Batch, smoothing: float) -> tuple[Tensor, int]:
        return translation_loss(model, batch, smoothing)

    def validation_metrics(
        self, model: nn.Module, config: RunConfig, data: PreparedData, allowance_s: float | None = None
    ) -> dict[str, float]:
        """BLEU and exact match on up to `train.bleu_max_sentences` validation pairs, decoded
        within the length and time caps (`aiayn.translation.validation`)."""
        pairs = data.valid_pairs[: config.train.bleu_max_sentences]
        if not pairs:
            return {}
        return capped_validation_metrics(
            TorchTranslator(model, data.tokenizers), pairs, beam=config.train.bleu_beam,
            max_len_extra=config.train.bleu_max_len_extra, allowance_s=allowance_s,
            batch_tokens=max(1, DEFAULT_BATCH_TOKENS // config.train.bleu_beam),
        )

    def final_results(
        self, best: nn.Module, config: RunConfig, data: PreparedData, state: TrainState
    ) -> dict[str, Any]:
        """The best model on the test split (beam search): scores and a few examples. Without a
        test split, on the validation pairs (which chose the best checkpoint), saying so."""
        heldout, split = (data.test_pairs, "test") if data.test_pairs else (data.valid_pairs, "validation")
        pairs = heldout[: config.train.test_max_sentences]
        if not pairs:  # no held-out pairs, or train.test_max_sentences: 0
            return {}
        metrics = translation_metrics(
            best,
            data.tokenizers,
            pairs,
            beam=config.train.test_beam,
            alpha=config.train.test_alpha,
        )
        hypotheses = metrics.pop("hypotheses")
        shown = zip(heldout[:NUM_EXAMPLES], hypotheses[:NUM_EXAMPLES], strict=False)
        examples = [{"source": s, "reference": r, "output": h} for (s, r), h in shown]
        return {"test": metrics | {"split": split}, "examples": examples}


TRANSLATION_TASK = TranslationTask()
