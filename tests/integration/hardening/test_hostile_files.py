"""Hostile or inconsistent checkpoints and model directories are refused with a message that
says why: pickles that would run code (weights_only loading), training states of the wrong
shape, and config/tensor disagreements (the message names the tensor)."""

from __future__ import annotations

import json
import os
import pickle
import random
import re
import shutil
from pathlib import Path

import pytest
import torch

from aiayn.cli.main import main
from aiayn.core.errors import CheckpointError
from aiayn.formats import load_model
from aiayn.training.checkpoint import STATE_FILE, list_checkpoints, load_training_state


class RunsCode:
    """Unpickling this runs `touch MARKER` (if the loader allows it)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def command(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


@pytest.fixture
def run_copy(reference_run, tmp_path) -> Path:
    return Path(shutil.copytree(reference_run, tmp_path / "run"))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
@pytest.mark.parametrize("container", ["torch.save", "plain pickle"])
def test_pickle_that_would_run_code_is_refused(run_copy, tmp_path, capsys, container):
    marker = tmp_path / "code-ran"
    state_file = list_checkpoints(run_copy)[-1] / STATE_FILE
    payload = {"optimizer": {}, "train_state": {}, "rng_cpu": RunsCode(marker)}
    if container == "torch.save":
        torch.save(payload, state_file)
    else:
        state_file.write_bytes(pickle.dumps(payload))

    with pytest.raises(CheckpointError, match="refused to load"):
        load_training_state(state_file.parent)
    code, err = command(capsys, "train", "--resume", str(run_copy))
    assert code == 2
    assert f"aiayn train: error: {state_file}: refused to load" in err
    assert not marker.exists(), "the pickle ran code"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "refused to load"),
        (os.urandom(3000), "refused to load"),
        ("torch", "not an aiayn training state: missing or wrong 'optimizer' (dict), 'rng_cpu' (Tensor)"),
    ],
    ids=["empty", "random-bytes", "wrong-structure"],
)
def test_corrupt_training_state_is_a_clear_error(run_copy, capsys, content, message):
    state_file = list_checkpoints(run_copy)[-1] / STATE_FILE
    if content == "torch":
        torch.save({"train_state": {"step": 3}, "rng_cpu": [1, 2]}, state_file)
    else:
        state_file.write_bytes(content)
    code, err = command(capsys, "train", "--resume", str(run_copy))
    assert code == 2 and f"{state_file}: " in err and message in err


def test_any_random_bytes_state_is_refused_cleanly(tmp_path):
    """Whatever garbage the state file holds, loading it gives a CheckpointError, nothing else."""
    generator = random.Random(0)
    for _ in range(200):
        (tmp_path / STATE_FILE).write_bytes(generator.randbytes(generator.randint(1, 4000)))
        with pytest.raises(CheckpointError, match="refused to load"):
            load_training_state(tmp_path)


def test_resume_with_a_different_model_shape_names_the_tensor(run_copy, capsys):
    code, err = command(capsys, "train", "--resume", str(run_copy), "--set", "model.d_ff=48")
    assert code == 2
    assert re.search(r"model\.safetensors: tensor '\w+\.layers\.0\.feed_forward\.[\w.]+' has shape", err)
    assert "but the config expects (48" in err


def edit_config(model_dir: Path, edit) -> None:
    path = model_dir / "config.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: d["config"].update(src_vocab_size=50, tgt_vocab_size=50), "config expects (50, 32)"),
        (lambda d: d["config"].update(d_model=48), "has shape"),
        (lambda d: d["config"].update(num_decoder_layers=2), "tensor 'decoder.layers.1."),
        (lambda d: d["config"].update(num_decoder_layers=0), "unexpected tensor 'decoder.layers.0."),
        (lambda d: d.update(surprise=1), "unexpected keyword argument 'surprise'"),
        (lambda d: d["config"].update(d_model="wide"), "ModelConfig.d_model must be int, got 'wide'"),
        (lambda d: d.update(format_version=99), "format_version 99 is not supported"),
    ],
    ids=["vocab-size", "width", "missing-layer", "extra-layer", "extra-key", "bad-value", "newer-format"],
)
def test_translate_with_inconsistent_model_dir_is_a_clear_error(
    reference_run, tmp_path, capsys, edit, expected
):
    model_dir = Path(shutil.copytree(reference_run, tmp_path / "model", ignore=shutil.ignore_patterns("ch*")))
    edit_config(model_dir, edit)
    with pytest.raises(CheckpointError, match=r"config\.json|model\.safetensors"):
        load_model(model_dir)
    code, err = command(capsys, "translate", "--model", str(model_dir), "--text", "abc", "--device", "cpu")
    assert code == 2
    assert err.startswith("aiayn translate: error: ") and expected in err, err


@pytest.mark.parametrize("content", [b"", b"\x08\x00\x00\x00\x00\x00\x00\x00{}", os.urandom(2000)])
def test_unreadable_weights_file_is_a_clear_error(reference_run, tmp_path, capsys, content):
    model_dir = Path(shutil.copytree(reference_run, tmp_path / "model", ignore=shutil.ignore_patterns("ch*")))
    (model_dir / "model.safetensors").write_bytes(content)
    code, err = command(capsys, "translate", "--model", str(model_dir), "--text", "abc", "--device", "cpu")
    assert code == 2 and "model.safetensors" in err


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_random_bytes_as_training_state_always_give_a_checkpoint_error(tmp_path):
    """torch's safe unpickler raises IndexError or KeyError on some byte strings: each must
    still become the one-line `CheckpointError`."""
    rng = random.Random(0)
    for _ in range(300):
        (tmp_path / STATE_FILE).write_bytes(rng.randbytes(rng.choice([10, 300, 3000])))
        with pytest.raises(CheckpointError, match="refused to load|not an aiayn training state") as caught:
            load_training_state(tmp_path)
        assert "\n" not in str(caught.value)
