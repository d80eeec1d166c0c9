"""A real `aiayn serve` process on a free 127.0.0.1 port, and HTTP calls to it (stdlib only)."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[2] / "src"


class ServerProcess:
    """`python -m aiayn serve --model DIR --port 0 ...` and its printed URL."""

    def __init__(self, model_dir: Path, *options: str, env: dict[str, str] | None = None,
                 timeout: float = 120.0) -> None:
        environment = os.environ | {"PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        environment |= env or {}
        command = [sys.executable, "-m", "aiayn", "serve", "--model", str(model_dir), "--port", "0",
                   "--threads", "1", *options]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment
        )
        line = self.process.stdout.readline()  # printed once the service accepts requests
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if match is None:
            self.process.kill()
            raise AssertionError(f"no URL printed: {line!r}; stderr: {self.process.stderr.read()}")
        self.port = int(match.group(1))
        self.url = match.group(0)
        self.wait_healthy(timeout)

    def wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if request(self.port, "GET", "/health")[0] == 200:
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.1)

    def stop(self, timeout: float = 60.0) -> tuple[int, str]:
        """SIGTERM, then the exit status and stderr."""
        if self.process.poll() is None:
            self.process.terminate()
        return self.wait(timeout)

    def wait(self, timeout: float = 60.0) -> tuple[int, str]:
        """The exit status and stderr once the process ends by itself (killed after `timeout`).
        After a test's own signal this sends none: a second SIGTERM that lands once the server
        has put back the default handlers would kill it with that signal."""
        try:
            _, stderr = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, stderr = self.process.communicate()
        return self.process.returncode, stderr


def request(
    port: int, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
    timeout: float = 120.0,
) -> tuple[int, Any]:
    """(status, parsed JSON or text) of one request on a fresh connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        all_headers = {"Content-Type": "application/json"} if data is not None else {}
        connection.request(method, path, body=data, headers=all_headers | (headers or {}))
        response = connection.getresponse()
        text = response.read().decode()
        is_json = response.getheader("Content-Type", "").startswith("application/json")
        return response.status, json.loads(text) if is_json else text
    finally:
        connection.close()


class ThreadedServer:
    """The service on uvicorn in a thread of this process (127.0.0.1, a free port): cheaper
    to start than a process, for the page tests. A context manager; `url` is its address."""

    def __init__(self, model_dir: Path, **settings: Any) -> None:
        import socket
        import threading

        import uvicorn

        from aiayn.inference import load
        from aiayn.serve.app import ServeSettings, create_app

        app = create_app(load(model_dir, "cpu"), ServeSettings(**settings))
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/"
        self.server = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)

    def __enter__(self) -> ThreadedServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.should_exit = True
        self.thread.join(60)
        self.socket.close()
