"""The service's own API documentation: Swagger UI at /docs and ReDoc at /redoc, from this server.

FastAPI's own /docs and /redoc load their scripts from a CDN, which a machine without network
cannot reach; these pages take the same Swagger UI and ReDoc bundles from the `fastapi-offline`
package (in the `serve` extra), read once when the app is built and served under /docs/assets/.
The pages read the OpenAPI document at /openapi.json, and their Content-Security-Policy
allows no other origin (the Swagger validator badge, which would call one, is off).
"""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response

ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "redoc.standalone.js": "text/javascript; charset=utf-8",
    "favicon.png": "image/png",
}
"""The files of fastapi-offline's static folder the pages use, and their media types."""

DOCS_POLICY = (
    "default-src 'none'; script-src 'self' 'unsafe-inline' blob:; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; font-src 'self' data:; worker-src blob:; base-uri 'none'; "
    "frame-ancestors 'none'"
)
"""This server only (the pages' short inline start-up scripts and styles allowed; ReDoc runs a
worker from a blob)."""


def read_assets() -> dict[str, bytes]:
    """The bundles, by name (empty when fastapi-offline is missing: the pages then say so)."""
    try:
        static = resources.files("fastapi_offline").joinpath("static")
    except ModuleNotFoundError:
        return {}
    return {name: static.joinpath(name).read_bytes() for name in ASSETS}


def add_docs_routes(app: FastAPI, title: str) -> None:
    """GET /docs (Swagger UI), /redoc (ReDoc) and /docs/assets/NAME on `app`."""
    assets = read_assets()
    headers = {"Content-Security-Policy": DOCS_POLICY, "X-Content-Type-Options": "nosniff"}
    missing = HTMLResponse(
        "The API documentation pages need the package fastapi-offline, which comes with aiayn's "
        "optional extra 'serve': pip install 'aiayn[serve]'. The OpenAPI document is at /openapi.json.",
        status_code=501,
    )

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        if not assets:
            return missing
        page = get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json", title=f"{title}: API",
            swagger_js_url="/docs/assets/swagger-ui-bundle.js", swagger_css_url="/docs/assets/swagger-ui.css",
            swagger_favicon_url="/docs/assets/favicon.png", swagger_ui_parameters={"validatorUrl": None},
        )
        return HTMLResponse(page.body, headers=headers)

    @app.get("/redoc", response_class=HTMLResponse, include_in_schema=False)
    async def redoc() -> HTMLResponse:
        if not assets:
            return missing
        page = get_redoc_html(
            openapi_url=app.openapi_url or "/openapi.json", title=f"{title}: API",
            redoc_js_url="/docs/assets/redoc.standalone.js", redoc_favicon_url="/docs/assets/favicon.png",
            with_google_fonts=False,
        )
        return HTMLResponse(page.body, headers=headers)

    def asset_route(body: bytes, media_type: str):
        async def serve_asset() -> Response:
            return Response(body, media_type=media_type, headers=headers)

        return serve_asset

    for name, body in assets.items():  # fixed names: no request names a file
        app.add_api_route(f"/docs/assets/{name}", asset_route(body, ASSETS[name]), methods=["GET"],
                          include_in_schema=False)
