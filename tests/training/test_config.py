from pathlib import Path

import pytest

from aiayn.core.errors import ConfigError
from aiayn.model import ModelConfig
from aiayn.tasks import apply_overrides, config_from_dict, load_config
from aiayn.training.auto_settings import take_auto_settings
from aiayn.training.config import read_yaml


def test_default_config_is_the_dates_task():
    config = load_config(None)
    assert config.data.task == "dates"
    assert config.train.max_steps is not None or config.train.max_minutes is not None


def test_unknown_key_lists_valid_keys(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("train:\n  max_stepz: 10\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    message = str(error.value)
    assert "train.max_stepz" in message and "max_steps" in message and str(path) in message


def test_unknown_section_and_model_field():
    with pytest.raises(ConfigError, match="valid sections"):
        config_from_dict({"trian": {}})
    with pytest.raises(ConfigError, match="model.d_modle"):
        config_from_dict({"model": {"d_modle": 3}})


def test_dotted_overrides_parse_yaml_values():
    data = apply_overrides({}, ["train.max_steps=200", "train.lr=5e-4", "model.d_model=32"])
    config = config_from_dict(data)
    assert config.train.max_steps == 200 and config.train.lr == pytest.approx(5e-4)
    assert config.model.overrides == {"d_model": 32}


@pytest.mark.parametrize("item", ["train.max_steps", "max_steps=3", "a.b.c=1"])
def test_malformed_override(item):
    with pytest.raises(ConfigError, match="--set"):
        apply_overrides({}, [item])


def test_wrong_type_and_choice():
    with pytest.raises(ConfigError, match="train.max_steps must be int"):
        config_from_dict({"train": {"max_steps": "ten"}})
    with pytest.raises(ConfigError, match="train.precision must be one of"):
        config_from_dict({"train": {"precision": "fp8"}})


def test_config_round_trips_through_yaml(tmp_path, make_config):
    config = make_config()
    path = tmp_path / "c.yaml"
    path.write_text(config.to_yaml())
    assert load_config(path) == config


def test_invalid_yaml_names_file(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("train: [unclosed\n")
    with pytest.raises(ConfigError, match="broken.yaml"):
        load_config(path)


CONFIGS = Path(__file__).resolve().parents[2] / "src" / "aiayn" / "configs"
# `aiayn train` configs; the `aiayn lm` / `aiayn classify` ones are validated by their own tests.
SHIPPED = sorted(
    path for path in CONFIGS.glob("*.yaml")
    if read_yaml(path).get("data", {}).get("task") not in {"text", "brackets", "tsv"}
)


def test_the_translation_configs_are_all_found():
    assert {"dates.yaml", "multi30k_de_en.yaml", "wmt14_en_de_base.yaml"} <= {p.name for p in SHIPPED}


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_shipped_configs_validate(path):
    config = load_config(path)
    take_auto_settings(config)  # settings at `auto` are chosen at start-up; placeholders here
    model = ModelConfig.preset(config.model.preset, src_vocab_size=100, tgt_vocab_size=100,
                               **config.model.overrides)
    assert model.d_model > 0


@pytest.mark.parametrize(("name", "preset", "keep", "steps"), [
    ("wmt14_en_de_base.yaml", "base", 5, 100_000),
    ("wmt14_en_de_big.yaml", "big", 20, 300_000),
])
def test_wmt14_configs_follow_the_paper(name, preset, keep, steps):
    """Sec. 5.1-5.4 and 6.1: 37k joint BPE, ~25k-token batches, warmup 4000, smoothing 0.1, beam 4."""
    config = load_config(CONFIGS / name)
    assert config.model.preset == preset and config.train.keep_checkpoints == keep
    assert config.train.max_steps == steps and config.train.warmup == 4000
    assert config.data.vocab_size == 37000 and config.data.joint_vocab
    assert config.train.batch_tokens == 25000 and config.train.label_smoothing == 0.1
    assert (config.train.test_beam, config.train.test_alpha) == (4, 0.6)
    assert (config.train.adam_beta2, config.train.adam_eps) == (0.98, 1e-9)
    assert config.data.train_src == "wmt14_en_de/train.en" and config.data.task == "files"


def test_data_max_len_is_an_unknown_key(tmp_path):
    """`data.max_len` (the spelling before `data.max_sentence_tokens`, never released) is an
    unknown key like any other, in a file and with --set; `model.max_len` is the positional table."""
    path = tmp_path / "old.yaml"
    path.write_text("data:\n  max_len: 33\nmodel:\n  max_len: 70\n")
    unknown = r"unknown key\(s\) data.max_len; valid keys in data: .*max_sentence_tokens"
    with pytest.raises(ConfigError, match=unknown):
        load_config(path)
    with pytest.raises(ConfigError, match=r"unknown key\(s\) data.max_len"):
        load_config(None, ["data.max_len=20"])
    config = load_config(None, ["data.max_sentence_tokens=21", "model.max_len=70"])
    assert config.data.max_sentence_tokens == 21 and config.model.overrides["max_len"] == 70


def test_validation_metric_is_checked_against_the_task():
    from aiayn.classify.run import CLASSIFY_TASK
    from aiayn.lm.run import LM_TASK
    from aiayn.training.task import find_metric
    from aiayn.translation.task import TRANSLATION_TASK

    assert find_metric("bleu", TRANSLATION_TASK.metrics).higher_is_better
    assert find_metric("accuracy", CLASSIFY_TASK.metrics).higher_is_better
    assert not find_metric("loss", LM_TASK.metrics).higher_is_better
    assert not find_metric("ppl", CLASSIFY_TASK.metrics).higher_is_better
    with pytest.raises(ConfigError, match=r"one of loss, ppl for this task; got 'bleu'"):
        find_metric("bleu", LM_TASK.metrics)
    with pytest.raises(ConfigError, match="validation_metric"):
        find_metric("accuracy", TRANSLATION_TASK.metrics)
