"""`aiayn train --train-src A --train-tgt B --minutes N`: from files to a model with no YAML, every
setting `auto`, a validation set split off; the shorthands beside a config; what is refused."""

from __future__ import annotations

import json
import logging
import re

import pytest
import yaml

from aiayn.cli.main import main
from aiayn.core.errors import ConfigError
from aiayn.data.synthetic import make_task
from aiayn.data.token_store import TokenStore
from aiayn.data.tokenizer import TokenizerPair
from aiayn.tasks import config_from_dict
from aiayn.training.auto_settings import check_auto_supported
from aiayn.translation.data import SPLIT_FILES, split_validation
from aiayn.translation.settings import TranslationSettings
from training.conftest import tiny_config

AUTO_SETTINGS = {  # name -> where train_config.yaml keeps the number
    "data.vocab_size": ("data", "vocab_size"),
    "model.preset": ("model", "preset"),
    "train.batch_tokens": ("train", "batch_tokens"),
    "model.dropout": ("model", "dropout"),
    "train.warmup": ("train", "warmup"),
    "train.eval_every": ("train", "eval_every"),
    "train.bleu_max_sentences": ("train", "bleu_max_sentences"),
}


def write_corpus(directory, lines=300, seed=1):
    """A generated parallel corpus (the built-in `reverse` task: words, then the same words reversed)."""
    pairs = make_task("reverse", seed, lines, 0, 0)["train"]
    src, tgt = directory / "train.src", directory / "train.tgt"
    src.write_text("".join(s + "\n" for s, _ in pairs))
    tgt.write_text("".join(t + "\n" for _, t in pairs))
    return src, tgt, pairs


def test_print_config_chooses_the_auto_settings_and_trains_nothing(tmp_path, capsys):
    """`--print-config` with settings at `auto`: each chosen as the start-up would (a number in
    the YAML, its reason on stderr) and no run directory made."""
    src, tgt, _ = write_corpus(tmp_path)
    run = tmp_path / "runs" / "mine"
    args = ["train", "--train-src", str(src), "--train-tgt", str(tgt), "--minutes", "1", "--out", str(run),
            "--set", "train.threads=1", "--set", "train.precision=fp32"]
    assert main([*args, "--print-config"]) == 0
    out, err = capsys.readouterr()
    printed = yaml.safe_load(out)
    for name, (section, key) in AUTO_SETTINGS.items():
        assert printed[section][key] not in ("auto", None), name
        assert re.search(rf"^{re.escape(name)} auto: .*: ", err, re.MULTILINE), name
    assert printed["data"]["vocab_size"] == 8000 and printed["data"]["cache_dir"] is None
    assert not run.exists()


def test_train_from_files_with_no_yaml(tmp_path, caplog, capsys):
    src, tgt, pairs = write_corpus(tmp_path)
    run = tmp_path / "run"
    with caplog.at_level(logging.INFO, logger="aiayn"):
        assert main(["train", "--train-src", str(src), "--train-tgt", str(tgt), "--minutes", "1",
                     "--out", str(run), "--set", "train.max_steps=30", "--set", "train.threads=1",
                     "--set", "train.progress_bar=false"]) == 0
    saved = yaml.safe_load((run / "train_config.yaml").read_text())
    assert saved["data"]["task"] == "files" and saved["train"]["max_minutes"] == 1.0
    for name, (section, key) in AUTO_SETTINGS.items():  # logged with a reason, kept as a number
        value = saved[section][key]
        assert value != "auto", name
        shown = f"dropout {value}" if key == "dropout" else f"batch_tokens {value}" if key == "batch_tokens" \
            else str(value)
        line = rf"{re.escape(name)} auto: [^\n]*\d[^\n]*: {re.escape(shown)}\n"
        assert re.search(line, caplog.text + "\n"), name
    assert "data.vocab_size auto: 300 training pairs: 8000" in caplog.text
    assert re.search(r"corpus: 270 training pairs, [\d,]+/[\d,]+ tokens \(mean .*95th percentile",
                     caplog.text)

    # The validation split: in the run directory, the seeded share, and out of the training pairs.
    split = [(run / name).read_text().splitlines() for name in SPLIT_FILES]
    assert len(split[0]) == len(split[1]) == 30
    held_out = set(zip(*split, strict=True))
    assert held_out <= set(pairs)
    assert saved["data"]["valid_src"] == str((run / SPLIT_FILES[0]).resolve())
    store_dir = re.search(r"token store (\S+): 270 pairs", caplog.text).group(1)
    store = TokenStore.open(tmp_path / store_dir if not store_dir.startswith("/") else store_dir)
    tokenizers = TokenizerPair.load(run)
    trained = {(tokenizers.source.decode(store.row("src", i).tolist()),
                tokenizers.target.decode(store.row("tgt", i).tolist())) for i in range(store.num_pairs)}
    assert len(trained) == 270 and not trained & held_out and trained | held_out == set(pairs)

    results = json.loads((run / "results.json").read_text())
    assert results["test"]["split"] == "validation" and len(results["examples"]) == 8
    assert list(results["auto_settings"]) == list(AUTO_SETTINGS)  # each, in the order chosen
    assert results["auto_settings"]["model.dropout"]["value"] == saved["model"]["dropout"]
    assert results["auto_settings"]["data.vocab_size"] == {"value": 8000, "reason": "300 training pairs"}
    out = capsys.readouterr().out
    assert "held-out BLEU:" in out and "the validation set: no test set given" in out
    assert f"model.preset auto: {saved['model']['preset']} (" in out


def test_the_split_is_reproducible_opt_in_and_skipped_for_a_tiny_corpus(tmp_path, caplog):
    src, tgt, _ = write_corpus(tmp_path, lines=200)

    def files(**data):
        return TranslationSettings(**{"task": "files", "train_src": str(src), "train_tgt": str(tgt),
                             "valid_from_train": True} | data)

    settings = split_validation(files(seed=4), tmp_path / "a")
    again = split_validation(files(seed=4), tmp_path / "b")
    other = split_validation(files(seed=5), tmp_path / "c")
    first = (tmp_path / "a" / SPLIT_FILES[1]).read_text()
    assert len(first.splitlines()) == 20
    assert first == (tmp_path / "b" / SPLIT_FILES[1]).read_text()
    assert first != (tmp_path / "c" / SPLIT_FILES[1]).read_text()
    assert settings["remove_test_overlap"] is True and again["valid_tgt"].endswith(SPLIT_FILES[1])
    assert other["valid_src"] == str((tmp_path / "c" / SPLIT_FILES[0]).resolve())
    assert split_validation(files(valid_src=str(src), valid_tgt=str(tgt)), tmp_path / "d") is None
    assert split_validation(files(valid_from_train=False), tmp_path / "e") is None  # a config's default
    assert not (tmp_path / "d").exists() and not (tmp_path / "e").exists()
    src, tgt, _ = write_corpus(tmp_path / "a", lines=5)
    assert split_validation(files(), tmp_path / "f") is None
    assert "5 training pairs are too few to split one off: training without validation" in caplog.text


def test_shorthands_override_a_config_and_say_so(tmp_path, caplog):
    src, tgt, _ = write_corpus(tmp_path)
    (tmp_path / "other").mkdir()
    other_src, other_tgt, _ = write_corpus(tmp_path / "other", lines=120, seed=2)
    data = tiny_config(max_steps=2, eval_every=2, max_minutes=5.0)
    data["data"] = {"task": "files", "train_src": str(other_src), "train_tgt": str(other_tgt),
                    "valid_src": str(other_src), "valid_tgt": str(other_tgt), "tokenizer": "char"}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(data))
    run = tmp_path / "run"
    with caplog.at_level(logging.WARNING, logger="aiayn"):
        assert main(["train", str(config), "--train-src", str(src), "--train-tgt", str(tgt), "--minutes", "3",
                     "--out", str(run)]) == 0
    saved = yaml.safe_load((run / "train_config.yaml").read_text())
    assert saved["data"]["train_src"] == str(src) and saved["train"]["max_minutes"] == 3.0
    assert saved["model"]["preset"] == "tiny" and saved["train"]["warmup"] == 5  # the config's own settings
    assert f"data.train_src {str(other_src)!r} replaced by the command line's {str(src)!r}" in caplog.text
    assert "train.max_minutes 5.0 replaced by the command line's '3.0'" in caplog.text
    assert "data.train_tgt" in caplog.text and "data.task" not in caplog.text  # task was files already


@pytest.mark.parametrize("argv, message", [
    (["--train-src", "a.txt"], "--train-src and --train-tgt must be given together"),
    (["--train-src", "a", "--train-tgt", "b", "--valid-tgt", "c"], "--valid-src and --valid-tgt must be"),
    (["--minutes", "3", "--set", "train.max_minutes=4"], "give train.max_minutes by its shorthand or by"),
    (["--resume", "run", "--train-src", "a", "--train-tgt", "b"], "drop --train-src, --train-tgt"),
])
def test_shorthands_refused(argv, message, capsys):
    assert main(["train", *argv]) == 2
    assert message in capsys.readouterr().err


def test_corpus_settings_at_auto_are_for_translation_only():
    config = config_from_dict({"data": {"task": "text", "vocab_size": "auto"}})
    with pytest.raises(ConfigError, match="data.vocab_size 'auto' is for translation"):
        check_auto_supported(config, measures_corpus=False)
    check_auto_supported(config, measures_corpus=True)
    with pytest.raises(ConfigError, match="model.preset 'auto' with train.init_from"):
        fine_tune = config_from_dict({"model": {"preset": "auto"}, "train": {"init_from": "x"}})
        check_auto_supported(fine_tune, True)
