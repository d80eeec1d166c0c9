"""Model directories and resumed checkpoints are checked against their weights before any
tensor is allocated: an absurd or wrong config.json is a one-line error naming the tensor and
both shapes, and the process never grows (its peak RSS stays small)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from aiayn.cli.main import main
from aiayn.core.errors import CheckpointError
from aiayn.formats import load_model

from .conftest import make_model_dir

PEAK_RSS_LIMIT_MB = 1000
"""Far below what the wrong configs below would allocate (>= 1.8 GB), far above an import of
torch and aiayn (about 350 MB)."""

MEASURE = """
import sys
from aiayn.cli.main import main
code = main(sys.argv[1:])
# VmHWM, this process's own peak: getrusage's ru_maxrss can carry the parent's peak across
# fork and exec (Linux keeps it in the signal struct), so a large test process would show.
peak_kib = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(peak_kib // 1024)
sys.exit(code)
"""


def aiayn_peak_rss(*argv: str) -> tuple[int, str, int]:
    """Run `aiayn ARGV` in a fresh process: (exit status, stderr, peak RSS in MiB)."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *argv], capture_output=True, text=True, timeout=600
    )
    peak = int(done.stdout.strip().splitlines()[-1])
    return done.returncode, done.stderr, peak


def one_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return make_model_dir(tmp_path_factory.mktemp("model") / "model")


def edited_copy(model_dir: Path, tmp_path: Path, **config) -> Path:
    copy = Path(shutil.copytree(model_dir, tmp_path / "edited"))
    path = copy / "config.json"
    data = json.loads(path.read_text())
    data["config"].update(config)
    path.write_text(json.dumps(data))
    return copy


@pytest.mark.parametrize(
    ("d_model", "expected"),
    [
        (10**9, "has shape (48,) but the config expects (3000000000,)"),  # the 252 GB config
        (6144, "has shape (48,) but the config expects (18432,)"),  # 1.8 GB: allocatable, but wrong
    ],
    ids=["absurd", "plausible"],
)
def test_wrong_width_is_one_line_without_allocation(model_dir, tmp_path, d_model, expected):
    edited = edited_copy(model_dir, tmp_path, d_model=d_model)
    argv = ["translate", "--model", str(edited), "--text", "abc", "--device", "cpu"]
    code, err, peak_mb = aiayn_peak_rss(*argv)
    line = one_line(err)
    assert code == 2
    assert line.startswith("aiayn translate: error: ") and "model.safetensors: tensor '" in line, line
    assert expected in line
    assert peak_mb < PEAK_RSS_LIMIT_MB, f"peak RSS {peak_mb} MiB: something was allocated"


def test_config_too_large_even_to_lay_out_is_one_line(model_dir, tmp_path, capsys):
    edited = edited_copy(model_dir, tmp_path, d_model=10**10)  # (3e10, 1e10): over 2^63 elements
    with pytest.raises(CheckpointError, match=r"config\.json: describes a model too large to build"):
        load_model(edited)
    assert main(["translate", "--model", str(edited), "--text", "abc", "--device", "cpu"]) == 2
    assert "too large to build" in one_line(capsys.readouterr().err)


def test_huge_max_len_is_refused_before_the_positional_table_is_built(model_dir, tmp_path):
    """max_len changes no stored tensor (the sinusoidal table is not saved), only memory."""
    edited = edited_copy(model_dir, tmp_path, max_len=10**9)
    with pytest.raises(CheckpointError) as caught:
        load_model(edited)
    message = str(caught.value)
    assert "config.json: buffers not stored with the weights" in message
    assert re.search(r"'\w+positional\.table' of shape \(1000000000, 16\)", message), message
    assert "refusing to allocate" in message and "\n" not in message


def test_moderate_max_len_still_loads(model_dir, tmp_path):
    edited = edited_copy(model_dir, tmp_path, max_len=4096)  # 256 kB of table, beyond the weights
    assert load_model(edited).config.max_len == 4096


def test_nan_in_config_json_is_refused(model_dir, tmp_path):
    edited = Path(shutil.copytree(model_dir, tmp_path / "nan"))
    path = edited / "config.json"
    path.write_text(path.read_text().replace('"layer_norm_eps": 1e-05', '"layer_norm_eps": NaN'))
    assert "NaN" in path.read_text()
    with pytest.raises(CheckpointError, match=r"config\.json: not valid JSON \(NaN is not a valid number\)"):
        load_model(edited)


def test_integer_tensor_where_a_float_weight_belongs_is_named(model_dir, tmp_path):
    edited = Path(shutil.copytree(model_dir, tmp_path / "ints"))
    weights = edited / "model.safetensors"
    tensors = load_file(str(weights))
    name = sorted(tensors)[0]
    tensors[name] = tensors[name].long()
    save_file(tensors, str(weights))
    with pytest.raises(CheckpointError, match=rf"tensor '{re.escape(name)}' is stored as I64 but the model"):
        load_model(edited)


def test_resume_with_an_absurd_width_is_refused_before_allocation(reference_run, tmp_path):
    run = Path(shutil.copytree(reference_run, tmp_path / "run"))
    code, err, peak_mb = aiayn_peak_rss("train", "--resume", str(run), "--set", "model.d_model=1000000000")
    errors = [line for line in err.splitlines() if line.startswith("aiayn train:")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
    line = errors[0]
    assert re.search(r"checkpoints/step_\d+/model\.safetensors: tensor '[\w.]+' has shape \(96,\) ", line)
    assert line.endswith("but the config expects (3000000000,)"), line
    assert peak_mb < PEAK_RSS_LIMIT_MB, f"peak RSS {peak_mb} MiB: something was allocated"


def test_meta_layout_matches_the_real_model(model_dir):
    """The check compares the weights with a meta-device layout: it must be the real model's."""
    from aiayn.formats import meta_model

    real = load_model(model_dir)
    layout = meta_model(lambda: type(real)(real.config), "config")
    assert layout.src_embedding.embedding.weight.is_meta
    real_state, meta_state = real.state_dict(keep_vars=True), layout.state_dict(keep_vars=True)
    assert real_state.keys() == meta_state.keys()
    for name, tensor in real_state.items():
        assert meta_state[name].shape == tensor.shape and meta_state[name].dtype == tensor.dtype, name
    tied = {n for n in real_state if real_state[n] is real_state["output_projection.weight"]}
    assert len(tied) > 1
    assert tied == {n for n in meta_state if meta_state[n] is meta_state["output_projection.weight"]}
    assert torch.get_default_device() == torch.device("cpu")  # the meta device does not leak
