"""Model directories for the ensemble tests (`aiayn.inference.ensemble`), made once per session:
tiny random translation models that share a tokenizer, and copies that differ from them in one
way each (a renamed or extra token, swapped special ids, a language model, a CTranslate2 export).
Imported as a fixture by the inference, CLI and service tests."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from aiayn import formats
from aiayn.data import Tokenizer, TokenizerPair
from aiayn.data.tokenizer import JOINT_FILE, SOURCE_FILE, TARGET_FILE
from decoding.conftest import SOURCES, TARGETS
from decoding.helpers import tiny_lm, tiny_transformer


@dataclass
class EnsembleDirs:
    a: Path  # a tiny random Transformer, joint char tokenizer
    b: Path  # another (other seed), the same tokenizer
    shallow: Path  # another with one decoder layer instead of two, the same tokenizer
    renamed: Path  # a's weights; its target token 5 renamed
    bigger: Path  # a's weights; one more token at the end of its vocabulary
    source_renamed: Path  # a's weights; the same target tokenizer, source token 5 renamed
    swapped_specials: Path  # a's weights; <bos> and <eos> ids swapped in config.json
    lm: Path  # a language model with the same tokenizer
    ct2: Path | None  # a's CTranslate2 export (None without the 'export' extra)


def _vocabulary_edited(directory: Path, file: str, edit) -> None:
    """Apply `edit` to the `model.vocab` dict of the tokenizer JSON `file` of `directory`."""
    path = directory / file
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data["model"]["vocab"])
    path.write_text(json.dumps(data), encoding="utf-8")


def _rename(vocab: dict[str, int]) -> None:
    old = next(token for token, i in vocab.items() if i == 5)
    vocab["Q" if old != "Q" else "R"] = vocab.pop(old)


def perturbed_copy(source: Path, destination: Path, scale: float = 0.05, seed: int = 0) -> Path:
    """A copy of the model directory `source` (its tokenizers, so the same vocabularies) whose
    every weight tensor has Gaussian noise of `scale` times its own standard deviation added:
    a second trained model that differs from the first."""
    import torch

    from aiayn.data.special_tokens import SpecialTokens
    from aiayn.formats import load_model

    model = load_model(source)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            spread = float(parameter.std()) if parameter.numel() > 1 else 0.0
            parameter.add_(scale * spread * torch.randn(parameter.shape, generator=generator))
    formats.save_pretrained(model, destination)
    TokenizerPair.load(source, SpecialTokens.of(model.config)).save(destination)
    return destination


def _copy(source: Path, destination: Path) -> Path:
    shutil.copytree(source, destination)
    return destination


def make_ensemble_dirs(root: Path) -> EnsembleDirs:
    tokenizer = Tokenizer.train("char", SOURCES + TARGETS)
    size = tokenizer.vocab_size

    def translation(name: str, seed: int, **overrides) -> Path:
        directory = root / name
        formats.save_pretrained(tiny_transformer(seed, vocab_size=size, max_len=48, **overrides), directory)
        TokenizerPair(tokenizer, tokenizer).save(directory)
        return directory

    a, b = translation("a", 0), translation("b", 1)
    shallow = translation("shallow", 2, num_decoder_layers=1)
    renamed = _copy(a, root / "renamed")
    _vocabulary_edited(renamed, JOINT_FILE, _rename)
    bigger = _copy(a, root / "bigger")
    _vocabulary_edited(bigger, JOINT_FILE, lambda vocab: vocab.__setitem__("QQ", size))
    source_renamed = _copy(a, root / "source_renamed")
    (source_renamed / JOINT_FILE).unlink()
    tokenizer.save(source_renamed / SOURCE_FILE)
    tokenizer.save(source_renamed / TARGET_FILE)
    _vocabulary_edited(source_renamed, SOURCE_FILE, _rename)
    swapped = _copy(a, root / "swapped_specials")
    data = json.loads((swapped / "config.json").read_text(encoding="utf-8"))
    data["config"]["bos_id"], data["config"]["eos_id"] = data["config"]["eos_id"], data["config"]["bos_id"]
    (swapped / "config.json").write_text(json.dumps(data), encoding="utf-8")
    lm = root / "lm"
    formats.save_pretrained(tiny_lm(3, vocab_size=size, max_len=48), lm)
    tokenizer.save(lm / JOINT_FILE)
    ct2 = None
    try:
        from aiayn.export import export_ctranslate2

        ct2 = export_ctranslate2(a, root / "ct2")
    except ImportError:
        pass
    return EnsembleDirs(a, b, shallow, renamed, bigger, source_renamed, swapped, lm, ct2)


@pytest.fixture(scope="session")
def ensemble_dirs(tmp_path_factory) -> EnsembleDirs:
    return make_ensemble_dirs(tmp_path_factory.mktemp("ensemble"))


REFUSALS = {
    # the directory added to `a`, and what the one-line error says
    "renamed": "renamed: target token 5 is 'Q'",
    "bigger": "bigger: target token",
    "source_renamed": "source_renamed: source token 5 is 'Q'",
    "swapped_specials": "swapped_specials: special token bos is id 2",
    "lm": "lm holds a 'decoder_only' model; an ensemble needs translation models",
    "ct2": "ct2 is a CTranslate2 export; an ensemble decodes aiayn model directories",
}
"""Each directory that cannot join `a` in an ensemble, and its error's words."""
