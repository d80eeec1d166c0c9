"""The language model's token store (`aiayn.lm.text_store`): streamed, memory-mapped windows
equal to the in-memory ones, found again, bad text refused naming the line."""

from __future__ import annotations

import numpy as np
import pytest

from aiayn.core.errors import DataError
from aiayn.lm.dataset import TokenWindows, read_text, split_text, text_stream
from aiayn.lm.run import prepare_lm_data
from aiayn.lm.settings import LMSettings


def test_memory_mapped_windows_equal_the_in_memory_ones(tmp_path):
    text = "\ufeff" + "".join(f"Zeile {i}: größer als {i * 7} — ok\r\n" for i in range(3000))
    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8", newline="")
    config = LMSettings(task="text", text_file=str(path), tokenizer="char", block_size=32, stride=20)
    data = prepare_lm_data(config, cache_dir=tmp_path / "cache")
    assert isinstance(data.train.stream, np.memmap) and data.train.stream.dtype == np.uint16
    head, tail = split_text(read_text(path), config.valid_fraction)
    assert data.train.stream.tolist() == text_stream(data.tokenizer, head)
    assert data.valid.stream.tolist() == text_stream(data.tokenizer, tail)
    memory = TokenWindows(text_stream(data.tokenizer, head), 32, 20, pad_id=data.tokenizer.specials.pad_id)
    for mapped, listed in zip(data.train.batches(320, seed=2), memory.batches(320, seed=2), strict=True):
        assert mapped.inputs.equal(listed.inputs) and mapped.labels.equal(listed.labels)
        assert mapped.num_targets == listed.num_targets
    again = prepare_lm_data(config, data.tokenizer, cache_dir=tmp_path / "cache")  # a resume
    assert again.train.stream.filename == data.train.stream.filename


def test_bad_text_is_refused_naming_the_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\nstill fine\n\xc3\x28 broken\n")
    with pytest.raises(DataError, match=r"bad.txt: line 3 is not valid UTF-8"):
        prepare_lm_data(LMSettings(task="text", text_file=str(path), tokenizer="char"), cache_dir=tmp_path)
    path.write_text("  \n\n", encoding="utf-8")
    with pytest.raises(DataError, match="the text file is empty"):
        prepare_lm_data(LMSettings(task="text", text_file=str(path), tokenizer="char"), cache_dir=tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["bad.txt"]  # nothing half-written


def test_aiayn_prepare_makes_the_language_model_store(tmp_path, capsys):
    import yaml

    from aiayn.cli.main import main

    (tmp_path / "text.txt").write_text("abc def\n" * 200, encoding="utf-8")
    config = {"data": {"task": "text", "text_file": str(tmp_path / "text.txt"), "tokenizer": "char"}}
    (tmp_path / "lm.yaml").write_text(yaml.safe_dump(config))
    assert main(["prepare", str(tmp_path / "lm.yaml"), "--set", f"data.cache_dir={tmp_path / 'cache'}"]) == 0
    assert '"train": 1441' in capsys.readouterr().out  # <bos> + 90% of 1600 characters
