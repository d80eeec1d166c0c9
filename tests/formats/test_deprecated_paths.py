"""The paths model formats and helpers had before `aiayn.formats` and `aiayn.core` still work
for one release, and warn: `aiayn.model_dir` is still a module; the other old modules are
attributes of `aiayn` (`aiayn.errors`, `from aiayn import errors`), since `src/aiayn` keeps at
most five modules. `import aiayn.errors` is the one old spelling that stops working."""

from __future__ import annotations

import importlib
import sys

import pytest
import torch

import aiayn
from aiayn import formats
from aiayn.core import errors, settings
from aiayn.formats import ctranslate2_format, hf_format, hf_mapping, model_card
from aiayn.model import ModelConfig, Transformer

OLD_MODULES = {  # the old paths without a file: what `aiayn.<old>` gives, and one of its names
    "model_format": (formats, "read_model_json"),
    "model_card": (model_card, "write_model_card"),
    "hf_format": (hf_format, "import_huggingface"),
    "hf_mapping": (hf_mapping, "Rule"),
    "ctranslate2_format": (ctranslate2_format, "read_export"),
    "errors": (errors, "CheckpointError"),
    "settings": (settings, "setting"),
}


def test_aiayn_model_dir_is_still_a_module_whose_every_name_warns() -> None:
    module = importlib.import_module("aiayn.model_dir")
    warning = r"aiayn\.model_dir is deprecated.*import load_model from aiayn\.formats"
    with pytest.warns(DeprecationWarning, match=warning):
        assert module.load_model is formats.load_model
    with pytest.warns(DeprecationWarning):  # every use warns, not only the first import
        exec("from aiayn.model_dir import load_model_of", {})
    with pytest.raises(AttributeError, match="moved to"):
        module.no_such_name  # noqa: B018


def test_import_star_from_aiayn_model_dir_gives_its_old_names_each_warning() -> None:
    namespace: dict = {}
    with pytest.warns(DeprecationWarning) as caught:
        exec("from aiayn.model_dir import *", namespace)
    old = importlib.import_module("aiayn.model_dir").__all__
    assert {name for name in namespace if not name.startswith("__")} == set(old)
    assert all(namespace[name] is getattr(formats, name) for name in old)
    assert {str(warning.message).split("import ")[1].split(" from")[0] for warning in caught} == set(old)


@pytest.mark.parametrize("old", sorted(OLD_MODULES))
def test_an_old_module_is_an_attribute_of_aiayn_whose_names_warn(old: str) -> None:
    new, name = OLD_MODULES[old]
    module = getattr(aiayn, old)
    assert module.__name__ == f"aiayn.{old}"
    warning = rf"aiayn\.{old} is deprecated.*import {name} from {new.__name__}"
    with pytest.warns(DeprecationWarning, match=warning):
        assert getattr(module, name) is getattr(new, name)
    with pytest.warns(DeprecationWarning):  # the `from aiayn import <old>` spelling warns the same
        exec(f"from aiayn import {old}\n{old}.{name}", {})
    with pytest.raises(AttributeError, match="moved to"):
        module.no_such_name  # noqa: B018


@pytest.mark.parametrize("old", ["errors", "model_format"])
def test_importing_an_old_module_without_a_file_is_the_spelling_that_stopped_working(old: str) -> None:
    with pytest.raises(ModuleNotFoundError, match=rf"aiayn\.{old}"):
        importlib.import_module(f"aiayn.{old}")


def test_an_old_module_is_made_when_asked_for_and_never_stored() -> None:
    assert getattr(aiayn, "errors") is not getattr(aiayn, "errors")  # noqa: B009
    assert not set(OLD_MODULES) & set(vars(aiayn))
    assert not {f"aiayn.{old}" for old in OLD_MODULES} & set(sys.modules)
    assert not set(OLD_MODULES) & set(dir(aiayn))  # not offered as public names


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
