"""The tokenizer loader knows its file formats from one table (`aiayn.data.tokenizer.FORMATS`):
a format added to the table is recognised by `Tokenizer.load`, `TokenizerPair.load`,
`TokenizerPair.from_spec` and `TokenizerPair.save` without touching them."""

from __future__ import annotations

from pathlib import Path

from aiayn.data import tokenizer as tokenizer_module
from aiayn.data.tokenizer import FORMATS, Tokenizer, TokenizerFormat, TokenizerPair


class Lines:
    """A toy tokenizer: one token per line of its file."""

    def __init__(self, path: Path, specials=None) -> None:
        self.path, self.specials = Path(path), specials

    def save(self, path: Path) -> None:
        Path(path).write_text(self.path.read_text())


def _save_pair(pair: TokenizerPair, directory: Path) -> None:
    pair.source.save(directory / "src.lines")
    pair.target.save(directory / "tgt.lines")


LINES = TokenizerFormat(
    "lines", lambda source: str(source).endswith(".lines"), Lines, "tokenizer.lines",
    lambda directory: (Path(directory) / "src.lines").is_file(),
    lambda directory, specials: (Lines(Path(directory) / "src.lines"), Lines(Path(directory) / "tgt.lines")),
    _save_pair, Lines,
)


def test_a_format_in_the_table_is_loaded_and_saved(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tokenizer_module, "FORMATS", (*FORMATS, LINES))
    (tmp_path / "src.lines").write_text("a\nb\n")
    (tmp_path / "tgt.lines").write_text("c\n")
    one = Tokenizer.load(tmp_path / "src.lines")
    assert isinstance(one, Lines)
    pair = TokenizerPair.load(tmp_path)
    assert (pair.source.path.name, pair.target.path.name) == ("src.lines", "tgt.lines")
    spec_pair = TokenizerPair.from_spec(str(tmp_path), [], [], 0)
    assert isinstance(spec_pair.source, Lines)
    out = tmp_path / "out"
    TokenizerPair(one, one).save(out)
    assert (out / "tokenizer.lines").read_text() == "a\nb\n"
    assert Tokenizer.load(out / "tokenizer.json").path == out / "tokenizer.lines"
    pair.save(out / "pair")
    assert sorted(p.name for p in (out / "pair").iterdir()) == ["src.lines", "tgt.lines"]
