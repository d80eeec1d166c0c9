"""`POST /v1/translate` with `include` / `exclude`: the same translations as the library gives,
`constraints_met` on each, and a 422 (never 500) for requests that cannot be honoured."""

from __future__ import annotations

import pytest

from aiayn.inference import load

from .conftest import SOURCES

pytest.importorskip("fastapi", reason="the 'serve' extra is not installed (pip install -e '.[serve]')")
from fastapi.testclient import TestClient

from aiayn.serve.app import ServeSettings, create_app


@pytest.fixture(scope="module")
def client(translation_dir):
    app = create_app(load(translation_dir, "cpu"), ServeSettings())
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def test_constrained_translations_equal_the_library(client, translation_dir):
    texts, include, exclude = SOURCES[:2], [["dog"], []], [[], ["a"]]
    body = {"text": texts, "beam": 3, "nbest": 2, "include": include, "exclude": exclude}
    response = client.post("/v1/translate", json=body)
    assert response.status_code == 200, response.text
    got = response.json()["translations"]
    translator = load(translation_dir, "cpu")
    expected = translator.translate_nbest(texts, 2, beam=3, include=include, exclude=exclude)
    assert [[t["text"] for t in hyps] for hyps in got] == [[t.text for t in hyps] for hyps in expected]
    assert all(t["constraints_met"] == ("dog" in t["text"]) for t in got[0])
    assert all("a" not in t["text"] for t in got[1])
    plain = client.post("/v1/translate", json={"text": texts}).json()["translations"]
    assert "constraints_met" not in plain[0][0]


@pytest.mark.parametrize(("body", "fragment"), [
    ({"text": ["ja"], "include": [["dog"], ["cat"]]}, "include has 2 lists for 1 sentences"),
    ({"text": ["ja"], "include": [["dog"]], "beam": 1}, "greedy search cannot"),
    ({"text": ["ja"], "include": [[" "]]}, "has no tokens"),
    ({"text": ["ja"], "include": "dog"}, ""),
])
def test_bad_constraints_get_422(client, body, fragment):
    response = client.post("/v1/translate", json=body)
    assert response.status_code == 422, response.text
    assert fragment in response.json()["error"]["message"] or fragment in response.text
