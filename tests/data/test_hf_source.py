"""Hugging Face `datasets` as a training corpus (the `datasets` extra), from local files only."""

from __future__ import annotations

import json

import pytest

from aiayn.core.errors import ConfigError, DataError
from aiayn.translation.data import prepare_data
from aiayn.translation.settings import TranslationSettings

datasets = pytest.importorskip(
    "datasets", reason="the `datasets` extra is not installed: pip install 'aiayn[datasets]'"
)

PAIRS = [(f"das haus nummer {i}", f"the house number {i}") for i in range(120)]


@pytest.fixture(autouse=True)
def local_hf_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):  # read by datasets at import
        if hasattr(datasets.config, name):
            monkeypatch.setattr(datasets.config, name, True)


def test_parquet_and_json_corpora_encode_like_text_files(tmp_path):
    pyarrow_parquet = pytest.importorskip("pyarrow.parquet")
    import pyarrow

    table = pyarrow.table({"de": [s for s, _ in PAIRS[:60]], "en": [t for _, t in PAIRS[:60]]})
    pyarrow_parquet.write_table(table, tmp_path / "a.parquet")
    with open(tmp_path / "b.jsonl", "w", encoding="utf-8") as handle:
        for s, t in PAIRS[60:]:
            handle.write(json.dumps({"translation": {"de": s, "en": t}}) + "\n")
    (tmp_path / "all.de").write_text("".join(s + "\n" for s, _ in PAIRS), encoding="utf-8")
    (tmp_path / "all.en").write_text("".join(t + "\n" for _, t in PAIRS), encoding="utf-8")
    hf = TranslationSettings(
        task="files",
        tokenizer="char",
        train=[
            {"hf": "parquet", "files": [str(tmp_path / "a.parquet")]},
            {"hf": "json", "files": str(tmp_path / "b.jsonl")},
        ],
    )
    text = TranslationSettings(
        task="files", tokenizer="char", train_src=str(tmp_path / "all.de"), train_tgt=str(tmp_path / "all.en")
    )
    from_hf, from_text = (
        prepare_data(hf, cache_dir=tmp_path / "c"),
        prepare_data(text, cache_dir=tmp_path / "c"),
    )
    assert len(from_hf.train) == len(PAIRS) == len(from_text.train)
    assert [c["kept"] for c in from_hf.store.manifest["corpora"]] == [60, 60]
    for i in range(len(PAIRS)):
        assert from_hf.train[i] == from_text.train[i]


def test_bad_entries_and_an_offline_hub_name_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"data.train\[0\]: hf: parquet reads local files"):
        prepare_data(TranslationSettings(task="files", train=[{"hf": "parquet"}]), cache_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"data.train\[0\]: unknown key\(s\) source"):
        prepare_data(TranslationSettings(task="files", train=[{"source": "x"}]), cache_dir=tmp_path)
    config = TranslationSettings(
        task="files", train=[{"hf": "surely-not-a-dataset-aiayn", "config": "de-en"}]
    )
    with pytest.raises(DataError, match=r"cannot load Hugging Face dataset .*offline, give local files"):
        prepare_data(config, cache_dir=tmp_path)
