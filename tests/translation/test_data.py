"""Translation data preparation (`aiayn.translation.data`): splits, tokenizers, encoding."""

from __future__ import annotations

import pytest

from aiayn.core.errors import ConfigError
from aiayn.translation import TRANSLATION_TASK, prepare_data, read_splits
from aiayn.translation.settings import TranslationSettings


def write_pairs(directory, name, pairs):
    src, tgt = directory / f"{name}.src", directory / f"{name}.tgt"
    src.write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return str(src), str(tgt)


def test_files_task_keeps_the_splits_and_drops_empty_and_long_pairs(tmp_path):
    train = [("ab", "ba"), ("", "x"), ("abc", "cba"), ("a" * 30, "b")]
    valid = [("ca", "ac"), ("c", "")]
    train_src, train_tgt = write_pairs(tmp_path, "train", train)
    valid_src, valid_tgt = write_pairs(tmp_path, "valid", valid)
    config = TranslationSettings(
        task="files", train_src=train_src, train_tgt=train_tgt, valid_src=valid_src,
        valid_tgt=valid_tgt, tokenizer="char", max_sentence_tokens=10,
    )
    data = prepare_data(config)
    assert len(data.train) == 2 and len(data.valid) == 1  # empty and over-long pairs dropped
    assert data.valid_pairs == [("ca", "ac")] and data.test_pairs == []
    assert data.tokenizers.is_joint
    assert data.tokenizers.target.decode(data.tokenizers.target.encode("cba")) == "cba"


def test_separate_vocabularies_and_the_tokenizer_given(tmp_path):
    config = TranslationSettings(
        task="copy", num_train=50, num_valid=5, num_test=5, tokenizer="char", joint_vocab=False
    )
    data = prepare_data(config)
    assert not data.tokenizers.is_joint and data.test_pairs
    again = prepare_data(config, data.tokenizers)  # another rank: no tokenizer trained
    assert again.tokenizers is data.tokenizers
    TRANSLATION_TASK.save_tokenizer(data.tokenizers, tmp_path)
    loaded = TRANSLATION_TASK.load_tokenizer(tmp_path, None)
    assert not loaded.is_joint and loaded.source.vocab_size == data.tokenizers.source.vocab_size


def test_bad_data_configs_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match="data.train_src and data.train_tgt"):
        read_splits(TranslationSettings(task="files"))
    train_src, _ = write_pairs(tmp_path, "train", [("a", "b")])
    with pytest.raises(ConfigError, match="data.valid_src and data.valid_tgt must be given together"):
        read_splits(
            TranslationSettings(task="files", train_src=train_src, train_tgt=train_src, valid_src=train_src)
        )
    with pytest.raises(ConfigError, match="data.task must be one of"):
        read_splits(TranslationSettings(task="nope"))
