"""Token ids are checked where they enter aiayn, not in the model's passes (issue 24).

A model directory whose tokenizer has more ids than the model's vocabulary is refused with one
clear line, naming the tokenizer file and the first token without an embedding row, through
every public entry point: the command line (`translate`, `evaluate`, `score`, `serve`),
`aiayn.load(DIR).translate(...)`, and the service's engine behind its app. Ids handed in by
hand (a language model's prompt) are checked where the sampler takes them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

import aiayn
from aiayn.cli.main import main
from aiayn.data import Tokenizer
from aiayn.data.tokenizer import JOINT_FILE
from aiayn.errors import DataError
from aiayn.lm.generate import generate
from aiayn.model import DecoderOnlyLM, ModelConfig

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "legacy_dates"
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


@pytest.mark.parametrize("command", ["translate", "evaluate", "score"])
def test_the_command_line(model_dir: Path, tmp_path: Path, capsys, command: str) -> None:
    source, reference = tmp_path / "in.txt", tmp_path / "ref.txt"
    source.write_text("1 May 2020\n", encoding="utf-8")
    reference.write_text("2020-05-01\n", encoding="utf-8")
    rest = ["--device", "cpu"] if command == "translate" else ["--ref", str(reference)]
    args = [command, "--model", str(model_dir), "--input", str(source), *rest]
    assert main(args) == 2
    assert_names_the_token(error_line(capsys), model_dir)


def test_the_service(model_dir: Path, capsys) -> None:
    pytest.importorskip("fastapi", reason="the 'serve' extra is not installed")
    from aiayn.serve.app import create_app
    from aiayn.serve.engine import load_engine

    with pytest.raises(DataError) as error:  # the app is never built on such a directory
        create_app(load_engine(model_dir, "cpu"))
    assert_names_the_token(str(error.value), model_dir)
    assert main(["serve", "--model", str(model_dir), "--port", "0", "--device", "cpu"]) == 2
    assert_names_the_token(error_line(capsys), model_dir)


def test_a_language_model_prompt_outside_the_vocabulary() -> None:
    torch.manual_seed(0)
    sizes = {"d_model": 16, "num_heads": 2, "num_decoder_layers": 1, "d_ff": 32, "max_len": 16}
    config = ModelConfig.tiny(vocab_size=11, **sizes)
    model = DecoderOnlyLM(config).eval()
    assert len(generate(model, [4, 5], max_new_tokens=2, seed=0)) <= 2  # in the vocabulary: fine
    for prompt in ([4, 11], [-1, 4]):
        with pytest.raises(DataError, match=r"prompt_ids.*outside the model's vocabulary \[0, 11\)"):
            generate(model, prompt, max_new_tokens=2, seed=0)


def test_the_service_of_a_language_model(tmp_path: Path) -> None:
    """A language model's service refuses a prompt holding the token without a row (422, one
    line), rather than failing inside the model."""
    pytest.importorskip("fastapi", reason="the 'serve' extra is not installed")
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.engine import load_engine

    tokenizer = Tokenizer.train("char", ["the cat sat on the mat"])
    sizes = {"d_model": 16, "num_heads": 2, "num_decoder_layers": 1, "d_ff": 32, "max_len": 16}
    config = ModelConfig.tiny(vocab_size=tokenizer.vocab_size, unk_id=None, **sizes)
    DecoderOnlyLM(config).save_pretrained(tmp_path)
    tokenizer.save(tmp_path / JOINT_FILE)
    grown(tmp_path)
    with TestClient(create_app(load_engine(tmp_path, "cpu")), raise_server_exceptions=False) as client:
        assert client.post("/v1/generate", json={"prompt": "the", "max_new_tokens": 2}).status_code == 200
        response = client.post("/v1/generate", json={"prompt": f"the {EXTRA}", "max_new_tokens": 2})
    assert response.status_code == 422, response.text
    assert "outside the model's vocabulary" in response.json()["error"]["message"]
