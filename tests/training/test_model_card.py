"""Model cards (issue 26): every model directory the project writes has a README.md whose fields
agree with its results.json and config.json; the export's card has the Hub's metadata header;
`--push-to-hub` calls huggingface_hub with the right arguments (no network here)."""

from __future__ import annotations

import json

import pytest
import yaml

from aiayn.cli.main import main
from aiayn.formats.model_card import card_fields
from aiayn.tasks import config_from_dict
from aiayn.training.checkpoint import average_checkpoints
from aiayn.training.run import run_task
from aiayn.translation.task import TRANSLATION_TASK

from .conftest import tiny_config


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("card") / "run"
    run_task(TRANSLATION_TASK, config_from_dict(tiny_config(max_steps=4, eval_every=2)), run_dir)
    return run_dir


def test_card_fields_agree_with_results_and_config(run_dir):
    results = json.loads((run_dir / "results.json").read_text())
    model_json = json.loads((run_dir / "config.json").read_text())
    fields = card_fields(run_dir)
    assert fields["task"] == "translation" and fields["model_type"] == model_json["model_type"]
    assert fields["parameters"] == results["params"]
    assert fields["model_settings"] == {k: v for k, v in model_json["config"].items() if k != "extra"}
    assert fields["sacrebleu_signature"] == results["test"]["signature"]
    assert fields["results"]["test_bleu"] == results["test"]["bleu"]
    assert (fields["cpu_model"], fields["train_minutes"], fields["command"]) == (
        results["cpu_model"], results["train_minutes"], results["command"])
    assert fields["weights_from"] == "random initialisation"
    assert fields["tokenizer"] == "char" and fields["tokenizer_files"] == ["tokenizer.json"]
    card = (run_dir / "README.md").read_text()
    for text in (results["test"]["signature"], f"{results['params']:,}", results["cpu_model"],
                 "aiayn.load(", "ctranslate2", "AutoModelForSeq2SeqLM"):
        assert text in card, text
    assert not card.startswith("---")  # the Hub header is the export's


@pytest.mark.parametrize(("task", "languages"), [("multi30k", ["de", "en"]), ("files", []), ("copy", [])])
def test_the_card_names_languages_only_where_the_data_says_them(run_dir, tmp_path, task, languages):
    """A `files` run keeps the settings' default src_lang/tgt_lang (de, en) whatever its files
    hold (en-es, ...): its card names the files, not those."""
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("checkpoints"))
    saved = yaml.safe_load((copy / "train_config.yaml").read_text())
    saved["data"] |= {"task": task, "src_lang": "de", "tgt_lang": "en"}
    (copy / "train_config.yaml").write_text(yaml.safe_dump(saved))
    assert card_fields(copy)["languages"] == languages


def test_average_writes_a_card_naming_the_checkpoints(run_dir, tmp_path):
    average_checkpoints(run_dir, 2, tmp_path / "avg")
    fields = card_fields(tmp_path / "avg")
    assert fields["weights_from"].startswith("the average of 2 checkpoints")
    assert "average of 2 checkpoints" in (tmp_path / "avg" / "README.md").read_text()


def test_export_card_has_the_hub_header_and_push_calls_the_hub(run_dir, tmp_path, monkeypatch, capsys):
    pytest.importorskip("transformers", reason="needs the optional extra 'export'")
    hub = pytest.importorskip("huggingface_hub")
    calls = []

    class FakeApi:
        def create_repo(self, repo_id, **kwargs):
            calls.append(("create_repo", repo_id, kwargs))

        def upload_folder(self, **kwargs):
            calls.append(("upload_folder", kwargs))

    monkeypatch.setattr(hub, "HfApi", FakeApi)
    out = tmp_path / "hf"
    assert main(["export", "huggingface", "--model", str(run_dir), "--out", str(out),
                 "--push-to-hub", "someone/dates"]) == 0
    card = (out / "README.md").read_text()
    header = yaml.safe_load(card.split("---")[1])
    assert header["tags"] == ["aiayn", "translation"] and header["library_name"] == "transformers"
    assert "bleu" in header["metrics"]
    assert calls[0] == ("create_repo", "someone/dates", {"private": False, "exist_ok": True})
    assert calls[1][1]["repo_id"] == "someone/dates" and calls[1][1]["folder_path"] == str(out)
    assert "uploaded to" in capsys.readouterr().out


def test_push_to_hub_offline_is_one_line(run_dir, tmp_path, monkeypatch, capsys):
    pytest.importorskip("transformers", reason="needs the optional extra 'export'")
    hub = pytest.importorskip("huggingface_hub")

    class OfflineApi:
        def create_repo(self, repo_id, **kwargs):
            raise ConnectionError("Failed to resolve 'huggingface.co'\nmore detail")

    monkeypatch.setattr(hub, "HfApi", OfflineApi)
    code = main(["export", "huggingface", "--model", str(run_dir), "--out", str(tmp_path / "hf"),
                 "--push-to-hub", "someone/dates"])
    error = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "--push-to-hub someone/dates" in error[-1] and "more detail" not in error[-1]
