"""`load(DIR)`: the one way to open a model directory for inference.

It returns a `Translator` for a translation model and a `Generator` for a language model,
on PyTorch for a directory written by aiayn (`save_pretrained`: `config.json` and
`model.safetensors`) and on CTranslate2 for one written by `aiayn export ctranslate2`
(recognised by its `model.bin`). `task` asks for one kind and turns the other into a clear error.
A list of aiayn translation model directories gives one `Translator` decoding their ensemble
(`aiayn.inference.ensemble`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, overload

import torch

from aiayn.core.decoding_choices import COMPILE_CHOICES, QUANTIZATIONS
from aiayn.core.errors import CheckpointError, ConfigError
from aiayn.inference.interface import Generator, Translator
from aiayn.runtime import accelerate

if TYPE_CHECKING:
    from aiayn.formats import ModelDirectory

TASKS = {"transformer": "translation", "decoder_only": "lm"}
"""The model types `load` opens, and the task of each."""

ModelSource = str | Path | Sequence[str | Path]
"""One model directory, or a list of them (an ensemble)."""

_KINDS = {"translation": "a translation model ('transformer', encoder-decoder)",
          "lm": "a language model ('decoder_only')"}


@overload
def load(directory: ModelSource, device: str | torch.device | None = None, *,
         task: Literal["translation"], quantize: str | None = None, compile: bool | str = False,
         sentences: int | None = None) -> Translator: ...
@overload
def load(directory: ModelSource, device: str | torch.device | None = None, *,
         task: Literal["lm"], quantize: str | None = None, compile: bool | str = False,
         sentences: int | None = None) -> Generator: ...
@overload
def load(directory: ModelSource, device: str | torch.device | None = None, *,
         task: None = None, quantize: str | None = None, compile: bool | str = False,
         sentences: int | None = None) -> Translator | Generator: ...
def load(
    directory: ModelSource, device: str | torch.device | None = None, *, task: str | None = None,
    quantize: str | None = None, compile: bool | str = False, sentences: int | None = None,
) -> Translator | Generator:
    """The `Translator` or `Generator` for a model directory.

    Args:
        directory: an aiayn model directory or a CTranslate2 export of one; or a list of
            aiayn translation model directories, decoded as one ensemble (`aiayn.inference.ensemble`:
            shared special ids and vocabularies, each model quantized and compiled as asked);
            a list of one is that directory.
        device: 'cpu', 'cuda', 'cuda:N'; None picks CUDA when available.
        task: 'translation' or 'lm' to require that kind of model (None: either).
        quantize: 'int8' to run the linear layers in int8 (per-channel weight scales, the
            input quantized on the fly: `aiayn.runtime.int8`; CTranslate2: its int8
            compute type).
            A CTranslate2 export already saved in int8 refuses it (it is int8 already).
        compile: compile the decoding step of an aiayn translation model (on the CPU the step
            is kept on disk, built once per model, torch and CPU: `aiayn.runtime.kept`): True or
            'always'; 'auto': where a kept step exists, or building one pays for the `sentences`
            to decode (`aiayn.runtime.auto`), else eager, never an error; False or 'never': eager.
        sentences: how many sentences the caller will decode, for `compile='auto'` (None: unknown).
    """
    if task is not None and task not in _KINDS:
        raise ConfigError(f"task must be one of {sorted(_KINDS)} or None, got {task!r}")
    if quantize is not None and quantize not in QUANTIZATIONS:
        raise ConfigError(f"quantize must be one of {list(QUANTIZATIONS)} (or None), got {quantize!r}")
    if not isinstance(directory, str | Path):
        directories = [Path(d) for d in directory]
        if len(directories) != 1:
            return _load_ensemble(directories, device, task, quantize, compile, sentences)
        directory = directories[0]
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: not a directory")
    from aiayn.formats.ctranslate2_format import is_ctranslate2_dir, read_export

    record = None
    if is_ctranslate2_dir(directory):
        model_type = read_export(directory)[0]
    else:
        from aiayn.formats import read_model_dir

        record = read_model_dir(directory)
        model_type = record.model_type
    if model_type not in TASKS:
        raise CheckpointError(
            f"{directory} holds a {model_type!r} model; inference runs translation models ('transformer') "
            "and language models ('decoder_only')"
        )
    if task is not None and TASKS[model_type] != task:
        raise CheckpointError(f"{directory} holds a {model_type!r} model; this needs {_KINDS[task]}")
    forced = compile_forced(compile)
    if forced and (is_ctranslate2_dir(directory) or model_type != "transformer"):
        what = "a CTranslate2 export" if is_ctranslate2_dir(directory) else f"a {model_type!r} model"
        raise ConfigError(f"compile applies to aiayn's own translation models; {directory} is {what}")
    if is_ctranslate2_dir(directory):
        from aiayn.inference.ctranslate2 import CTranslate2Generator, CTranslate2Translator

        runtime = CTranslate2Translator if model_type == "transformer" else CTranslate2Generator
        opened = runtime(directory, str(device or "auto"))
        if quantize is None:
            return opened
        saved_as = opened.runtime.compute_type
        if saved_as.startswith("int8"):
            raise ConfigError(
                f"{directory} is already quantized (CTranslate2 loads it as {saved_as}); leave out quantize"
            )
        return runtime(directory, str(device or "auto"), compute_type=quantize)
    assert record is not None
    return _load_torch(record, device, quantize, compile, sentences)


def _load_ensemble(
    directories: list[Path], device: str | torch.device | None, task: str | None, quantize: str | None,
    compile: bool | str, sentences: int | None = None,
) -> Translator:
    """The ensemble `Translator` of several aiayn translation model directories (each read once,
    checked, then loaded and accelerated as a single model is)."""
    from aiayn.formats import load_model_of, load_tokenizers, read_model_dir
    from aiayn.formats.ctranslate2_format import is_ctranslate2_dir
    from aiayn.inference.base import check_tokenizers
    from aiayn.inference.ensemble import Ensemble, check_members
    from aiayn.inference.torch_translator import TorchTranslator

    if not directories:
        raise ConfigError("no model directory given; an ensemble needs at least one")
    if task == "lm":
        raise ConfigError("an ensemble decodes translation models; task='lm' takes one language model")
    records = []
    for directory in directories:
        if not directory.is_dir():
            raise CheckpointError(f"{directory}: not a directory")
        if is_ctranslate2_dir(directory):
            raise ConfigError(
                f"{directory} is a CTranslate2 export; an ensemble decodes aiayn model directories "
                "(CTranslate2 decodes one model)"
            )
        record = read_model_dir(directory)
        if record.model_type != "transformer":
            raise CheckpointError(
                f"{directory} holds a {record.model_type!r} model; an ensemble needs translation models "
                "('transformer')"
            )
        records.append(record)
    tokenizers = [load_tokenizers(r.path, r.config, r.model_type, check_fits=False) for r in records]
    check_members([str(d) for d in directories], [r.config for r in records], tokenizers)
    for pair, record in zip(tokenizers, records, strict=True):  # the shared ids fit every model
        check_tokenizers(pair, record.config)
    device = _resolved(device, compile)
    runners = [accelerate(load_model_of(r, device), quantize, compile, sentences=sentences, label=str(r.path))
               for r in records]
    return TorchTranslator(Ensemble(runners, directories), tokenizers[0], directories[0])  # type: ignore[arg-type]


def compile_forced(compile: bool | str) -> bool:
    """Whether `compile` asks for a compiled step whatever the model (True, 'always'); a
    one-line error for a value it cannot be."""
    if not isinstance(compile, bool) and compile not in COMPILE_CHOICES:
        raise ConfigError(f"compile must be True, False or one of {list(COMPILE_CHOICES)}, got {compile!r}")
    return compile is True or compile == "always"


def _resolved(device: str | torch.device | None, compile: bool | str) -> str | torch.device:
    """The device to load on (None: CUDA when available), checked for a forced `compile`."""
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if compile_forced(compile) and str(device).startswith("cpu"):
        from aiayn.runtime.compiled import compiler_available

        if not compiler_available():
            raise ConfigError("compile on CPU needs a C++ compiler (g++ or clang++) on the PATH")
    return device


def _load_torch(
    record: ModelDirectory, device: str | torch.device | None, quantize: str | None = None,
    compile: bool | str = False, sentences: int | None = None,
) -> Translator | Generator:
    """Three one-way steps after the one reading: build and load the model, choose its step
    runner, read its tokenizers."""
    from aiayn.formats import load_model_of, load_tokenizers

    device = _resolved(device, compile)
    model = load_model_of(record, device)
    # A loaded model is not trained further: its runner may prepack, quantize or compile.
    runner = accelerate(model, quantize, compile, sentences=sentences, label=str(record.path))
    tokenizers = load_tokenizers(record.path, record.config, record.model_type, check_fits=False)
    if record.model_type == "transformer":
        from aiayn.inference.torch_translator import TorchTranslator

        return TorchTranslator(runner, tokenizers, record.path)  # type: ignore[arg-type]
    from aiayn.inference.torch_generator import TorchGenerator

    return TorchGenerator(runner, tokenizers.target, record.path)  # type: ignore[arg-type]
