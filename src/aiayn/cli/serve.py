"""`aiayn serve`: a translation (or generation) service with a web page, on uvicorn.

    aiayn serve --model runs/dates                     # http://127.0.0.1:8000/
    curl -s localhost:8000/v1/translate -H 'Content-Type: application/json' \\
         -d '{"text": ["21.11.26", "nov 3rd 1999"]}'

Binds 127.0.0.1 unless --host says otherwise (a non-loopback host prints a warning); with
--api-key KEY or $AIAYN_API_KEY, /v1/* needs `Authorization: Bearer KEY`. --port 0 picks a
free port (the URL is printed). SIGTERM or Ctrl-C: the service stops accepting connections,
answers every request in flight, and exits 0 (a second Ctrl-C stops at once, status 130).
Needs the optional extra `serve`.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import logging
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

from aiayn.cli.arguments import bounded_int, device_option, finite_float
from aiayn.core.errors import ConfigError

API_KEY_ENV = "AIAYN_API_KEY"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve a model over HTTP (JSON API and a page showing the attention)",
        description="Serve a translation model or a language model over HTTP: POST /v1/translate, "
        "/v1/generate, /v1/attention; GET /v1/model, /health, and / (a page). Concurrent requests "
        "are decoded together in batches.",
    )
    parser.add_argument("--model", required=True, action="append", type=Path, metavar="DIR",
                        help="model directory; repeat for an ensemble of translation models (one search "
                        "over their mean probability; they must share vocabularies)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=bounded_int(0, 65535), default=8000, help="port (default 8000; 0 = any free port)"
    )
    parser.add_argument(
        "--device", default="auto", help="'cpu', 'cuda', 'cuda:1', ... or 'auto' (CUDA when available)"
    )
    from aiayn.cli.options import add_compile_argument, add_quantize_argument

    add_quantize_argument(parser)
    add_compile_argument(parser, auto_help="a kept compiled step when one exists, else eager: start-up "
                         "never waits for a build (--compile builds and keeps one, on the first request)")
    parser.add_argument(
        "--threads", type=bounded_int(1), metavar="N", help="torch threads (default: torch's choice)"
    )
    parser.add_argument(
        "--max-batch-tokens", type=bounded_int(1), default=4096, metavar="N",
        help="most padded source tokens decoded in one batch (default 4096)",
    )
    parser.add_argument(
        "--batch-wait-ms", type=finite_float(0, 10_000), default=5.0, metavar="MS",
        help="how long a request may wait for others to share its batch (default 5)",
    )
    parser.add_argument(
        "--max-request-bytes", type=bounded_int(1), default=64 * 1024, metavar="N",
        help="largest request body accepted (default 65536; larger: 413)",
    )
    parser.add_argument(
        "--max-sentences", type=bounded_int(1), default=64, metavar="N",
        help="most sentences in one /v1/translate request (default 64; more: 413)",
    )
    parser.add_argument(
        "--max-new-tokens", type=bounded_int(0), default=1000, metavar="N",
        help="largest max_new_tokens a /v1/generate request may ask for (default 1000)",
    )
    parser.add_argument(
        "--api-key", metavar="KEY",
        help=f"require 'Authorization: Bearer KEY' on /v1/* (default: ${API_KEY_ENV}; the variable "
        "keeps the key out of the process list)",
    )
    parser.add_argument("--access-log", action="store_true", help="log every request on stderr")
    parser.set_defaults(func=run)


def check_arguments(args: argparse.Namespace) -> None:
    """One-line errors for option values the argparse types cannot judge alone."""
    if args.api_key is not None and not args.api_key.strip():
        raise ConfigError("--api-key must not be empty")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str, port: int, api_key: str | None) -> str | None:
    """The warning printed when the service listens beyond this machine (None on loopback)."""
    if is_loopback(host):
        return None
    advice = "" if api_key else f" (set --api-key or ${API_KEY_ENV})"
    return (
        f"aiayn serve: warning: --host {host} accepts connections from other machines: anyone "
        f"who can reach port {port} can use the model{advice}"
    )


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: a free one)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as error:
        reason = error.strerror or error
        raise ConfigError(f"--host {host} --port {port}: cannot listen there ({reason})") from None
    sock.set_inheritable(True)
    return sock


@contextlib.contextmanager
def uvicorn_log(access_log: bool) -> Iterator[None]:
    """uvicorn's messages (startup, shutdown, errors; requests with --access-log) on stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    loggers = [logging.getLogger("uvicorn.error")]
    if access_log:
        loggers.append(logging.getLogger("uvicorn.access"))
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def run(args: argparse.Namespace) -> int:
    from aiayn.serve import require_extra

    check_arguments(args)
    require_extra()
    import torch
    import uvicorn

    from aiayn.inference import Translator, load
    from aiayn.serve.app import ServeSettings, create_app
    from aiayn.serve.server import GracefulServer

    api_key = args.api_key if args.api_key is not None else os.environ.get(API_KEY_ENV) or None
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    sock = listen(args.host, args.port)  # first: a busy port is reported before the model loads
    try:
        from aiayn.cli.options import model_names, model_source

        model = load(model_source(args.model), device_option(args.device), quantize=args.quantize,
                     compile=args.compile)
        settings = ServeSettings(
            max_batch_tokens=args.max_batch_tokens,
            batch_wait_ms=args.batch_wait_ms,
            max_request_bytes=args.max_request_bytes,
            max_sentences=args.max_sentences,
            max_new_tokens=args.max_new_tokens,
            api_key=api_key,
            title=f"aiayn · {' + '.join(path.resolve().name for path in args.model)}",
        )
        app = create_app(model, settings)
        host, port = sock.getsockname()[:2]
        url = f"http://{f'[{host}]' if ':' in host else host}:{port}/"
        warning = exposure_warning(args.host, port, api_key)
        if warning is not None:
            print(warning, file=sys.stderr)
        config = uvicorn.Config(
            app, log_config=None, access_log=args.access_log, lifespan="on", timeout_graceful_shutdown=None
        )
        task = "translation" if isinstance(model, Translator) else "lm"
        names = model_names([str(path) for path in args.model])
        ready = (f"aiayn serve: {url} ({task} model {names}, engine {model.engine}); "
                 "Ctrl-C or SIGTERM stops it")
        server = GracefulServer(config, ready)
        with uvicorn_log(args.access_log):
            server.run(sockets=[sock])
    finally:
        sock.close()
    if not server.started:
        print("aiayn serve: error: the service did not start (see the messages above)", file=sys.stderr)
        return 1
    if server.force_exit:
        print("aiayn serve: stopped at once (second interrupt); requests in flight were dropped",
              file=sys.stderr)
        return 130
    print("aiayn serve: stopped", file=sys.stderr)
    return 0
