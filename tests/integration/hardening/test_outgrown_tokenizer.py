"""Token ids are checked where they enter aiayn, not in the model's passes (issue 24).

A model directory whose tokenizer has more ids than the model's vocabulary is refused with one
clear line naming the tokenizer file and the first token without an embedding row (every
command and serve: tests/inference/test_entry_points.py). Ids handed in by hand (a language
model's prompt) are checked where the sampler takes them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

import aiayn
from aiayn.core.errors import DataError
from aiayn.data import Tokenizer
from aiayn.data.tokenizer import JOINT_FILE
from aiayn.decoding.sampling import Sampling, sample_stream
from aiayn.model import DecoderOnlyLM, ModelConfig

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "legacy_dates"
EXTRA = "<|extra|>"


def grown(directory: Path, file_name: str = JOINT_FILE) -> Path:
    """Add one token to the directory's tokenizer: one more than the model's embedding has."""
    tokenizer = Tokenizer.load(directory / file_name)
    tokenizer.hf.add_tokens([EXTRA])
    tokenizer.save(directory / file_name)
    return directory / file_name


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """The legacy dates translation model with a tokenizer grown past its embedding."""
    directory = tmp_path / "model"
    shutil.copytree(FIXTURE, directory)
    grown(directory)
    return directory


def assert_names_the_token(message: str, directory: Path) -> None:
    assert str(directory / JOINT_FILE) in message, message
    assert repr(EXTRA) in message and "no row in the model's source embedding" in message, message


def error_line(capsys) -> str:
    """The one error line of a failed command (other stderr lines are the run's log)."""
    errors = [line for line in capsys.readouterr().err.splitlines() if ": error: " in line]
    assert len(errors) == 1, errors
    return errors[0]


def test_the_python_api(model_dir: Path) -> None:
    with pytest.raises(DataError) as error:
        aiayn.load(model_dir).translate(["1 May 2020"])
    assert_names_the_token(str(error.value), model_dir)






def test_a_language_model_prompt_outside_the_vocabulary() -> None:
    torch.manual_seed(0)
    sizes = {"d_model": 16, "num_heads": 2, "num_decoder_layers": 1, "d_ff": 32, "max_len": 16}
    config = ModelConfig.tiny(vocab_size=11, **sizes)
    model = DecoderOnlyLM(config).eval()
    assert len(list(sample_stream(model, [4, 5], 2, Sampling(), seed=0))) <= 2  # in the vocabulary: fine
    for prompt in ([4, 11], [-1, 4]):
        with pytest.raises(DataError, match=r"prompt_ids.*outside the model's vocabulary \[0, 11\)"):
            list(sample_stream(model, prompt, 2, Sampling(), seed=0))

