"""`aiayn serve` killed with SIGKILL while a client holds a connection, and started again on the same
port within a second: the new process binds the port (still held by the killed one's closing
connection) and serves, and a client that retries gets its answer (loopback only). Shown failing
with the listening socket's SO_REUSEADDR planted away."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from .helpers import SRC, ServerProcess, request

# `aiayn serve` with a planted bug: its listening socket without SO_REUSEADDR
WITHOUT_REUSEADDR = """
import socket, sys
real = socket.socket.setsockopt
def setsockopt(self, level, option, value, *rest):
    if option != socket.SO_REUSEADDR:
        real(self, level, option, value, *rest)
socket.socket.setsockopt = setsockopt
from aiayn.cli.main import main
sys.exit(main(sys.argv[1:]))
"""

pytest.importorskip("fastapi", reason="the 'serve' extra is not installed (pip install -e '.[serve]')")
pytest.importorskip("uvicorn", reason="the 'serve' extra is not installed (pip install -e '.[serve]')")


def retrying_translate(port: int, deadline: float, answers: list) -> None:
    """A client's retry: POST /v1/translate until an answer comes (a refused or reset connection
    while the service is down is retried)."""
    while time.monotonic() < deadline:
        try:
            answers.append(request(port, "POST", "/v1/translate", {"text": ["ja"], "beam": 1}, timeout=60))
            return
        except OSError:
            time.sleep(0.1)


def test_a_killed_service_restarted_on_its_port_serves_and_a_retry_succeeds(translation_dir):
    first = ServerProcess(translation_dir)
    port = first.port
    held = http.client.HTTPConnection("127.0.0.1", port, timeout=60)  # a connection open at the kill
    held.request("GET", "/health")
    assert held.getresponse().read()
    os.kill(first.process.pid, signal.SIGKILL)
    first.process.wait(30)
    killed_at = time.monotonic()
    answers: list = []
    client = threading.Thread(target=retrying_translate, args=(port, time.monotonic() + 180, answers))
    client.start()
    second = None
    try:
        started = time.monotonic()
        assert started - killed_at < 1.0  # started again within a second of the kill
        second = ServerProcess(translation_dir, "--port", str(port))
        assert second.port == port
        client.join(180)
        assert answers and answers[0][0] == 200, answers
        assert isinstance(answers[0][1]["translations"][0][0]["text"], str)
        # The same kill and restart, the socket without SO_REUSEADDR: the port is still taken (by the
        # killed process's connection, closing), so the restart fails; with one line saying why.
        held_again = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        held_again.request("GET", "/health")
        assert held_again.getresponse().read()
        os.kill(second.process.pid, signal.SIGKILL)
        second.process.wait(30)
        environment = os.environ | {"PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        planted = subprocess.run(
            [sys.executable, "-c", WITHOUT_REUSEADDR, "serve", "--model", str(translation_dir), "--port",
             str(port), "--threads", "1"], capture_output=True, text=True, env=environment, timeout=120,
        )
        held_again.close()
        assert planted.returncode == 2, planted.stderr
        assert "cannot listen there" in planted.stderr and "Traceback" not in planted.stderr
    finally:
        held.close()
        if second is not None and second.process.poll() is None:
            code, stderr = second.stop()
            assert code == 0, stderr
