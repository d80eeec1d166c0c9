"""Multi30k lookup, errors and (mocked) download; nothing here touches the network."""

import gzip
import io
import urllib.error
from pathlib import Path

import pytest

from aiayn.core.errors import DataError
from aiayn.data import (
    MULTI30K_URL,
    ParallelDataset,
    TokenizerPair,
    data_root,
    filter_pairs,
    load_multi30k,
    multi30k_files,
)
from aiayn.data.multi30k import cache_dir


@pytest.fixture
def dirs(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """An empty data root and an empty cache, with every download refused."""
    root, cache = tmp_path / "root", tmp_path / "cache"
    root.mkdir()
    monkeypatch.setenv("AIAYN_CACHE_DIR", str(cache))

    def no_network(*args, **kwargs):
        raise AssertionError("tests must not download")

    monkeypatch.setattr("urllib.request.urlopen", no_network)
    return root, cache / "multi30k"


def put(directory: Path, name: str, lines: list[str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


def test_cache_dir_follows_env(dirs):
    assert cache_dir() == dirs[1]


def test_found_in_root(dirs):
    root, _ = dirs
    de, en = put(root, "val.de.gz", ["Hallo"]), put(root, "val.en.gz", ["Hello"])
    assert multi30k_files("val", "de", "en", root=root) == (de, en)
    assert load_multi30k("val", "de", "en", root=root) == [("Hallo", "Hello")]


def test_found_in_cache_and_uncompressed_accepted(dirs):
    root, cache = dirs
    de = put(cache, "train.de.gz", ["a"])
    en = put(root, "train.en", ["b"])
    assert multi30k_files("train", "de", "en", root=root) == (de, en)


def test_root_is_preferred_over_cache(dirs):
    root, cache = dirs
    put(cache, "val.de.gz", ["cache"])
    put(cache, "val.en.gz", ["cache"])
    put(root, "val.de.gz", ["root"])
    assert load_multi30k("val", "de", "en", root=root) == [("root", "cache")]


def test_missing_without_download_says_where_and_url(dirs):
    root, cache = dirs
    put(root, "test_2016_flickr.de.gz", ["x"])
    with pytest.raises(DataError) as err:
        multi30k_files("test_2016_flickr", "de", "en", root=root)
    message = str(err.value)
    assert "test_2016_flickr.en.gz" in message
    assert str(root) in message and str(cache) in message
    assert MULTI30K_URL.format(split="test_2016_flickr", lang="en") in message


@pytest.mark.parametrize("split,lang", [("dev", "en"), ("val", "../../etc"), ("val", "EN")])
def test_bad_split_or_language(dirs, split, lang):
    with pytest.raises(DataError, match=r"split|language"):
        multi30k_files(split, lang, "de", root=dirs[0])


class FakeResponse(io.BytesIO):
    """What urlopen returns; checks the destination is absent while the body is read."""

    def __init__(self, data: bytes, dest: Path, fail_after: int | None = None) -> None:
        super().__init__(data)
        self.dest, self.fail_after, self.reads = dest, fail_after, 0

    def read(self, size: int = -1) -> bytes:
        assert not self.dest.exists(), "destination written before the download completed"
        self.reads += 1
        if self.fail_after is not None and self.reads > self.fail_after:
            raise urllib.error.URLError("connection reset")
        return super().read(min(size, 7) if size > 0 else size)  # several small chunks


def test_download_writes_atomically_into_cache(dirs, monkeypatch):
    root, cache = dirs
    put(root, "val.de.gz", ["Hallo", "Welt"])
    body = gzip.compress(b"Hello\nWorld\n")
    dest = cache / "val.en.gz"
    urls = []

    def fake_urlopen(url, timeout=None):
        urls.append(url)
        return FakeResponse(body, dest)

    monkeypatch.setattr("urllib.request.urlopen", fake_urlopen)
    pairs = load_multi30k("val", "de", "en", root=root, download=True)
    assert pairs == [("Hallo", "Hello"), ("Welt", "World")]
    assert urls == [MULTI30K_URL.format(split="val", lang="en")]
    assert sorted(p.name for p in cache.iterdir()) == ["val.en.gz"]  # no temporary file left
    # Now cached: found again without the network.
    monkeypatch.setattr("urllib.request.urlopen", lambda *a, **k: pytest.fail("downloaded twice"))
    assert multi30k_files("val", "de", "en", root=root, download=True)[1] == dest


def test_interrupted_download_leaves_nothing(dirs, monkeypatch):
    root, cache = dirs
    dest = cache / "train.de.gz"
    monkeypatch.setattr(
        "urllib.request.urlopen",
        lambda url, timeout=None: FakeResponse(gzip.compress(b"x\n" * 100), dest, fail_after=2),
    )
    with pytest.raises(DataError, match="cannot download"):
        multi30k_files("train", "de", "en", root=root, download=True)
    assert list(cache.iterdir()) == []


def test_download_that_is_not_gzip_is_rejected(dirs, monkeypatch):
    root, cache = dirs
    dest = cache / "train.de.gz"
    monkeypatch.setattr(
        "urllib.request.urlopen",
        lambda url, timeout=None: FakeResponse(b"<html>404: Not Found</html>", dest),
    )
    with pytest.raises(DataError, match="not a gzip"):
        multi30k_files("train", "de", "en", root=root, download=True)
    assert list(cache.iterdir()) == []


@pytest.mark.data
@pytest.mark.skipif(not (data_root() / "multi30k").is_dir(), reason="Multi30k not in data root")
def test_real_multi30k_splits():
    val = load_multi30k("val", "de", "en")
    assert len(val) == 1014
    assert all(src.strip() and tgt.strip() for src, tgt in val)
    src, tgt = multi30k_files("test_2016_flickr", "de", "en")
    assert src.name == "test_2016_flickr.de.gz" and tgt.name == "test_2016_flickr.en.gz"

    # From text to batches: a joint BPE round-trips every sentence exactly.
    src_texts, tgt_texts = [s for s, _ in val], [t for _, t in val]
    pair = TokenizerPair.from_spec("bpe", src_texts, tgt_texts, vocab_size=2000)
    src_ids, tgt_ids = pair.source.encode_batch(src_texts), pair.target.encode_batch(tgt_texts)
    assert pair.source.decode_batch(src_ids) == src_texts
    assert pair.target.decode_batch(tgt_ids) == tgt_texts
    kept, stats = filter_pairs(list(zip(src_ids, tgt_ids, strict=True)), 100, origin="val")
    assert stats.kept == len(kept) == len(val)
    data = ParallelDataset([s for s, _ in kept], [t for _, t in kept], pair.specials)
    assert sum(len(b) for b in data.batches(max_tokens=2000, seed=0)) == len(val)
