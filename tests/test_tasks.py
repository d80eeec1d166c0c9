"""The tasks declare themselves (`aiayn.tasks`): each task package's settings class holds the `data`
fields its tasks read; a config loads with the class of the task it names, `--set` converts by
that class, a key of another task is a one-line error naming the tasks that read it, and an
unknown task lists the known ones. Importing `aiayn.tasks` imports no task package."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from aiayn.core.errors import ConfigError
from aiayn.tasks import (
    DEFAULT_TASK,
    config_from_dict,
    default_config_path,
    load_config,
    settings_for,
    task_names,
    task_settings,
)
from aiayn.training.config import read_yaml
from aiayn.training.data_settings import DataSettings

CONFIGS = Path(__file__).resolve().parents[1] / "src" / "aiayn" / "configs"
SHIPPED = sorted(CONFIGS.glob("*.yaml"))


def test_every_task_name_has_one_settings_class_and_each_kind_one_command() -> None:
    names = [name for settings in task_settings() for name in settings.task_names()]
    assert names == list(task_names()) and len(names) == len(set(names)) >= 8
    assert {"dates", "files", "text", "brackets", "tsv"} <= set(names)
    for settings in task_settings():
        assert issubclass(settings, DataSettings) and settings.command.startswith("aiayn")
        assert settings().task in settings.task_names()  # its default task is its own
        for name in settings.task_names():
            assert settings_for(name) is settings
    assert len({settings.kind for settings in task_settings()}) == len(task_settings())


def test_a_field_two_kinds_read_is_declared_once() -> None:
    """Each field is annotated in exactly one class body (`task` aside: each class names its own)."""
    bodies = {cls for settings in task_settings() for cls in settings.__mro__[:-1]}
    for name in {f.name for settings in task_settings() for f in dataclasses.fields(settings)} - {"task"}:
        declaring = [cls.__name__ for cls in bodies if name in vars(cls).get("__annotations__", {})]
        assert len(declaring) == 1, f"data.{name} declared in {declaring}"
    shared = {f.name for f in dataclasses.fields(settings_for("dates"))} & {
        f.name for f in dataclasses.fields(settings_for("brackets"))
    }
    assert {"seed", "num_train", "max_sentence_tokens", "tokenizer", "vocab_size"} <= shared


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_every_shipped_config_loads_with_its_task_settings(path: Path) -> None:
    config = load_config(path)
    assert type(config.data) is settings_for(read_yaml(path)["data"]["task"])
    again = config_from_dict(config.to_dict())  # a run's train_config.yaml reads back the same
    assert again == config and list(config.to_dict()["data"]) == [
        f.name for f in dataclasses.fields(type(config.data))
    ]


def test_the_default_config_is_the_default_task() -> None:
    assert load_config(None).data.task == DEFAULT_TASK == default_config_path().stem
    assert config_from_dict({}).data.task == DEFAULT_TASK


def test_overrides_convert_by_the_settings_of_the_task_they_name() -> None:
    config = load_config(CONFIGS / "shakespeare_char.yaml", ["data.block_size=64", "data.stride=32"])
    assert (config.data.block_size, config.data.stride) == (64, 32)
    assert load_config(CONFIGS / "shakespeare_char.yaml", ["data.text_file=no"]).data.text_file == "no"
    config = load_config(CONFIGS / "brackets.yaml", ["data.task=tsv", "data.train_tsv=on"])
    assert config.data.task == "tsv" and config.data.train_tsv == "on"  # the text as written, not True
    config = load_config(None, ["data.src_lang=no", "data.task=multi30k"])
    assert config.data.src_lang == "no" and config.data.task == "multi30k"
    assert load_config(CONFIGS / "brackets.yaml", ["data.num_train=12"]).data.num_train == 12


@pytest.mark.parametrize(("data", "message"), [
    ({"task": "dates", "block_size": 64},
     "data.block_size is read by `aiayn lm` tasks (text), not by task 'dates'"),
    ({"task": "text", "seed": 3},
     "data.seed is read by `aiayn train` tasks (copy, reverse, dates, multi30k, files) and "
     "`aiayn classify` tasks (brackets, tsv), not by task 'text'"),
    ({"task": "brackets", "src_lang": "fr"},
     "data.src_lang is read by `aiayn train` tasks (copy, reverse, dates, multi30k, files), "
     "not by task 'brackets'"),
    ({"block_size": 64}, "data.block_size is read by `aiayn lm` tasks (text), not by task 'dates'"),
])
def test_a_key_of_another_task_is_an_error_naming_the_tasks_that_read_it(data, message) -> None:
    with pytest.raises(ConfigError) as error:
        config_from_dict({"data": data})
    assert str(error.value) == message


def test_a_key_of_another_task_through_set_names_the_file() -> None:
    with pytest.raises(ConfigError) as error:
        load_config(None, ["data.text_file=a.txt"])
    assert str(error.value) == (
        f"{default_config_path()}: data.text_file is read by `aiayn lm` tasks (text), not by task 'dates'"
    )


def test_a_train_config_of_earlier_versions_with_every_tasks_fields_at_their_defaults_loads() -> None:
    """Earlier versions wrote every task's `data` fields into train_config.yaml; those that hold
    another task's default change nothing and are left out."""
    every = {}
    for settings in reversed(task_settings()):
        every |= settings.defaults()
    for task in ("dates", "text", "tsv"):
        config = config_from_dict({"data": every | {"task": task}})
        assert config.data == settings_for(task)(task=task)


def test_an_unknown_key_lists_the_valid_keys_of_that_task() -> None:
    with pytest.raises(ConfigError) as error:
        config_from_dict({"data": {"task": "text", "blok_size": 3}})
    message = str(error.value)
    assert message.startswith("unknown key(s) data.blok_size; valid keys in data: task, ")
    assert "block_size" in message and "text_file" in message and "src_lang" not in message


def test_an_unknown_task_lists_the_known_tasks() -> None:
    known = ", ".join(task_names())
    for config in ({"data": {"task": "nope"}}, {"data": {"task": "Dates"}}):
        with pytest.raises(ConfigError) as error:
            config_from_dict(config)
        assert str(error.value) == f"data.task must be one of {known}; got {config['data']['task']!r}"
    with pytest.raises(ConfigError, match=r"^data.task must be str, got \['dates'\]$"):
        config_from_dict({"data": {"task": ["dates"]}})
    with pytest.raises(ConfigError, match=f"^{default_config_path()}: data.task must be one of {known}"):
        load_config(None, ["data.task=nope"])


def test_importing_tasks_imports_no_task_package_nor_torch() -> None:
    script = (
        "import json, sys; import aiayn.tasks; "
        "print(json.dumps(sorted(m for m in sys.modules if m == 'torch' or m.startswith(("
        "'aiayn.translation', 'aiayn.lm', 'aiayn.classify', 'aiayn.training')))))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_each_trainer_reads_its_own_tasks_settings() -> None:
    from aiayn.classify.run import CLASSIFY_TASK
    from aiayn.lm.run import LM_TASK
    from aiayn.training.run import check_data_settings
    from aiayn.translation.task import TRANSLATION_TASK

    trainers = (TRANSLATION_TASK, LM_TASK, CLASSIFY_TASK)
    assert tuple(trainer.data_settings for trainer in trainers) == task_settings()
    for trainer in trainers:
        task = trainer.data_settings.task_names()[0]
        check_data_settings(trainer, config_from_dict({"data": {"task": task}}))
    with pytest.raises(ConfigError) as error:
        check_data_settings(TRANSLATION_TASK, load_config(CONFIGS / "shakespeare_char.yaml"))
    assert str(error.value) == (
        "aiayn train needs data.task one of copy, reverse, dates, multi30k, files; got 'text' "
        "(a task of aiayn lm)"
    )
