"""The token store (`aiayn.data.token_store`, `aiayn.data.pair_store`): the same batches as the
in-memory path of b21bb47, ids equal to direct encoding, found again by its fingerprint, never
used half-written, and bad input refused with one line."""

from __future__ import annotations

import errno
import json
import logging

import numpy as np
import pytest

from aiayn.core.errors import DataError
from aiayn.data.batching import make_batch
from aiayn.data.paths import data_root
from aiayn.data.token_store import TokenStore
from aiayn.translation.data import prepare_data
from aiayn.translation.settings import TranslationSettings

from .legacy_b21bb47 import legacy_batches, legacy_train_data


def write_pairs(directory, name, pairs):
    src, tgt = directory / f"{name}.src", directory / f"{name}.tgt"
    src.write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return str(src), str(tgt)


def sentences(count, seed=0):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(300)]
    return [
        (" ".join(rng.choice(words, rng.integers(4, 12))), " ".join(rng.choice(words, rng.integers(4, 12))))
        for _ in range(count)
    ]


def store_batches(data, max_tokens, shuffle, seed, epoch):
    plan = data.train.batch_plan(max_tokens, shuffle, seed, epoch)
    return [
        [tuple(x.tolist() for x in (data.store.row("src", i), data.store.row("tgt", i))) for i in b]
        for b in plan
    ]


def configs(tmp_path):
    train = [*sentences(600), ("", "leer"), ("a " * 80, "lang"), ("ok", "ok")]
    train_src, train_tgt = write_pairs(tmp_path, "train", train)
    yield TranslationSettings(task="dates", num_train=2000, num_valid=20, num_test=20, tokenizer="char")
    yield TranslationSettings(
        task="files", train_src=train_src, train_tgt=train_tgt, vocab_size=400, max_sentence_tokens=40
    )
    yield TranslationSettings(
        task="reverse", num_train=800, num_valid=10, num_test=10, joint_vocab=False, vocab_size=300
    )
    if (data_root() / "multi30k" / "train.de.gz").is_file():
        yield TranslationSettings(task="multi30k", vocab_size=8000, max_sentence_tokens=100)


def test_store_batches_hold_the_ids_of_the_in_memory_path_of_b21bb47(tmp_path):
    """Same seed -> the same token ids in the same batches in the same order: recorded results stand."""
    for config in configs(tmp_path):
        tokenizers, src_ids, tgt_ids = legacy_train_data(config)
        data = prepare_data(config, cache_dir=tmp_path / "cache")
        assert tokenizers.source.hf.to_str() == data.tokenizers.source.hf.to_str(), config.task
        assert len(data.train) == len(src_ids), config.task
        for shuffle, seed, epoch in [(True, 1, 0), (True, 1, 1), (True, 7, 3), (False, 1, 0)]:
            expected = legacy_batches(src_ids, tgt_ids, 3000, shuffle, seed, epoch)
            assert store_batches(data, 3000, shuffle, seed, epoch) == expected, (config.task, seed, epoch)
        plan = data.train.batch_plan(3000, True, 1, 0)
        for indices in plan[:5]:  # a collated batch is the in-memory path's make_batch
            batch = data.train.collate(indices)
            reference = make_batch(
                [src_ids[i] for i in indices],
                [tgt_ids[i] for i in indices],
                list(indices),
                specials=tokenizers.specials,
            )
            for name in ("src", "tgt_in", "labels"):
                assert getattr(batch, name).equal(getattr(reference, name))
            assert (batch.num_src_tokens, batch.num_targets, batch.indices) == (
                reference.num_src_tokens,
                reference.num_targets,
                reference.indices,
            )


def test_round_trip_ids_equal_direct_encoding_and_dtype(tmp_path):
    pairs = sentences(300, seed=1)
    src, tgt = write_pairs(tmp_path, "train", pairs)
    data = prepare_data(
        TranslationSettings(task="files", train_src=src, train_tgt=tgt, vocab_size=500), cache_dir=tmp_path
    )
    store = data.store
    assert store.ids["src"].dtype == np.uint16 and store.manifest["num_pairs"] == len(pairs)
    for i, (s, t) in enumerate(pairs):
        assert store.row("src", i).tolist() == data.tokenizers.source.encode(s)
        assert store.row("tgt", i).tolist() == data.tokenizers.target.encode(t)


def test_fingerprint_finds_the_store_again_and_any_change_makes_a_new_one(tmp_path, caplog):
    src, tgt = write_pairs(tmp_path, "train", sentences(200))
    cache = tmp_path / "cache"
    config = TranslationSettings(task="files", train_src=src, train_tgt=tgt, vocab_size=400)
    first = prepare_data(config, cache_dir=cache).store.directory
    with caplog.at_level(logging.INFO, logger="aiayn.data.pair_store"):
        again = prepare_data(config, cache_dir=cache)
    assert again.store.directory == first and "found, not re-encoded" in caplog.text
    resumed = prepare_data(config, again.tokenizers, cache_dir=cache)  # a resumed run's tokenizer
    assert resumed.store.directory == first
    seen = {first}
    for changed in (
        TranslationSettings(task="files", train_src=src, train_tgt=tgt, vocab_size=420),  # the tokenizer
        TranslationSettings(
            task="files", train_src=src, train_tgt=tgt, vocab_size=400, max_sentence_tokens=50
        ),
        TranslationSettings(task="files", train_src=src, train_tgt=tgt, vocab_size=400, tokenizer="char"),
    ):
        directory = prepare_data(changed, cache_dir=cache).store.directory
        assert directory not in seen
        seen.add(directory)
    with open(src, "a", encoding="utf-8") as handle, open(tgt, "a", encoding="utf-8") as other:
        handle.write("neu\n")
        other.write("new\n")
    assert prepare_data(config, cache_dir=cache).store.directory not in seen  # a changed file
    with pytest.raises(DataError, match="no token store"):
        prepare_data(
            TranslationSettings(task="files", train_src=src, train_tgt=tgt, vocab_size=300),
            cache_dir=cache,
            create=False,
        )


def test_an_interrupted_or_failed_preparation_leaves_nothing_behind(tmp_path, monkeypatch):
    from aiayn.data import pair_store, token_store

    src, tgt = write_pairs(tmp_path, "train", sentences(100))
    config = TranslationSettings(task="files", train_src=src, train_tgt=tgt, vocab_size=400)
    cache = tmp_path / "cache"
    real_append = token_store.StoreWriter.append

    def interrupted(self, name, rows):
        real_append(self, name, rows)  # some ids are written, then the process is stopped
        raise KeyboardInterrupt

    monkeypatch.setattr(token_store.StoreWriter, "append", interrupted)
    with pytest.raises(KeyboardInterrupt):
        prepare_data(config, cache_dir=cache)
    assert list(cache.iterdir()) == []

    def disk_full(self, name, rows):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(token_store.StoreWriter, "append", lambda self, name, rows: disk_full_append(self))

    def disk_full_append(writer):
        with token_store._disk_errors(writer.final):
            disk_full(writer, "", [])

    with pytest.raises(DataError, match="no space left on the device while writing the token store"):
        prepare_data(config, cache_dir=cache)
    assert list(cache.iterdir()) == []
    monkeypatch.setattr(token_store.StoreWriter, "append", real_append)
    assert pair_store.ENCODE_CHUNK > 0 and prepare_data(config, cache_dir=cache).store is not None


def test_a_corrupt_or_foreign_store_is_refused_naming_it(tmp_path):
    src, tgt = write_pairs(tmp_path, "train", sentences(50))
    config = TranslationSettings(task="files", train_src=src, train_tgt=tgt, vocab_size=400)
    directory = prepare_data(config, cache_dir=tmp_path / "cache").store.directory
    ids = directory / "src_ids.bin"
    ids.write_bytes(ids.read_bytes()[:-2])
    with pytest.raises(DataError, match=r"corrupt token store .*src_ids.bin"):
        prepare_data(config, cache_dir=tmp_path / "cache")
    manifest = json.loads((directory / "manifest.json").read_text())
    with pytest.raises(DataError, match="a token store for other data"):
        TokenStore.open(directory, key="0" * 64)
    (directory / "manifest.json").write_text(json.dumps(manifest | {"format": "fairseq"}))
    with pytest.raises(DataError, match="is not an aiayn token store"):
        TokenStore.open(directory)
    (directory / "manifest.json").write_text("{not json")
    with pytest.raises(DataError, match="not a readable token store"):
        TokenStore.open(directory)


def test_filters_are_counted_in_the_manifest_and_the_log(tmp_path, caplog):
    base = sentences(40, seed=3)
    train = [
        *base,
        ("", "x"),
        ("y", "  "),  # empty: 2
        (" ".join(["w1"] * 70), "w1"),  # over 60 tokens: 1
        ("w1 " * 15, "w2"),  # ratio 22 > 9: 1
        base[0],
        base[1],
        base[1],  # duplicates: 3
        ("valid one", "valid eins"),  # also a validation pair: 1
    ]
    src, tgt = write_pairs(tmp_path, "train", train)
    valid_src, valid_tgt = write_pairs(tmp_path, "valid", [("valid one", "valid eins")])
    config = TranslationSettings(
        task="files",
        train_src=src,
        train_tgt=tgt,
        valid_src=valid_src,
        valid_tgt=valid_tgt,
        tokenizer="char",
        max_sentence_tokens=60,
    )
    with caplog.at_level(logging.INFO, logger="aiayn.data.pair_store"):
        data = prepare_data(config, cache_dir=tmp_path / "a")
    counts = {"empty": 2, "too_long": 1, "length_ratio": 1, "duplicates": 3, "test_overlap": 1}
    assert data.store.manifest["filters"] == counts
    assert "empty 2, too_long 1, length_ratio 1, duplicates 3, test_overlap 1" in caplog.text
    assert len(data.train) == len(train) - 4  # duplicates and overlap only counted by default
    config.remove_duplicates = config.remove_test_overlap = True
    config.max_length_ratio = None
    data = prepare_data(config, cache_dir=tmp_path / "a")
    assert data.store.manifest["filters"] == counts | {"length_ratio": 0}
    assert len(data.train) == len(train) - 3 - 3 - 1


def test_corpora_are_sampled_by_weight(tmp_path):
    first = write_pairs(tmp_path, "a", [(f"a{i}", f"A{i}") for i in range(300)])
    second = write_pairs(tmp_path, "b", [(f"b{i}", f"B{i}") for i in range(100)])
    config = TranslationSettings(
        task="files",
        tokenizer="char",
        train=[
            {"src": first[0], "tgt": first[1], "weight": 0.5},
            {"src": second[0], "tgt": second[1], "weight": 2.5},
        ],
    )
    data = prepare_data(config, cache_dir=tmp_path / "cache")
    assert data.store.manifest["corpora"][0]["kept"] == 300 and len(data.train) == 400
    for epoch in range(2):
        rows = np.concatenate(data.train.batch_plan(200, True, 1, epoch))
        corpus = np.asarray(data.store.corpus)[rows]
        assert (corpus == 0).sum() == 150 and (corpus == 1).sum() == 250  # 0.5 x 300, 2.5 x 100
        assert len(np.unique(rows[corpus == 0])) == 150  # a subsample without repeats
    assert not np.array_equal(
        *(np.sort(np.concatenate(data.train.batch_plan(200, True, 1, e))) for e in (0, 1))
    )
    assert len(np.concatenate(data.train.batch_plan(200, False, 1, 0))) == 400  # validation order: all once


@pytest.mark.parametrize(
    ("contents", "message"),
    [
        (
            (b"a\nb\n", b"x\n"),
            r"parallel files differ in length: .*train.src has 2 lines, .*train.tgt has 1 lines",
        ),
        ((b"a\n\xff\n", b"x\ny\n"), r"train.src: line 2 is not valid UTF-8"),
        ((b"", b""), "corpus file is empty"),
    ],
)
def test_bad_training_files_are_one_line_errors_and_leave_no_store(tmp_path, contents, message):
    (tmp_path / "train.src").write_bytes(contents[0])
    (tmp_path / "train.tgt").write_bytes(contents[1])
    config = TranslationSettings(
        task="files", train_src=str(tmp_path / "train.src"), train_tgt=str(tmp_path / "train.tgt")
    )
    with pytest.raises(DataError, match=message):
        prepare_data(config, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists() or list((tmp_path / "cache").iterdir()) == []
    with pytest.raises(DataError, match="not found"):
        prepare_data(
            TranslationSettings(
                task="files", train_src=str(tmp_path / "nope"), train_tgt=str(tmp_path / "nope")
            )
        )


def test_a_killed_preparations_leftovers_are_never_used_and_are_removed(tmp_path):
    import socket
    import subprocess
    import sys

    src, tgt = write_pairs(tmp_path, "train", sentences(30))
    config = TranslationSettings(task="files", train_src=src, train_tgt=tgt, vocab_size=400)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    cache = tmp_path / "cache"
    stale = cache / f".tmp-{'0' * 32}-{int(dead.stdout)}-abcd1234"
    stale.mkdir(parents=True)
    (stale / "HOST").write_text(socket.gethostname())
    (stale / "manifest.json").write_text("{}")
    alive = cache / f".tmp-{'1' * 32}-{__import__('os').getpid()}-abcd1234"  # a preparation under way
    alive.mkdir()
    (alive / "HOST").write_text(socket.gethostname())
    data = prepare_data(config, cache_dir=cache)
    assert not stale.exists() and alive.exists()
    assert sorted(p.name for p in cache.iterdir()) == sorted([alive.name, data.store.directory.name])
