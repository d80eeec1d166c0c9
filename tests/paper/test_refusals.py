"""`aiayn.paper.load` and `train.implementation=paper` refuse, in one line naming the setting,
the configs the paper does not have."""

from __future__ import annotations

import pytest

from aiayn import formats, paper
from aiayn.core.errors import CheckpointError, ConfigError
from aiayn.lm.run import LM_TASK
from aiayn.model import ModelConfig, Transformer
from aiayn.model.decoder_only import DecoderOnlyLM
from aiayn.model.encoder_only import EncoderOnly
from aiayn.training.run import check_implementation
from aiayn.translation import TRANSLATION_TASK
from aiayn.translation.paper_adapter import paper_model, paper_task

REFUSED = {
    "pre-LN": (lambda c: Transformer(c), dict(norm_first=True), "norm_first=True"),
    "swish": (lambda c: Transformer(c), dict(activation="swish"), "activation='swish'"),
    "gelu": (lambda c: Transformer(c), dict(activation="gelu"), "activation='gelu'"),
    "output bias": (lambda c: Transformer(c), dict(output_bias=True), "output_bias=True"),
    "unscaled embeddings": (lambda c: Transformer(c), dict(scale_embedding=False), "scale_embedding=False"),
    "attention dropout": (lambda c: Transformer(c), dict(attention_dropout=0.1), "attention_dropout > 0"),
    "decoder-only": (lambda c: DecoderOnlyLM(c), {}, "model_type='decoder_only'"),
    "encoder-only": (lambda c: EncoderOnly(c, num_classes=3), {}, "model_type='encoder_only'"),
}  # fmt: skip


@pytest.mark.parametrize("name", REFUSED)
def test_load_refuses_what_the_paper_does_not_have(name: str, tmp_path) -> None:
    build, overrides, setting = REFUSED[name]
    formats.save_pretrained(build(ModelConfig.tiny(vocab_size=20, max_len=16, **overrides)), tmp_path)
    with pytest.raises(CheckpointError) as error:
        paper.load(tmp_path)
    message = str(error.value)
    assert setting in message and "aiayn.paper does not implement" in message
    assert str(tmp_path) in message and "\n" not in message


TRAINING_REFUSED = [dict(norm_first=True), dict(activation="gelu"), dict(output_bias=True)]


@pytest.mark.parametrize("overrides", TRAINING_REFUSED)
def test_training_refuses_what_the_paper_does_not_have(overrides: dict) -> None:
    with pytest.raises(ConfigError, match=r"^train.implementation=paper: aiayn.paper does not implement"):
        paper_model(ModelConfig.tiny(vocab_size=20, max_len=16, **overrides))


def test_only_translation_trains_on_the_paper() -> None:
    with pytest.raises(ConfigError, match="trains translation models"):
        paper_task(LM_TASK)


def test_a_run_trains_the_implementation_its_task_is() -> None:
    """`aiayn train` picks the paper's task for `train.implementation=paper`; a run given another
    task's implementation, or one its command does not offer, refuses in one line."""
    check_implementation(paper_task(TRANSLATION_TASK), "paper")
    check_implementation(TRANSLATION_TASK, "engine")
    with pytest.raises(ConfigError, match=r"^train.implementation=paper: aiayn lm train has no paper impl"):
        check_implementation(LM_TASK, "paper")
    with pytest.raises(ConfigError, match=r"^train.implementation=paper, but TranslationTask trains with"):
        check_implementation(TRANSLATION_TASK, "paper")
    with pytest.raises(ConfigError, match=r"^train.implementation=engine, but PaperTranslationTask"):
        check_implementation(paper_task(TRANSLATION_TASK), "engine")

