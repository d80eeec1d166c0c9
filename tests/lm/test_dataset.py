"""Training and validation windows over a token stream."""

from collections import Counter

import pytest
import torch

from aiayn.core.errors import ConfigError, DataError
from aiayn.data.paths import resolve_data_file
from aiayn.data.tokenizer import Tokenizer
from aiayn.lm import dataset as lm_dataset
from aiayn.lm.dataset import TokenWindows, read_text, split_text, window_starts
from aiayn.lm.run import prepare_lm_data
from aiayn.lm.settings import LMSettings

STREAM = list(range(10, 10 + 23))  # 23 distinct token ids: position p holds id 10 + p
PAD = 7  # any id that is not in the stream


def targets_of(windows: TokenWindows, batches) -> Counter:
    """How often each stream position is a (non-pad) target, checking input/label alignment."""
    seen: Counter = Counter()
    for batch in batches:
        for row, start in enumerate(batch.starts):
            for t in range(windows.block_size):
                position = start + t + 1
                expected_input = STREAM[start + t] if start + t < len(STREAM) else PAD
                assert int(batch.inputs[row, t]) == expected_input
                if position < len(STREAM):
                    assert int(batch.labels[row, t]) == STREAM[position]
                    seen[position] += 1
                else:  # past the end: a pad label, which the loss ignores
                    assert int(batch.labels[row, t]) == PAD
    return seen


@pytest.mark.parametrize("block_size", [1, 4, 5, 22, 30])
def test_default_stride_makes_every_token_a_target_exactly_once(block_size):
    windows = TokenWindows(STREAM, block_size, pad_id=PAD)
    seen = targets_of(windows, windows.batches(3 * block_size, shuffle=True, seed=1))
    assert seen == Counter({p: 1 for p in range(1, len(STREAM))})
    assert windows.num_targets == len(STREAM) - 1
    assert sum(b.num_targets for b in windows.batches(3 * block_size)) == len(STREAM) - 1


def test_stride_one_is_the_classic_sliding_window():
    block = 5
    windows = TokenWindows(STREAM, block, stride=1, pad_id=PAD)
    assert window_starts(len(STREAM), block, 1) == list(range(len(STREAM) - block))
    assert len(windows) == len(STREAM) - block
    for batch in windows.batches(4 * block, shuffle=False):
        assert batch.num_targets == len(batch) * block  # every window is full, no padding
        for row, start in enumerate(batch.starts):
            assert batch.inputs[row].tolist() == STREAM[start : start + block]
            assert batch.labels[row].tolist() == STREAM[start + 1 : start + block + 1]


def test_intermediate_stride_covers_every_target():
    windows = TokenWindows(STREAM, 5, stride=3, pad_id=PAD)
    seen = targets_of(windows, windows.batches(10, shuffle=False))
    assert set(seen) == set(range(1, len(STREAM)))
    assert window_starts(len(STREAM), 5, 3) == [0, 3, 6, 9, 12, 15, 18]


def test_bad_strides_and_streams_are_errors():
    with pytest.raises(ConfigError, match="stride"):
        window_starts(20, 4, 5)
    with pytest.raises(ConfigError, match="stride"):
        window_starts(20, 4, 0)
    with pytest.raises(DataError, match="at least 2 tokens"):
        window_starts(1, 4)


def test_batches_are_deterministic_and_resume_mid_epoch():
    windows = TokenWindows(STREAM, 2, pad_id=PAD)

    def plan(**kwargs):
        return [b.starts for b in windows.batches(6, **kwargs)]

    full = plan(shuffle=True, seed=3, epoch=1)
    assert full == plan(shuffle=True, seed=3, epoch=1)
    assert full != plan(shuffle=True, seed=3, epoch=2)
    assert plan(shuffle=True, seed=3, epoch=1, start=2) == full[2:]
    assert [len(s) for s in full] == [3] * 3 + [2]  # 11 windows of 2 in batches of 6 // 2 = 3


def test_validation_windows_cover_the_held_out_tail(tmp_path):
    text = "".join(f"line {i}: the quick brown fox\n" for i in range(40))
    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8")
    data = prepare_lm_data(LMSettings(task="text", text_file=str(path), tokenizer="char", block_size=16))
    head, tail = split_text(text, 0.1)
    assert head + tail == text and len(tail) == int(len(text) * 0.1)
    bos_id, pad_id = data.tokenizer.specials.bos_id, data.tokenizer.specials.pad_id
    assert data.train.stream.tolist() == [bos_id, *data.tokenizer.encode(head)]
    assert data.valid.stream.tolist() == [bos_id, *data.tokenizer.encode(tail)]
    assert data.valid.stride == 16  # non-overlapping whatever the training stride
    labels = [
        int(label)
        for batch in data.valid.batches(64, shuffle=False)
        for row in batch.labels
        for label in row
        if label != pad_id
    ]
    assert labels == data.tokenizer.encode(tail)  # each held-out token once, in order


def test_chunked_encoding_equals_whole_text(monkeypatch):
    text = "".join(f"Line {i}, with some words.\r\n\n" for i in range(50))
    tokenizer = Tokenizer.train("char", [text])
    monkeypatch.setattr(lm_dataset, "ENCODE_CHUNK_CHARS", 40)
    assert lm_dataset.encode_text(tokenizer, text) == tokenizer.encode(text)


def test_text_files_resolve_against_the_data_root(tmp_path, monkeypatch):
    root = tmp_path / "root"
    (root / "corpus").mkdir(parents=True)
    (root / "corpus" / "a.txt").write_text("abc", encoding="utf-8")
    monkeypatch.setenv("AIAYN_DATA_DIR", str(root))
    monkeypatch.chdir(tmp_path)
    assert resolve_data_file("corpus/a.txt") == (root / "corpus" / "a.txt").resolve()
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.txt").write_text("local", encoding="utf-8")
    assert resolve_data_file("corpus/a.txt") == (tmp_path / "corpus" / "a.txt").resolve()
    with pytest.raises(DataError, match="missing.txt.*data root"):
        resolve_data_file("missing.txt")


def test_bad_text_files_name_the_file_and_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\nalso fine\nbroken \xff here\n")
    with pytest.raises(DataError, match=r"bad.txt: line 3 is not valid UTF-8"):
        read_text(bad)
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n", encoding="utf-8")
    with pytest.raises(DataError, match="empty.txt.*empty"):
        read_text(empty)


def test_lm_batch_moves_to_a_device():
    batch = next(TokenWindows(STREAM, 4, pad_id=PAD).batches(8, shuffle=False))
    moved = batch.to(torch.device("cpu"))
    assert torch.equal(moved.inputs, batch.inputs) and moved.num_targets == batch.num_targets
