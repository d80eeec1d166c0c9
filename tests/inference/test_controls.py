"""The decoding controls (prefix, sampling, n-gram blocking, repetition penalty, length ratio)
through every entry point: `aiayn.load(...).translate`, the CTranslate2 runtime, `aiayn
translate` and `POST /v1/translate`; and their bad values as one clear error (4xx in serve)."""

from __future__ import annotations

import pytest

from aiayn.cli.main import main
from aiayn.core.errors import ConfigError
from aiayn.inference import load

pytest.importorskip("ctranslate2", reason="needs the optional extra 'export'")
from aiayn.export import export_ctranslate2
from export.helpers import SOURCES, make_translation_dir

TEXTS = [s for s in SOURCES if s]


@pytest.fixture(scope="module")
def runtimes(tmp_path_factory):
    """(model directory, its PyTorch translator, its CTranslate2 float32 translator)."""
    root = tmp_path_factory.mktemp("controls")
    make_translation_dir(root / "model", "post-sinusoidal-shared")
    ct2 = export_ctranslate2(root / "model", root / "ct2")
    return root / "model", load(root / "model", "cpu"), load(ct2, "cpu")


def repeated_ngram(tokens: list[int], size: int) -> bool:
    grams = [tuple(tokens[i : i + size]) for i in range(len(tokens) - size + 1)]
    return len(grams) != len(set(grams))


@pytest.mark.parametrize("beam", [1, 4])
def test_prefix_is_forced_then_continued(runtimes, beam):
    _, torch_runtime, ct2_runtime = runtimes
    for runtime in (torch_runtime, ct2_runtime):
        prefixes = ["a d", None, "the", "xy", "", "two", "an"]
        outputs = runtime.translate_nbest(TEXTS, 1, beam=beam, prefix=prefixes, max_len_extra=8)
        plain = runtime.translate(TEXTS, beam=beam, max_len_extra=8)
        for output, prefix, unforced in zip(outputs, prefixes, plain, strict=True):
            wanted = runtime.tokenizers.target.encode(prefix or "")
            assert output[0].tokens[: len(wanted)] == wanted  # forced
            if not wanted:
                assert output[0].text == unforced
        assert any(len(o[0].tokens) > len(runtime.tokenizers.target.encode(p or "")) for o, p in
                   zip(outputs, prefixes, strict=True))  # continued after the prefix
    assert torch_runtime.translate(TEXTS, beam=beam, prefix="a d", max_len_extra=8) == ct2_runtime.translate(
        TEXTS, beam=beam, prefix="a d", max_len_extra=8
    )


@pytest.mark.parametrize("size", [1, 2, 3])
def test_no_repeated_ngram_of_the_size(runtimes, size):
    _, torch_runtime, ct2_runtime = runtimes
    for runtime in (torch_runtime, ct2_runtime):
        for beam in (1, 4):
            outputs = runtime.translate_nbest(TEXTS, 1, beam=beam, no_repeat_ngram_size=size)
            assert not any(repeated_ngram(o[0].tokens, size) for o in outputs)
    plain = torch_runtime.translate_nbest(TEXTS, 1, beam=4)
    assert any(repeated_ngram(o[0].tokens, size) for o in plain)  # the test would catch a no-op


@pytest.mark.parametrize("beam", [1, 4])
def test_repetition_penalty_same_outputs_as_ctranslate2(runtimes, beam):
    _, torch_runtime, ct2_runtime = runtimes
    for penalty in (1.2, 3.0):
        ours = torch_runtime.translate(TEXTS, beam=beam, repetition_penalty=penalty)
        assert ours == ct2_runtime.translate(TEXTS, beam=beam, repetition_penalty=penalty)
    assert ours != torch_runtime.translate(TEXTS, beam=beam)  # the penalty changed something


def test_sampling_reproducible_per_seed_and_different_across_seeds(runtimes):
    _, torch_runtime, ct2_runtime = runtimes
    for runtime in (torch_runtime, ct2_runtime):
        first, again, other = (
            runtime.translate(TEXTS * 3, sample=True, seed=seed, top_k=0, top_p=0.95, temperature=1.5)
            for seed in (1, 1, 2)
        )
        assert first == again != other
        greedy = runtime.translate(TEXTS, beam=1)
        assert runtime.translate(TEXTS, sample=True, seed=5, temperature=0) == greedy


def test_max_output_ratio_limits_the_length(runtimes):
    _, torch_runtime, ct2_runtime = runtimes
    counts = torch_runtime.count_tokens(TEXTS)  # source tokens + <eos>
    for runtime in (torch_runtime, ct2_runtime):
        for beam in (1, 4):
            outputs = runtime.translate_nbest(TEXTS, 1, beam=beam, max_output_ratio=0.5)
            for output, count in zip(outputs, counts, strict=True):
                assert len(output[0].tokens) <= -(-count // 2)


def test_bad_values_are_one_clear_error(runtimes):
    _, torch_runtime, ct2_runtime = runtimes
    for runtime in (torch_runtime, ct2_runtime):
        with pytest.raises(ConfigError, match="top_p must be a finite number in"):
            runtime.translate(TEXTS, sample=True, top_p=0.0)
        with pytest.raises(ConfigError, match="top_p must be a finite number in"):
            runtime.translate(TEXTS, sample=True, top_p=1.5)
        with pytest.raises(ConfigError, match="no_repeat_ngram_size must be an integer >= 0"):
            runtime.translate(TEXTS, no_repeat_ngram_size=-1)
        with pytest.raises(ConfigError, match="prefix of line 1 has 12 tokens; its output length limit is 5"):
            runtime.translate(["ja"], prefix="a" * 12, max_len_extra=2)
        with pytest.raises(ConfigError, match="unknown decoding control"):
            runtime.translate(TEXTS, top_z=3)


def test_cli_controls(runtimes, capsys):
    model_dir, torch_runtime, _ = runtimes
    text = TEXTS[0]
    assert main(["translate", "--model", str(model_dir), "--device", "cpu", "--text", text,
                 "--prefix", "a d", "--no-repeat-ngram-size", "2", "--repetition-penalty", "1.2"]) == 0
    out = capsys.readouterr().out
    assert out == torch_runtime.translate([text], prefix="a d", no_repeat_ngram_size=2,
                                          repetition_penalty=1.2)[0] + "\n"
    assert out.startswith("a d")
    for argument, value, fragment in (("--top-p", "0", "--top-p"), ("--no-repeat-ngram-size", "-1",
                                       "--no-repeat-ngram-size")):
        assert main(["translate", "--model", str(model_dir), "--text", text, argument, value]) == 2
        err = capsys.readouterr().err
        assert fragment in err and len(err.strip().splitlines()) == 1
    assert main(["translate", "--model", str(model_dir), "--device", "cpu", "--text", "ja",
                 "--prefix", "a" * 30, "--max-len", "2"]) == 2
    err = capsys.readouterr().err
    assert "prefix of line 1 has 30 tokens" in err and len(err.strip().splitlines()) == 1


def test_cli_sampling_seed(runtimes, capsys, tmp_path):
    model_dir = runtimes[0]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS * 3) + "\n")
    outputs = []
    for seed in ("1", "1", "2"):
        assert main(["translate", "--model", str(model_dir), "--device", "cpu", "--input", str(source),
                     "--sample", "--seed", seed, "--top-k", "0", "--temperature", "1.5"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] != outputs[2]


def test_serve_controls(runtimes):
    pytest.importorskip("fastapi", reason="the 'serve' extra is not installed")
    from fastapi.testclient import TestClient

    from aiayn.serve.app import ServeSettings, create_app

    model_dir, torch_runtime, _ = runtimes
    app = create_app(load(model_dir, "cpu"), ServeSettings())
    with TestClient(app, raise_server_exceptions=False) as client:
        def post(**body):
            return client.post("/v1/translate", json={"text": TEXTS, **body})

        response = post(prefix="a d", no_repeat_ngram_size=2, repetition_penalty=1.2, max_output_ratio=3.0)
        assert response.status_code == 200, response.text
        expected = torch_runtime.translate(
            TEXTS, prefix="a d", no_repeat_ngram_size=2, repetition_penalty=1.2, max_output_ratio=3.0
        )
        assert [t[0]["text"] for t in response.json()["translations"]] == expected
        first, again, other = (post(sample=True, seed=s, top_k=0, temperature=1.5).json() for s in (1, 1, 2))
        assert first == again != other
        per_sentence = post(prefix=["a d", None, "the", "", "", "", ""]).json()["translations"]
        assert per_sentence[0][0]["text"].startswith("a d") and per_sentence[2][0]["text"].startswith("the")
        for body, status, fragment in (
            ({"sample": True, "top_p": 0}, 422, "top_p"),
            ({"sample": True, "top_p": 1.5}, 422, "top_p"),
            ({"no_repeat_ngram_size": -1}, 422, "no_repeat_ngram_size"),
            ({"prefix": "a" * 45}, 422, "prefix of line"),
            ({"prefix": ["a", "b"]}, 422, "prefixes"),
        ):
            response = post(**body)
            assert response.status_code == status, response.text
            assert response.headers["content-type"].startswith("application/json")
            assert fragment in response.text and "Traceback" not in response.text
