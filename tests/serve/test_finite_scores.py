"""The service's decoding fields have the command line's ranges (`aiayn.core.decoding_choices`), declared in
the OpenAPI document: the repetition penalty 6e-239 answered 200 with `"score": null`."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("fastapi", reason="the 'serve' extra is not installed (pip install -e '.[serve]')")
from fastapi.testclient import TestClient

from aiayn.core.decoding_choices import CONTROL_RANGES, FLOAT32_TINY
from aiayn.inference import load
from aiayn.serve.app import ServeSettings, create_app


@pytest.fixture(scope="module")
def client(translation_dir):
    with TestClient(create_app(load(translation_dir, "cpu"), ServeSettings())) as client:
        yield client


def test_the_penalty_that_answered_null_is_refused(client):
    response = client.post("/v1/translate", json={"text": ["ja"], "repetition_penalty": 6e-239})
    assert response.status_code == 422 and "repetition_penalty" in response.json()["error"]["message"]
    edge = client.post("/v1/translate", json={"text": ["ja", "zwei"], "repetition_penalty": FLOAT32_TINY})
    assert edge.status_code == 200
    assert all(math.isfinite(t["score"]) for ts in edge.json()["translations"] for t in ts)


def test_the_document_declares_the_ranges_of_the_command_line(client):
    properties = client.get("/openapi.json").json()["components"]["schemas"]["TranslateRequest"]["properties"]
    names = {"minimum": "ge", "exclusiveMinimum": "gt", "maximum": "le", "exclusiveMaximum": "lt"}
    for name, allowed in CONTROL_RANGES.items():
        field = properties[name]
        declared = next((f for f in field.get("anyOf", [field]) if f.get("type") != "null"), field)
        bounds = {names[key]: value for key, value in declared.items() if key in names}
        assert bounds == allowed.schema_bounds(), name
