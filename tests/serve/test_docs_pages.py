"""The service's API documentation pages (/docs, /redoc) and the page's example input, through
FastAPI's test client: the pages and every asset they load come from the server itself."""

from __future__ import annotations

import json
import re
import shutil

import pytest

pytest.importorskip("fastapi", reason="the 'serve' extra is not installed (pip install -e '.[serve]')")
pytest.importorskip("fastapi_offline", reason="the 'serve' extra is not installed")
from fastapi.testclient import TestClient

from aiayn.inference import load
from aiayn.serve.app import ServeSettings, create_app
from aiayn.serve.served_model import EXAMPLE_INPUTS


def client_for(model_dir) -> TestClient:
    return TestClient(create_app(load(model_dir, "cpu"), ServeSettings()), raise_server_exceptions=False)


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
def test_docs_pages_load_their_assets_from_this_server(translation_dir, path):
    with client_for(translation_dir) as client:
        page = client.get(path)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "connect-src 'self'" in page.headers["content-security-policy"]
        urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
        urls += re.findall(r"url: '([^']+)'", page.text)
        assert urls and all(url.startswith("/") for url in urls), urls  # no other origin
        assert "/openapi.json" in page.text
        for url in urls:
            if url != "/openapi.json":
                assert client.get(url).status_code == 200, url
        assert client.get("/docs/assets/../../config.json").status_code == 404


def test_the_page_starts_with_an_example_for_the_models_task(translation_dir, lm_dir, tmp_path):
    with client_for(translation_dir) as client:
        assert client.get("/v1/model").json()["example"] == EXAMPLE_INPUTS["translation"]
    with client_for(lm_dir) as client:
        assert client.get("/v1/model").json()["example"] == EXAMPLE_INPUTS["lm"]
    # a run directory's own test example comes first
    run_dir = shutil.copytree(translation_dir, tmp_path / "run")
    (run_dir / "results.json").write_text(json.dumps({"examples": [{"source": "zwei katzen"}]}))
    with client_for(run_dir) as client:
        assert client.get("/v1/model").json()["example"] == "zwei katzen"
