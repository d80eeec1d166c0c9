"""`aiayn serve`: translation and generation over HTTP, with a page that shows the attention.

    import aiayn
    from aiayn.serve.app import ServeSettings, create_app
    app = create_app(aiayn.load("runs/dates"), ServeSettings(max_sentences=16))

The service decodes through `aiayn.inference` (`aiayn.load` gives a `Translator` or a
`Generator`, on PyTorch or CTranslate2), nothing else:

- `served_model`: what only the service asks of the model (task, token counts, /v1/model,
  attention maps);
- `batching`: the one worker thread that owns the model and batches concurrent requests;
- `schemas`: the request and response bodies (pydantic);
- `app`: the FastAPI app: endpoints, limits, API key, errors;
- `page`: the web page, drawn with the explorer's attention view;
- `server`: uvicorn with a clean exit on SIGTERM/SIGINT (requests in flight are answered).

Needs the optional extra `serve` (FastAPI, uvicorn, pydantic): pip install 'aiayn[serve]'.
"""

from __future__ import annotations

from aiayn.core.errors import ConfigError

EXTRA_MESSAGE = "aiayn serve needs the optional extra 'serve': pip install 'aiayn[serve]' (missing: {name})"


def require_extra() -> None:
    """Raise `ConfigError` naming the extra when FastAPI, uvicorn or pydantic is missing."""
    import importlib.util

    for name in ("fastapi", "uvicorn", "pydantic"):
        if importlib.util.find_spec(name) is None:
            raise ConfigError(EXTRA_MESSAGE.format(name=name))
