"""`aiayn serve --model A --model B`: the service decodes the ensemble of `aiayn.load([A, B])`,
with every request option, shows its attention (the mean of the models'), and refuses models that
cannot be combined with one line before it serves."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import aiayn
from aiayn.cli.main import main
from aiayn.inference.words import translation_details
from decoding.conftest import SOURCES
from inference.ensemble_dirs import REFUSALS

from .helpers import ServerProcess, request

pytest.importorskip("fastapi", reason="the 'serve' extra is not installed (pip install -e '.[serve]')")
from fastapi.testclient import TestClient

from aiayn.serve.app import ServeSettings, create_app

TEXTS = [s for s in SOURCES if s]

REQUESTS = {
    "plain": {},
    "nbest_scores_alignments": {"nbest": 2, "token_scores": True, "alignments": True},
    "prefix": {"prefix": "a"},
    "sample": {"sample": True, "seed": 4, "top_k": 6, "top_p": 0.9, "temperature": 0.7},
    "no_repeat_ngram_size": {"no_repeat_ngram_size": 2},
    "repetition_penalty": {"repetition_penalty": 1.4},
}


@pytest.fixture(scope="module")
def ensemble(ensemble_dirs):
    return aiayn.load([ensemble_dirs.a, ensemble_dirs.b], "cpu")


@pytest.fixture(scope="module")
def client(ensemble):
    with TestClient(create_app(ensemble, ServeSettings()), raise_server_exceptions=False) as client:
        yield client


@pytest.mark.parametrize("case", sorted(REQUESTS))
def test_translate_gives_the_ensembles_answers(client, ensemble, case):
    options = dict(REQUESTS[case])
    response = client.post("/v1/translate", json={"text": TEXTS, **options})
    assert response.status_code == 200, response.text
    nbest = options.pop("nbest", 1)
    expected = ensemble.translate_nbest(TEXTS, nbest, beam=4, **options)
    tokenizer = ensemble.tokenizers.target
    answers = response.json()["translations"]
    assert [[t["text"] for t in hyps] for hyps in answers] == [[t.text for t in hyps] for hyps in expected]
    for got, want in zip(answers, expected, strict=True):
        for answer, translation in zip(got, want, strict=True):
            details = translation_details(translation, tokenizer)
            assert answer["score"] == pytest.approx(translation.score, abs=1e-5)
            if "token_scores" in details:
                assert answer["token_scores"] == pytest.approx(details["token_scores"], abs=1e-5)
                assert answer["alignment"] == details["alignment"]


def test_attention_is_the_mean_of_the_models(client, ensemble, ensemble_dirs):
    entry = client.post("/v1/attention", json={"text": TEXTS[0]}).json()
    config, tokenizers = ensemble.config, ensemble.tokenizers
    src = torch.tensor([[*tokenizers.source.encode(TEXTS[0]), config.eos_id]])
    tgt_in = torch.tensor([[config.bos_id, *tokenizers.target.encode(entry["target"])]])
    models = [aiayn.load(d, "cpu").model for d in (ensemble_dirs.a, ensemble_dirs.b)]
    each = [model.attention_maps(src, tgt_in) for model in models]
    for kind in ("encoder", "decoder", "cross"):
        want = np.mean([np.stack([m[0].numpy() for m in getattr(maps, kind)]) for maps in each], axis=0)
        np.testing.assert_allclose(np.array(entry[kind]), want, atol=1e-5)
    info = client.get("/v1/model").json()
    assert info["parameters"] == sum(p.numel() for p in ensemble.model.parameters())


def test_serve_process_with_two_models(ensemble_dirs, ensemble):
    server = ServerProcess(ensemble_dirs.a, "--model", str(ensemble_dirs.b))
    try:
        status, body = request(server.port, "POST", "/v1/translate", {"text": TEXTS, "beam": 2})
        assert status == 200, body
        assert [n[0]["text"] for n in body["translations"]] == ensemble.translate(TEXTS, beam=2)
    finally:
        code, _ = server.stop()
    assert code == 0


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_models_that_cannot_join_are_refused_with_one_line(ensemble_dirs, capsys, name):
    other = getattr(ensemble_dirs, name)
    if other is None:
        pytest.skip("needs the optional extra 'export' (CTranslate2)")
    code = main(["serve", "--model", str(ensemble_dirs.a), "--model", str(other), "--port", "0"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    err = captured.err
    assert err.count("\n") == 1 and err.startswith("aiayn serve: error: ") and REFUSALS[name] in err
