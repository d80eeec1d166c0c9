"""The service fuzzed from its own OpenAPI document (Schemathesis, in-process through ASGI: no port).

Every operation gets schema-valid requests and, where it takes a body, schema-violating ones, under
Schemathesis's default checks: no 5xx, every status code documented, every response (errors too)
conforming to its schema, valid data accepted and invalid data refused; and no response body holds a
number that is not finite (`finite_numbers`). Two phases run: Schemathesis's coverage phase, the
boundary values of every declared range (each minimum and maximum, just inside and just outside,
every enum value, ...), and its generate phase, random requests. A fixed seed and a cap on generated
examples keep the run deterministic. What the fuzz found is kept below as regression examples.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi", reason="the 'serve' extra is not installed (pip install -e '.[serve]')")
pytest.importorskip("schemathesis", reason="the 'dev' extra is not installed (schemathesis)")
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, seed, settings
from schemathesis import GenerationMode
from schemathesis.core.failures import FailureGroup
from schemathesis.generation.feedback import NO_FEEDBACK
from schemathesis.generation.hypothesis.builder import add_coverage
from schemathesis.generation.overrides import Override

from aiayn.inference import load
from aiayn.serve.app import ServeSettings, create_app
from aiayn.serve.served_model import ServedModel

API_KEY = "fuzz-key"
EXAMPLES = 25
"""Examples per operation and generation mode: enough to reach every field, few enough for `make test`."""

# The schema cannot say a request's cross-field rules (nbest <= beam, one prefix per sentence) nor the
# limits that depend on the model or the command line (tokens per sentence, sentences per request):
# schema-valid requests that break them get a documented 413 or 422, which is right.
SCHEMA_CANNOT_SAY = ["2xx", "413", "422"]


def as_a_server_runs_it(app):
    """`app` as uvicorn runs it: an exception after the 500 went out is logged, not raised to the client
    (Starlette re-raises it for the server; in-process it would stop the run before the check sees 500)."""

    async def served(scope, receive, send) -> None:
        try:
            await app(scope, receive, send)
        except Exception:
            if scope["type"] != "http":
                raise

    return served


NUMBER_FIELDS = {"score", "token_scores", "word_scores"}
"""The response fields that hold numbers only: a null among them is a non-finite number (pydantic writes
NaN and infinity as null)."""


def finite_numbers(ctx, response, case) -> None:
    """A Schemathesis check: the body is strict JSON (no NaN, Infinity, -Infinity) and no number field
    holds null in place of a number."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"a non-finite number ({constant}) in the response body")

    try:
        body = json.loads(response.text, parse_constant=refuse)
    except ValueError:
        return  # not JSON: the other checks judge that
    stack = [body]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if key in NUMBER_FIELDS and (item is None or (isinstance(item, list) and None in item)):
                    raise AssertionError(f"a non-finite number (written as null) in {key!r} of the body")
                stack.append(item)
        elif isinstance(value, list):
            stack.extend(value)


def fuzz(app, api_key: str | None = None, examples: int = EXAMPLES) -> int:
    """Run Schemathesis over every operation of `app`'s OpenAPI document, its coverage phase then its
    generate phase; return the requests sent. Raises (a Schemathesis failure group) on the first
    operation that fails a check."""
    config = schemathesis.config.SchemathesisConfig.from_dict(
        {"checks": {"positive_data_acceptance": {"expected-statuses": SCHEMA_CANNOT_SAY}}}
    )
    schema = schemathesis.openapi.from_asgi("/openapi.json", as_a_server_runs_it(app), config=config)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    sent = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        modes = [GenerationMode.POSITIVE]
        if operation.body:  # an operation without parameters has no invalid request to make
            modes.append(GenerationMode.NEGATIVE)
        for mode in modes:

            def call(case) -> None:
                nonlocal sent
                sent += 1
                case.call_and_validate(headers=headers, additional_checks=[finite_numbers])

            # the coverage phase: its cases are the test's explicit examples, run before the generated ones
            boundaries = add_coverage(
                given(case=operation.as_strategy(generation_mode=mode))(call), operation, [mode], None,
                Override(), NO_FEEDBACK, schema.config.generation_for(operation=operation, phase="coverage"),
            )
            check = seed(44)(settings(max_examples=examples, deadline=None, database=None,
                                      phases=[Phase.explicit, Phase.generate],
                                      suppress_health_check=list(HealthCheck))(boundaries))
            check()
    return sent


@pytest.fixture(scope="module")
def translation_model(translation_dir):
    return load(translation_dir, "cpu")


def test_every_operation_of_a_translation_service_with_an_api_key(translation_model):
    app = create_app(translation_model, ServeSettings(api_key=API_KEY, max_sentences=8))
    sent = fuzz(app, API_KEY)
    assert sent >= 3 * EXAMPLES  # every operation was reached (POSTs twice: valid and invalid bodies)
    print(f"schemathesis: {sent} requests to the translation service")


def test_every_operation_of_a_language_model_service(lm_dir):
    sent = fuzz(create_app(load(lm_dir, "cpu"), ServeSettings(max_new_tokens=20)))
    assert sent >= 3 * EXAMPLES
    print(f"schemathesis: {sent} requests to the language-model service")


def test_the_fuzz_reports_a_planted_500(translation_model, monkeypatch):
    def broken(self) -> dict:
        raise RuntimeError("planted")

    monkeypatch.setattr(ServedModel, "info", broken)  # GET /v1/model now answers 500
    with pytest.raises(FailureGroup, match="Server error") as failure:
        fuzz(create_app(translation_model, ServeSettings()), examples=3)
    assert "/v1/model" in str(failure.value)


def test_the_fuzz_reaches_the_edges_of_the_declared_ranges(translation_model, monkeypatch):
    """The coverage phase sends each decoding range's bounds (the generate phase alone never sent the
    smallest repetition penalty)."""
    from aiayn.core.decoding_choices import CONTROL_RANGES

    seen: dict[str, set] = {name: set() for name in CONTROL_RANGES}
    app = create_app(translation_model, ServeSettings(api_key=API_KEY, max_sentences=8))
    original = schemathesis.generation.case.Case.call

    def recording(self, *args, **kwargs):
        if isinstance(self.body, dict):
            for name, values in seen.items():
                value = self.body.get(name)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    values.add(value)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(schemathesis.generation.case.Case, "call", recording)
    fuzz(app, API_KEY, examples=1)
    for name, allowed in CONTROL_RANGES.items():
        assert allowed.low in seen[name], name
        if allowed.high is not None and not allowed.high_open:
            assert allowed.high in seen[name], name


def test_the_fuzz_reports_a_planted_nan(translation_model, monkeypatch):
    """A NaN score past the last check is caught in the response body. Planted: the last check replaced
    by one that turns every score into NaN (so that blank texts, which the coverage phase sends, get one)."""
    from aiayn.decoding.common import Hypothesis
    from aiayn.inference import base

    def spoil(results, *args) -> None:
        for hyps in results:
            hyps[:] = [Hypothesis(h.tokens, float("nan")) for h in hyps]

    monkeypatch.setattr(base, "check_finite_scores", spoil)
    with pytest.raises(FailureGroup, match="non-finite number"):
        fuzz(create_app(translation_model, ServeSettings(api_key=API_KEY)), API_KEY, examples=3)


def test_the_fuzz_reports_an_undocumented_error_body(translation_model, monkeypatch):
    """An error body off the documented schema is caught too (the checks are not only about 5xx)."""
    from aiayn.serve import app as app_module

    monkeypatch.setattr(app_module, "error_response",
                        lambda status, message, headers=None, **extra: app_module.JSONResponse(
                            {"detail": message}, status, headers=headers))
    with pytest.raises(FailureGroup, match="Response violates schema"):
        fuzz(create_app(translation_model, ServeSettings(api_key=API_KEY)))


# Regression examples: what the fuzz found, each one request.


@pytest.fixture(scope="module")
def client(translation_model):
    with TestClient(create_app(translation_model, ServeSettings(api_key=API_KEY)),
                    raise_server_exceptions=False) as client:
        client.headers["Authorization"] = f"Bearer {API_KEY}"
        yield client


def test_an_integral_number_is_an_integer(client):
    """The schema's `integer` admits 5.0 (JSON has one number type): it was refused with 422."""
    response = client.post("/v1/translate", json={"text": ["ja"], "beam": 2.0, "nbest": 1.0, "top_k": 5.0})
    assert response.status_code == 200, response.text
    response = client.post("/v1/translate", json={"text": ["ja"], "beam": 2.5})
    assert response.status_code == 422 and "beam" in response.json()["error"]["message"]


def test_optional_bounds_are_in_the_schema(client):
    """`top_k`'s lower bound was missing from the document, so -5 looked valid and was refused."""
    properties = client.get("/openapi.json").json()["components"]["schemas"]["TranslateRequest"]["properties"]
    assert {"minimum": 0, "type": "integer"} in properties["top_k"]["anyOf"]


def test_a_blank_attention_text_is_refused_by_the_schema(client):
    """A blank text was schema-valid and refused by the handler; the schema now says `pattern: \\S`."""
    schema = client.get("/openapi.json").json()["components"]["schemas"]["AttentionRequest"]
    assert schema["properties"]["text"]["pattern"] == r"\S"
    response = client.post("/v1/attention", json={"text": "  "})
    assert response.status_code == 422 and "empty" in response.json()["error"]["message"]


@pytest.mark.parametrize("status", ["400", "401", "404", "413", "422", "503"])
def test_error_statuses_are_documented_with_the_error_body(client, status):
    """400 (a body that is not JSON), 404 (the other kind of model) and the rest were undocumented, and
    the documented 422 had FastAPI's body, not the service's `{"error": ...}`."""
    document = client.get("/openapi.json").json()
    assert "/v1/generate" not in document["paths"]  # a translation service: it answers 404
    for path in ("/v1/translate", "/v1/attention"):
        response = document["paths"][path]["post"]["responses"][status]
        documented = response["content"]["application/json"]["schema"]
        assert documented == {"$ref": "#/components/schemas/ErrorResponse"}
    assert "401" in document["paths"]["/v1/model"]["get"]["responses"]
    body = client.post("/v1/translate", content=b"\x00", headers={"Content-Type": "application/json"})
    assert body.status_code == 400 and set(body.json()["error"]) == {"status", "message"}


def test_the_api_key_is_in_the_document(client, translation_model):
    """With --api-key, /v1/* declares the bearer scheme (so the fuzz also checks that a request
    without the key is refused); without it, nothing is declared."""
    document = client.get("/openapi.json").json()
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert document["paths"]["/v1/translate"]["post"]["security"] == [{"bearer": []}]
    assert "security" not in document["paths"]["/health"]["get"]
    with TestClient(create_app(translation_model, ServeSettings())) as open_client:
        assert "securitySchemes" not in open_client.get("/openapi.json").json()["components"]


def test_the_fuzz_reports_an_api_key_that_is_not_checked(translation_model, monkeypatch):
    """A service that declares the key but lets requests without it through fails the fuzz."""
    from aiayn.serve import app as app_module

    monkeypatch.setattr(app_module.RequestGuard, "_authorised", lambda self, headers: True)
    with pytest.raises(FailureGroup, match="API accepts requests without authentication"):
        fuzz(create_app(translation_model, ServeSettings(api_key=API_KEY)), API_KEY, examples=5)


def test_the_api_key_is_required(client):
    response = client.get("/v1/model", headers={"Authorization": "Bearer wrong"})
    assert response.status_code == 401
    assert json.loads(response.text)["error"]["status"] == 401
