"""The service's API through FastAPI's test client: every endpoint, every error status.

Answers must equal what the library gives directly (`aiayn.load`'s translators and generators,
attention maps),
bad input must get its 4xx with a JSON error (never 500, never a traceback).
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from aiayn import formats
from aiayn.core.errors import CheckpointError
from aiayn.data.special_tokens import SpecialTokens
from aiayn.data.tokenizer import JOINT_FILE, Tokenizer
from aiayn.inference import TorchGenerator, Translator, load
from aiayn.model import DecoderOnlyLM

from .conftest import SOURCES

pytest.importorskip("fastapi", reason="the 'serve' extra is not installed (pip install -e '.[serve]')")
from fastapi.testclient import TestClient

from aiayn.serve.app import ServeSettings, create_app


def client_for(model_dir, **settings) -> TestClient:
    app = create_app(load(model_dir, "cpu"), ServeSettings(**settings))
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture(scope="module")
def client(translation_dir):
    with client_for(translation_dir, max_sentences=8, max_request_bytes=4096) as client:
        yield client


@pytest.fixture(scope="module")
def lm_client(lm_dir):
    with client_for(lm_dir, max_new_tokens=50) as client:
        yield client


def assert_error(response, status: int, fragment: str = "") -> dict:
    """A JSON error of `status` whose message holds `fragment`, without any traceback."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["status"] == status
    assert fragment in error["message"], error["message"]
    assert "Traceback" not in response.text and 'File "' not in response.text
    return error


# ------------------------------------------------------------------ endpoints
def test_translate_gives_the_translators_nbest_lists(client, translation_dir):
    translator = load(translation_dir, "cpu")
    sentences = [*SOURCES, ""]
    response = client.post("/v1/translate", json={"text": sentences, "beam": 3, "alpha": 0.6, "nbest": 2})
    assert response.status_code == 200, response.text
    got = response.json()["translations"]
    expected = translator.translate_nbest(sentences, 2, beam=3, alpha=0.6)
    assert len(got) == len(sentences)
    for entries, nbest in zip(got[:-1], expected[:-1], strict=True):
        assert [e["text"] for e in entries] == [t.text for t in nbest]
        np.testing.assert_allclose([e["score"] for e in entries], [t.score for t in nbest], atol=1e-4)
    # an empty line gives an empty translation, scored with its <eos> (as `aiayn score` scores it)
    assert got[-1] == [{"text": "", "score": pytest.approx(translator.score([""], [""])[0], abs=1e-4)}]


def test_translate_defaults_are_beam_4_and_one_entry(client, translation_dir):
    translator = load(translation_dir, "cpu")
    response = client.post("/v1/translate", json={"text": SOURCES[:2]})
    assert [[e["text"] for e in n] for n in response.json()["translations"]] == [
        [t] for t in translator.translate(SOURCES[:2], beam=4)
    ]
    greedy = client.post("/v1/translate", json={"text": SOURCES[:1], "beam": 1}).json()
    assert greedy["translations"][0][0]["text"] == translator.translate(SOURCES[:1], beam=1)[0]
    assert client.post("/v1/translate", json={"text": []}).json() == {"translations": []}


def test_attention_gives_every_layer_and_head(client, translation_dir):
    translator = load(translation_dir, "cpu")
    response = client.post("/v1/attention", json={"text": SOURCES[0]})
    assert response.status_code == 200, response.text
    entry = response.json()
    assert entry["source"] == SOURCES[0] and entry["translated"]
    tokens = translator.translate_nbest([SOURCES[0]], 1, beam=4)[0][0].tokens
    limit = translator.config.max_len - 1  # what fits after <bos>
    assert entry["target"] == translator.tokenizers.target.decode(tokens[:limit])
    assert entry["source_tokens"][-1] == "<eos>" and entry["target_tokens"][0] == "<bos>"
    tokenizer, config = translator.tokenizers.target, translator.model.config
    src = torch.tensor([[*translator.tokenizers.source.encode(SOURCES[0]), config.eos_id]])
    tgt_in = torch.tensor([[config.bos_id, *tokenizer.encode(entry["target"])]])
    expected = translator.model.attention_maps(src, tgt_in)
    for kind, layers in (("encoder", 2), ("decoder", 3), ("cross", 3)):
        got = np.array(entry[kind])  # (L, H, Q, K)
        assert got.shape[:2] == (layers, 2)
        want = np.stack([m[0].numpy() for m in getattr(expected, kind)])
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_attention_uses_the_requested_beam(client, translation_dir, monkeypatch):
    import aiayn.plots.attention_data as attention_data

    beams = []
    real = attention_data.attention_examples

    def spy(translator, sources, targets=None, beam=4, where=None):
        beams.append(beam)
        return real(translator, sources, targets, beam, where)

    monkeypatch.setattr(attention_data, "attention_examples", spy)
    translator = load(translation_dir, "cpu")
    limit = translator.config.max_len - 1  # what fits after <bos>
    for beam in (1, 3):
        entry = client.post("/v1/attention", json={"text": SOURCES[1], "beam": beam}).json()
        tokens = translator.translate_nbest(SOURCES[1:2], 1, beam=beam)[0][0].tokens
        assert entry["target"] == translator.tokenizers.target.decode(tokens[:limit])
    assert client.post("/v1/attention", json={"text": SOURCES[1]}).status_code == 200
    assert beams == [1, 3, 4]  # 4: the default
    assert_error(client.post("/v1/attention", json={"text": SOURCES[1], "beam": 0}), 422, "beam")
    assert_error(client.post("/v1/attention", json={"text": SOURCES[1], "beam": 17}), 422, "beam")


def test_model_reports_task_sizes_parameters_and_special_tokens(client, translation_dir):
    info = client.get("/v1/model").json()
    model = load(translation_dir, "cpu").model
    assert info["task"] == "translation" and info["engine"] == "aiayn"
    assert info["sizes"]["d_model"] == 32 and info["sizes"]["num_decoder_layers"] == 3
    assert info["sizes"]["max_len"] == model.config.max_len
    assert info["parameters"] == sum(p.numel() for p in model.parameters())
    config = model.config
    assert info["special_tokens"] == {
        "pad": {"id": config.pad_id, "token": "<pad>"},
        "bos": {"id": config.bos_id, "token": "<bos>"},
        "eos": {"id": config.eos_id, "token": "<eos>"},
        "unk": {"id": config.unk_id, "token": "<unk>"},
    }
    assert info["limits"]["max_sentences"] == 8 and info["limits"]["max_request_bytes"] == 4096


def test_special_ids_come_from_the_model_config(reordered_specials_dir):
    translator = load(reordered_specials_dir, "cpu")
    config, tokenizer = translator.model.config, translator.tokenizers.target
    with client_for(reordered_specials_dir) as client:
        info = client.get("/v1/model").json()
        for name in ("pad", "bos", "eos", "unk"):
            token_id = getattr(config, f"{name}_id")
            assert info["special_tokens"][name] == {"id": token_id, "token": tokenizer.id_to_token(token_id)}
        assert info["special_tokens"]["eos"]["id"] == 1  # not the usual 2
        body = client.post("/v1/translate", json={"text": SOURCES, "beam": 2}).json()
        assert [n[0]["text"] for n in body["translations"]] == translator.translate(SOURCES, beam=2)
        entry = client.post("/v1/attention", json={"text": SOURCES[0]}).json()
    assert entry["source_tokens"][-1] == tokenizer.id_to_token(config.eos_id)
    assert entry["target_tokens"][0] == tokenizer.id_to_token(config.bos_id)


def test_health(client):
    response = client.get("/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok" and response.json()["task"] == "translation"


def test_page_and_its_files_come_from_the_server_only(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp and "connect-src 'self'" in csp
    html = page.text
    assert 'id="heatmap"' in html and 'id="input"' in html and 'id="layer"' in html
    assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", html, re.I)  # no other origin
    scripts = re.findall(r'<script src="([^"]+)"', html)
    styles = re.findall(r'<link rel="stylesheet" href="([^"]+)"', html)
    assert scripts == ["/static/attention_view.js", "/static/page.js"]
    for url in scripts + styles:
        response = client.get(url)
        assert response.status_code == 200, url
        kind = "text/javascript" if url.endswith(".js") else "text/css"
        assert response.headers["content-type"].startswith(kind)
        assert not re.search(r"https?://", response.text)
    # the drawing code is the explorer's own
    from aiayn.explorer import view_file

    assert client.get("/static/attention_view.js").text == view_file("attention_view.js")
    assert_error(client.get("/static/../../config.json"), 404)
    assert_error(client.get("/static/template.html"), 404)


def test_concurrent_requests_are_decoded_together(translation_dir):
    with client_for(translation_dir, batch_wait_ms=400) as client:
        with ThreadPoolExecutor(6) as pool:
            responses = list(pool.map(
                lambda s: client.post("/v1/translate", json={"text": [s], "beam": 2}), SOURCES * 2
            ))
        stats = client.get("/health").json()
    assert all(r.status_code == 200 for r in responses)
    expected = load(translation_dir, "cpu").translate(SOURCES * 2, beam=2)
    assert [r.json()["translations"][0][0]["text"] for r in responses] == expected
    assert stats["jobs"] == 8 and stats["batched_sentences"] == 8
    assert stats["batches"] < 8 and stats["largest_batch"] >= 2


class DelegatingTranslator:
    """Another runtime's translator with aiayn's `Translator` interface (as CTranslate2's)."""

    engine = "other"
    parameters = None

    def __init__(self, translator: Translator, directory) -> None:
        self.directory = directory
        self.calls = 0
        self._translator = translator

    def __getattr__(self, name: str):
        return getattr(self._translator, name)

    def translate_nbest(self, texts, nbest, **options):
        self.calls += 1
        return self._translator.translate_nbest(texts, nbest, **options)


def test_another_translator_plugs_in_behind_the_interface(translation_dir, tmp_path):
    translator = load(translation_dir, "cpu")
    other = DelegatingTranslator(translator, tmp_path)
    assert isinstance(other, Translator)
    with TestClient(create_app(other), raise_server_exceptions=False) as client:
        body = client.post("/v1/translate", json={"text": SOURCES[:2], "beam": 2}).json()
        assert [n[0]["text"] for n in body["translations"]] == translator.translate(SOURCES[:2], beam=2)
        assert other.calls == 1
        info = client.get("/v1/model").json()
        assert info["engine"] == "other" and info["parameters"] is None
        assert_error(client.post("/v1/attention", json={"text": "ja"}), 501, "no attention weights")


def test_a_ctranslate2_export_is_served_through_ctranslate2(tmp_path, translation_dir):
    pytest.importorskip("ctranslate2")
    from aiayn.export.ctranslate2 import export_ctranslate2

    export_ctranslate2(translation_dir, tmp_path / "ct2")
    translator = load(translation_dir, "cpu")
    with TestClient(create_app(load(tmp_path / "ct2", "cpu")), raise_server_exceptions=False) as client:
        info = client.get("/v1/model").json()
        assert info["engine"] == "ctranslate2"
        body = client.post("/v1/translate", json={"text": SOURCES[:3], "beam": 1}).json()
        assert [n[0]["text"] for n in body["translations"]] == translator.translate(SOURCES[:3], beam=1)
        assert_error(client.post("/v1/attention", json={"text": "ja"}), 501, "no attention weights")


def test_a_foreign_ctranslate2_directory_is_a_clear_error(tmp_path):
    pytest.importorskip("ctranslate2")
    for name in ("config.json", "model.bin"):
        (tmp_path / name).write_bytes(b"{}")
    with pytest.raises(CheckpointError, match="aiayn.json"):
        load(tmp_path, "cpu")


# ------------------------------------------------------------------ language models
def test_generate_gives_the_libraries_continuation(lm_client, lm_dir):
    model = formats.from_pretrained(DecoderOnlyLM, lm_dir)
    tokenizer = Tokenizer.load(lm_dir / JOINT_FILE, SpecialTokens.of(model.config))
    body = {"prompt": "the cat", "max_new_tokens": 20, "temperature": 0.9, "top_k": 5, "seed": 7}
    response = lm_client.post("/v1/generate", json=body)
    assert response.status_code == 200, response.text
    generator = TorchGenerator(model, tokenizer)
    ids = list(generator.generate_ids(tokenizer.encode("the cat"), 20, 0.9, 5, None, 7))
    assert response.json() == {"text": tokenizer.decode(ids)}
    assert lm_client.post("/v1/generate", json=body).json() == response.json()  # same seed, same text
    greedy = lm_client.post("/v1/generate", json={"max_new_tokens": 10, "temperature": 0}).json()
    ids = list(generator.generate_ids([model.config.bos_id], 10, 0.0))
    assert greedy["text"] == tokenizer.decode(ids)


def test_lm_attention_and_model_info(lm_client, lm_dir):
    model = formats.from_pretrained(DecoderOnlyLM, lm_dir)
    tokenizer = Tokenizer.load(lm_dir / JOINT_FILE, SpecialTokens.of(model.config))
    entry = lm_client.post("/v1/attention", json={"text": "a dog"}).json()
    assert entry["target"] == "a dog" and "encoder" not in entry and "cross" not in entry
    assert entry["target_tokens"] == ["a", "␣", "d", "o", "g"]
    expected = model.attention_maps(torch.tensor([tokenizer.encode("a dog")]))
    got = np.array(entry["decoder"])
    np.testing.assert_allclose(got, np.stack([m[0].numpy() for m in expected]), atol=1e-5)
    assert np.triu(got, k=1).max() == 0.0  # masked: nothing attends to the future
    info = lm_client.get("/v1/model").json()
    assert info["task"] == "lm" and info["special_tokens"]["unk"] is None  # from the model config
    assert info["special_tokens"]["eos"] == {"id": model.config.eos_id, "token": "<eos>"}


def test_endpoints_of_the_other_task_are_404(client, lm_client):
    assert_error(client.post("/v1/generate", json={"prompt": "a"}), 404, "needs a language model")
    assert_error(lm_client.post("/v1/translate", json={"text": ["a"]}), 404, "needs a translation model")


# ------------------------------------------------------------------ bad input
JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    "body, status, fragment",
    [
        (b'{"text": ["a"]', 400, "malformed JSON"),
        (b"", 400, "needs a JSON body"),
        (b"\xff\xfe{", 400, "malformed JSON"),
        (b"[1, 2]", 422, "must be a JSON object"),
        (b'{"text": "ein hund"}', 422, "text"),
        (b'{"text": [1]}', 422, "text.0"),
        (b'{"text": ["a"], "beam": "4"}', 422, "beam"),
        (b'{"text": ["a"], "beam": 2.5}', 422, "beam"),
        (b'{"text": ["a"], "beam": true}', 422, "beam"),
        (b'{"text": ["a"], "beam": 0}', 422, "beam"),
        (b'{"text": ["a"], "beam": 17}', 422, "less than or equal to 16"),
        (b'{"text": ["a"], "beam": 2, "nbest": 3}', 422, "nbest (3) must be <= beam (2)"),
        (b'{"text": ["a"], "alpha": NaN}', 422, "alpha"),
        (b'{"text": ["a"], "alpha": 1e999}', 422, "alpha"),
        (b'{"text": ["a"], "max_new_tokens": 1}', 422, "max_new_tokens: Extra inputs are not permitted"),
        (b'{"text": ["\\ud800"]}', 422, "surrogate"),
        (b'{"sentences": ["a"]}', 422, "text: Field required"),
    ],
)
def test_bad_translate_bodies(client, body, status, fragment):
    assert_error(client.post("/v1/translate", content=body, headers=JSON), status, fragment)


def test_non_json_content_type_is_422(client):
    plain = {"content-type": "text/plain"}
    assert_error(client.post("/v1/translate", content=b'{"text": ["a"]}', headers=plain), 422, "JSON object")


def test_limits_are_413_or_422_and_named(client):
    error = assert_error(client.post("/v1/translate", json={"text": ["a"] * 9}), 413, "--max-sentences")
    assert (error["limit"], error["value"]) == ("max_sentences", 8)
    big = client.post("/v1/translate", json={"text": ["a" * 5000]})
    error = assert_error(big, 413, "--max-request-bytes")
    assert (error["limit"], error["value"]) == ("max_request_bytes", 4096)
    chunks = iter([b'{"text": ["', b"a" * 3000, b"a" * 3000, b'"]}'])  # no Content-Length: streamed
    assert_error(client.post("/v1/translate", content=chunks, headers=JSON), 413, "--max-request-bytes")
    long = client.post("/v1/translate", json={"text": ["ja", "a" * 40]})
    error = assert_error(long, 422, "sentence 2 has 41")
    assert (error["limit"], error["value"]) == ("max_len", 40)
    assert_error(client.post("/v1/attention", json={"text": "a" * 40}), 422, "at most 40")
    assert_error(client.post("/v1/attention", json={"text": "  "}), 422, "empty")
    assert client.post("/v1/translate", json={"text": ["a" * 39]}).status_code == 200  # 39 + <eos> fits


def test_generate_limits_and_types(lm_client):
    error = assert_error(lm_client.post("/v1/generate", json={"max_new_tokens": 51}), 422, "--max-new-tokens")
    assert (error["limit"], error["value"]) == ("max_new_tokens", 50)
    for body, fragment in [
        ({"prompt": 3}, "prompt"),
        ({"temperature": -1}, "temperature"),
        ({"top_k": 0}, "top_k"),
        ({"top_p": 1.5}, "top_p"),
        ({"seed": -1}, "seed"),
        ({"seed": "1"}, "seed"),
        ({"max_new_tokens": None}, "max_new_tokens"),
        ({"stream": True}, "stream"),
    ]:
        assert_error(lm_client.post("/v1/generate", json=body), 422, fragment)


def test_unknown_paths_and_methods_are_json_errors(client):
    assert_error(client.get("/v1/nothing"), 404)
    assert_error(client.delete("/health"), 405)
    assert_error(client.get("/v1/translate"), 405)


def test_no_bad_input_gives_a_500(client, lm_client):
    """Odd bodies at every endpoint: always a 4xx JSON answer, or a 200."""
    bodies = [b"null", b"0", b'"x"', b"{}", b'{"text": null}', b'{"text": [null]}', b'{"text": [[]]}',
              b'{"text": {}}', b'{"prompt": []}', b"{" * 5000]
    bodies.append(json.dumps({"text": ["\x00\u202e<script>"], "prompt": "\x00"}).encode())
    for c in (client, lm_client):
        for path in ("/v1/translate", "/v1/generate", "/v1/attention"):
            for body in bodies:
                response = c.post(path, content=body, headers=JSON)
                assert response.status_code < 500, (path, body[:20], response.text)
                assert "Traceback" not in response.text


# ------------------------------------------------------------------ API key
def test_api_key_guards_the_api_only(translation_dir):
    with client_for(translation_dir, api_key="s3cret") as client:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"},
                        {"Authorization": "Basic s3cret"}):
            response = client.get("/v1/model", headers=headers)
            assert_error(response, 401, "Authorization: Bearer KEY")
            assert response.headers["www-authenticate"] == "Bearer"
        assert_error(client.post("/v1/translate", json={"text": ["a"]}), 401)
        ok = client.post("/v1/translate", json={"text": ["ja"]}, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200
        assert client.get("/health").status_code == 200  # health and the page need no key
        assert client.get("/").status_code == 200
