"""One `aiayn translate --model DIR` reads the model directory once: the one reader
(`aiayn.model_format.read_model_dir`) runs once, Python opens `config.json` once, the
safetensors header is read once and the weights loaded once, and the model class is built for
real once (its layout on the meta device, which allocates nothing, comes before)."""

from __future__ import annotations

import builtins
import io
from collections import Counter
from pathlib import Path

from aiayn import model_format
from aiayn.cli.main import main
from aiayn.model.transformer import Transformer


def test_translate_reads_the_model_directory_once(model_dir, monkeypatch, capsys) -> None:
    counts: Counter[str] = Counter()

    def counted(name, function, condition=lambda *args, **kwargs: True):
        def wrapper(*args, **kwargs):
            if condition(*args, **kwargs):
                counts[name] += 1
            return function(*args, **kwargs)
        return wrapper

    def opens_config(file, *args, **kwargs) -> bool:
        return isinstance(file, (str, Path)) and Path(file).name == model_format.CONFIG_FILE

    opener = counted("open config.json", builtins.open, opens_config)
    monkeypatch.setattr(builtins, "open", opener)
    monkeypatch.setattr(io, "open", opener)
    monkeypatch.setattr(model_format, "safe_open", counted("safe_open", model_format.safe_open))
    monkeypatch.setattr(model_format, "load_file", counted("load_file", model_format.load_file))
    monkeypatch.setattr(model_format.ModelDirectory, "__init__",
                        counted("read_model_dir", model_format.ModelDirectory.__init__))
    real_init = Transformer.__init__

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        counts["Transformer on meta" if next(self.parameters()).is_meta else "Transformer"] += 1

    monkeypatch.setattr(Transformer, "__init__", init)

    assert main(["translate", "--model", str(model_dir), "--text", "abc", "--beam", "2"]) == 0
    assert capsys.readouterr().out.count("\n") == 1
    assert counts == {
        "read_model_dir": 1, "open config.json": 1, "safe_open": 1, "load_file": 1,
        "Transformer on meta": 1, "Transformer": 1,
    }
