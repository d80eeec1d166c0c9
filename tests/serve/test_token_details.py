"""`POST /v1/translate` with `token_scores` / `alignments`: the library's per-token scores and
Pharaoh alignments; a CTranslate2 model refuses alignments with a 4xx JSON error."""

from __future__ import annotations

import pytest

from aiayn.inference import load
from aiayn.inference.words import parse_pharaoh, pharaoh

from .conftest import SOURCES

pytest.importorskip("fastapi", reason="the 'serve' extra is not installed (pip install -e '.[serve]')")
from fastapi.testclient import TestClient

from aiayn.serve.app import ServeSettings, create_app


def client_for(model) -> TestClient:
    return TestClient(create_app(model, ServeSettings()), raise_server_exceptions=False)


@pytest.mark.parametrize("plain", [True, False])  # batched with others, or decoded alone (a control)
def test_translate_returns_the_library_token_scores_and_alignments(translation_dir, plain):
    translator = load(translation_dir, "cpu")
    controls = {} if plain else {"repetition_penalty": 1.3}
    body = {"text": SOURCES, "beam": 2, "nbest": 2, "token_scores": True, "alignments": True, **controls}
    with client_for(translator) as client:
        response = client.post("/v1/translate", json=body)
        plain_answer = client.post("/v1/translate", json={"text": SOURCES, "beam": 2, "nbest": 2, **controls})
    assert response.status_code == 200, response.text
    expected = translator.translate_nbest(SOURCES, 2, beam=2, token_scores=True, alignments=True, **controls)
    for got, want in zip(response.json()["translations"], expected, strict=True):
        for entry, translation in zip(got, want, strict=True):
            assert entry["text"] == translation.text
            assert entry["token_scores"] == pytest.approx(translation.token_scores, abs=1e-5)
            assert entry["words"] == translation.text.split()
            assert len(entry["word_scores"]) == len(entry["words"])
            assert parse_pharaoh(entry["alignment"]) == translation.alignment
            assert entry["alignment"] == pharaoh(translation.alignment)
    for hyps in plain_answer.json()["translations"]:  # not asked: not there
        assert all(set(entry) == {"text", "score"} for entry in hyps)


def test_alignments_from_a_ctranslate2_model_are_a_4xx_json_error(translation_dir, tmp_path):
    pytest.importorskip("ctranslate2", reason="needs the optional extra 'export'")
    from aiayn.export import export_ctranslate2

    model = load(export_ctranslate2(translation_dir, tmp_path / "ct2"), "cpu")
    with client_for(model) as client:
        refused = client.post("/v1/translate", json={"text": SOURCES, "alignments": True})
        scored = client.post("/v1/translate", json={"text": SOURCES[:1], "token_scores": True})
    assert refused.status_code == 422 and refused.headers["content-type"].startswith("application/json")
    assert "not available with a CTranslate2 model" in refused.json()["error"]["message"]
    assert scored.status_code == 200, scored.text
    entry = scored.json()["translations"][0][0]
    torch_entry = load(translation_dir, "cpu").translate_nbest(SOURCES[:1], 1, token_scores=True)[0][0]
    assert entry["text"] == torch_entry.text
    # CTranslate2's own scores (score_batch) are aiayn's; an output cut at max_len loses its last
    assert len(entry["token_scores"]) >= len(torch_entry.tokens) - 1
    shared = len(entry["token_scores"])
    assert entry["token_scores"] == pytest.approx(torch_entry.token_scores[:shared], abs=1e-4)
