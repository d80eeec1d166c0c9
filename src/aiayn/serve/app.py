"""The web service: a FastAPI app around one model and its batching worker.

    app = create_app(aiayn.load("runs/dates"), ServeSettings())

Endpoints: POST /v1/translate, /v1/generate, /v1/attention; GET /v1/model, /health, / (the
page), /static/* (its script and styles), /docs and /redoc (the API's documentation pages, their
assets served from here: `aiayn.serve.docs_page`). Every error is a JSON body
`{"error": {"status": S, "message": "...", ...}}`; a limit error also names the limit
(`"limit": "max_sentences", "value": 64`). Malformed JSON is 400, wrong types and unknown
fields 422, a body over --max-request-bytes or more sentences than --max-sentences 413, a
sentence longer than the model accepts 422, a missing or wrong API key 401. Bad input never
gives 500, and no response carries a traceback (unexpected errors are logged, and answered
with a one-line 500). The OpenAPI document (/openapi.json) lists the endpoints of the served
model's task and documents each error status with its body (`ErrorResponse`).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aiayn.core.errors import AiaynError
from aiayn.inference.interface import Generator, Translation, Translator
from aiayn.inference.words import translation_details
from aiayn.serve.batching import BatchWorker, Job, WorkerClosed
from aiayn.serve.docs_page import add_docs_routes
from aiayn.serve.page import CONTENT_SECURITY_POLICY, page_html, static_files
from aiayn.serve.schemas import (
    MAX_BEAM,
    AttentionRequest,
    GenerateRequest,
    GenerateResponse,
    TranslateRequest,
    TranslateResponse,
    error_responses,
)
from aiayn.serve.served_model import ServedModel, Unsupported

log = logging.getLogger(__name__)


@dataclass
class ServeSettings:
    """The service's limits and batching (the options of `aiayn serve`)."""

    max_batch_tokens: int = 4096
    batch_wait_ms: float = 5.0
    max_request_bytes: int = 64 * 1024
    max_sentences: int = 64
    max_new_tokens: int = 1000
    api_key: str | None = None
    title: str = "aiayn"


class LimitError(Exception):
    """A request over one of the service's limits (answered with `status`)."""

    def __init__(self, status: int, message: str, limit: str, value: int) -> None:
        super().__init__(message)
        self.status, self.limit, self.value = status, limit, value


def error_response(
    status: int, message: str, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    """The JSON body of every error: {"error": {"status", "message", ...extra}}."""
    return JSONResponse({"error": {"status": status, "message": message, **extra}}, status, headers=headers)


class RequestGuard:
    """ASGI middleware in front of the app: the API key (for /v1/*) and the body size.

    The body is read here, up to `max_request_bytes`, before the app sees it, so an
    oversized or unauthorised request costs no more than that and never reaches a handler.
    """

    def __init__(self, app: ASGIApp, max_request_bytes: int, api_key: str | None) -> None:
        self.app = app
        self.max_request_bytes = max_request_bytes
        self.api_key = api_key

    def _authorised(self, headers: Headers) -> bool:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        expected = (self.api_key or "").encode()
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), expected)

    def _too_large(self) -> JSONResponse:
        return error_response(
            413,
            f"the request body is larger than {self.max_request_bytes} bytes (--max-request-bytes)",
            limit="max_request_bytes",
            value=self.max_request_bytes,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if self.api_key is not None and scope["path"].startswith("/v1/") and not self._authorised(headers):
            response = error_response(
                401, "missing or wrong API key: send the header 'Authorization: Bearer KEY'",
                headers={"WWW-Authenticate": "Bearer"},
            )
            await response(scope, receive, send)
            return
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_request_bytes:
            await self._too_large()(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_request_bytes:
                await self._too_large()(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _field(loc: Sequence[Any]) -> str:
    """A validation error's location without the leading 'body': 'text.2', 'beam'."""
    parts = [str(p) for p in loc]
    if parts[:1] == ["body"]:
        parts = parts[1:]
    return ".".join(parts) or "body"


def validation_response(error: RequestValidationError) -> JSONResponse:
    """400 for a body that is not JSON, 422 for JSON of the wrong shape."""
    problems = error.errors()
    for problem in problems:
        if problem.get("type") == "json_invalid":
            reason = (problem.get("ctx") or {}).get("error", "not valid JSON")
            position = problem["loc"][1] if len(problem.get("loc", ())) > 1 else "?"
            return error_response(400, f"malformed JSON: {reason} at character {position}")
        if tuple(problem.get("loc", ())) == ("body",) and problem.get("type") == "missing":
            return error_response(400, "the request needs a JSON body")
    details = [
        {"field": _field(p.get("loc", ())), "message": str(p.get("msg", "")), "type": str(p.get("type", ""))}
        for p in problems
    ]
    summary = "; ".join(f"{d['field']}: {d['message']}" for d in details[:5])
    if any(d["field"] == "body" and d["type"] == "model_attributes_type" for d in details):
        summary = "the request body must be a JSON object (Content-Type: application/json)"
    return error_response(422, summary, details=details)


def document_the_api_key(app: FastAPI) -> None:
    """Declare in the OpenAPI document that /v1/* needs `Authorization: Bearer KEY` (--api-key)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        document = build()  # built once, then cached by FastAPI; marked once
        if "bearer" not in document.setdefault("components", {}).get("securitySchemes", {}):
            document["components"].setdefault("securitySchemes", {})["bearer"] = {
                "type": "http", "scheme": "bearer", "description": "the service's --api-key"
            }
            for path, operations in document.get("paths", {}).items():
                if path.startswith("/v1/"):
                    for operation in operations.values():
                        operation["security"] = [{"bearer": []}]
        return document

    app.openapi = openapi  # type: ignore[method-assign]


def create_app(model: Translator | Generator, settings: ServeSettings | None = None) -> FastAPI:
    """The service for `model` (from `aiayn.load`); its worker thread starts and stops with
    the app's lifespan."""
    settings = settings or ServeSettings()
    served = ServedModel(model)
    worker = BatchWorker(served, settings.max_batch_tokens, settings.batch_wait_ms)
    page = page_html(settings.title)
    assets = static_files()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        worker.start()
        try:
            yield
        finally:  # uvicorn gets here after every request in flight has been answered
            await asyncio.to_thread(worker.close)

    app = FastAPI(
        title="aiayn serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url="/openapi.json"
    )
    app.state.worker = worker
    app.state.served = served
    if settings.api_key is not None:
        document_the_api_key(app)
    app.add_middleware(RequestGuard, max_request_bytes=settings.max_request_bytes, api_key=settings.api_key)

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
        return validation_response(error)

    @app.exception_handler(HTTPException)
    async def on_http_error(request: Request, error: HTTPException) -> JSONResponse:
        message = str(error.detail)
        if error.status_code == 400:  # FastAPI could not read the body (e.g. not UTF-8)
            message = f"malformed JSON: {message[:1].lower()}{message[1:]}"
        return error_response(error.status_code, message, headers=error.headers)

    @app.exception_handler(LimitError)
    async def on_limit(request: Request, error: LimitError) -> JSONResponse:
        return error_response(error.status, str(error), limit=error.limit, value=error.value)

    @app.exception_handler(Unsupported)
    async def on_unsupported(request: Request, error: Unsupported) -> JSONResponse:
        return error_response(501, str(error))

    @app.exception_handler(AiaynError)
    async def on_bad_input(request: Request, error: AiaynError) -> JSONResponse:
        return error_response(422, str(error))

    @app.exception_handler(WorkerClosed)
    async def on_closed(request: Request, error: WorkerClosed) -> JSONResponse:
        return error_response(503, str(error))

    @app.exception_handler(Exception)
    async def on_unexpected(request: Request, error: Exception) -> JSONResponse:
        log.error("%s %s failed", request.method, request.url.path, exc_info=error)
        return error_response(500, "internal error (the server log has the details)")

    def check_lengths(texts: Sequence[str]) -> list[int]:
        lengths = served.count_tokens(texts)
        limit = served.max_input_tokens
        for i, length in enumerate(lengths):
            if length > limit:
                where = f"sentence {i + 1}" if len(texts) > 1 else "the text"
                raise LimitError(
                    422,
                    f"{where} has {length} tokens; the model takes at most {limit} (its max_len, "
                    f"{'<eos> included' if served.task == 'translation' else 'the whole text'})",
                    "max_len",
                    limit,
                )
        return lengths

    def need_task(task: str, endpoint: str) -> None:
        if served.task != task:
            kinds = {"translation": "a translation model", "lm": "a language model"}
            message = f"{endpoint} needs {kinds[task]}; this service runs {kinds[served.task]}"
            raise HTTPException(404, message)

    async def run_job(job: Job) -> Any:
        return await asyncio.wrap_future(worker.submit(job))

    # the document lists the endpoints of this service's model: the other kind's answers 404
    @app.post("/v1/translate", response_model=TranslateResponse, responses=error_responses(),
              include_in_schema=served.task == "translation", response_model_exclude_none=True)
    async def translate(request: TranslateRequest) -> dict[str, Any]:
        need_task("translation", "/v1/translate")
        if len(request.text) > settings.max_sentences:
            raise LimitError(
                413,
                f"{len(request.text)} sentences; a request may hold at most {settings.max_sentences} "
                "(--max-sentences)",
                "max_sentences",
                settings.max_sentences,
            )
        lengths = check_lengths(request.text)
        beam, alpha, nbest = request.beam, request.alpha, request.nbest
        asked = {"token_scores": request.token_scores, "alignments": request.alignments}
        if request.alignments:
            served.model.check_alignments()  # type: ignore[union-attr]  (before any batch holds it)

        def decode(served: ServedModel, texts: list[str], batch_tokens: int) -> list[list[Translation]]:
            return served.model.translate_nbest(  # type: ignore[union-attr]
                texts, nbest, beam=beam, alpha=alpha, batch_tokens=batch_tokens, on_long_line="error", **asked
            )

        if request.plain():
            key = ("translate", beam, alpha, nbest, request.token_scores, request.alignments)
            job = Job(key=key, run=decode, texts=list(request.text), lengths=lengths)
        else:  # per-request controls (a prefix per sentence, a seed): decoded on its own
            texts, controls = list(request.text), request.controls()

            def decode_alone(served: ServedModel) -> list[list[Translation]]:
                return served.model.translate_nbest(  # type: ignore[union-attr]
                    texts, nbest, beam=beam, alpha=alpha, batch_tokens=settings.max_batch_tokens,
                    on_long_line="error", **controls, **asked,
                )

            job = Job(key=None, run=decode_alone)
        nbests = await run_job(job) if request.text else []
        constrained = request.include is not None or request.exclude is not None
        tokenizer = served.model.tokenizers.target  # type: ignore[union-attr]
        return {"translations": [
            [{"text": t.text, "score": t.score, **translation_details(t, tokenizer),
              **({"constraints_met": t.constraints_met} if constrained else {})} for t in hyps]
            for hyps in nbests
        ]}

    @app.post("/v1/generate", response_model=GenerateResponse, responses=error_responses(),
              include_in_schema=served.task == "lm")
    async def generate(request: GenerateRequest) -> dict[str, Any]:
        need_task("lm", "/v1/generate")
        if request.max_new_tokens > settings.max_new_tokens:
            raise LimitError(
                422,
                f"max_new_tokens {request.max_new_tokens} is over this service's limit of "
                f"{settings.max_new_tokens} (--max-new-tokens)",
                "max_new_tokens",
                settings.max_new_tokens,
            )
        r = request

        def sample(served: ServedModel) -> str:
            return served.model.generate(  # type: ignore[union-attr]
                r.prompt, r.max_new_tokens, r.temperature, r.top_k, r.top_p, r.seed
            )

        job = Job(key=None, run=sample)
        return {"text": await run_job(job)}

    @app.post("/v1/attention", responses=error_responses())
    async def attention(request: AttentionRequest) -> dict[str, Any]:
        check_lengths([request.text])
        text, beam = request.text, request.beam
        return await run_job(Job(key=None, run=lambda served: served.attention(text, beam)))

    @app.get("/v1/model", responses=error_responses(401))
    async def model() -> dict[str, Any]:
        limits = {
            "max_request_bytes": settings.max_request_bytes,
            "max_sentences": settings.max_sentences,
            "max_input_tokens": served.max_input_tokens,
            "max_new_tokens": settings.max_new_tokens,
            "max_beam": MAX_BEAM,
            "max_batch_tokens": settings.max_batch_tokens,
            "batch_wait_ms": settings.batch_wait_ms,
        }
        return {**served.info(), "limits": limits}

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "engine": served.name, "task": served.task, "queued": worker.queued,
                **asdict(worker.stats)}

    page_headers = {"Content-Security-Policy": CONTENT_SECURITY_POLICY, "X-Content-Type-Options": "nosniff"}

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index() -> HTMLResponse:
        return HTMLResponse(page, headers=page_headers)

    def static_route(text: str, media_type: str):
        async def serve_file() -> Response:
            return Response(text, media_type=media_type, headers=page_headers)

        return serve_file

    for name, (text, media_type) in assets.items():  # fixed names: no request names a file
        app.add_api_route(f"/static/{name}", static_route(text, media_type), methods=["GET"],
                          include_in_schema=False)
    add_docs_routes(app, settings.title)
    return app
