"""The paths model formats and helpers had before `aiayn.formats` and `aiayn.core` still work
for one release, and warn."""

from __future__ import annotations

import importlib

import pytest
import torch

from aiayn import formats
from aiayn.core import errors, settings
from aiayn.formats import hf_format, hf_mapping, model_card
from aiayn.model import ModelConfig, Transformer

OLD_PATHS = {
    "aiayn.model_dir": (formats, "load_model"),
    "aiayn.model_format": (formats, "read_model_json"),
    "aiayn.model_card": (model_card, "write_model_card"),
    "aiayn.hf_format": (hf_format, "import_huggingface"),
    "aiayn.hf_mapping": (hf_mapping, "Rule"),
    "aiayn.ctranslate2_format": (importlib.import_module("aiayn.formats.ctranslate2_format"), "read_export"),
    "aiayn.errors": (errors, "CheckpointError"),
    "aiayn.settings": (settings, "setting"),
}


@pytest.mark.parametrize("old", sorted(OLD_PATHS))
def test_an_old_module_path_gives_the_new_object_and_warns(old: str) -> None:
    new, name = OLD_PATHS[old]
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=rf"{old} is deprecated.*import {name} from {new.__name__}"):
        assert getattr(module, name) is getattr(new, name)
    with pytest.warns(DeprecationWarning):  # every use warns, not only the first import
        exec(f"from {old} import {name}", {})
    with pytest.raises(AttributeError, match="moved to"):
        module.no_such_name  # noqa: B018


def test_the_old_model_methods_still_save_and_load_and_warn(tmp_path) -> None:
    model = Transformer(ModelConfig.tiny(vocab_size=13)).eval()
    with pytest.warns(DeprecationWarning, match=r"aiayn\.formats\.save_pretrained"):
        model.save_pretrained(tmp_path)
    with pytest.warns(DeprecationWarning, match=r"aiayn\.formats\.from_pretrained\(Transformer"):
        loaded = Transformer.from_pretrained(tmp_path)
    again = formats.from_pretrained(Transformer, tmp_path)
    tokens = torch.tensor([[5, 6, 7]])
    with torch.no_grad():
        assert torch.equal(loaded(tokens, tokens), model(tokens, tokens))
        assert torch.equal(again(tokens, tokens), model(tokens, tokens))
