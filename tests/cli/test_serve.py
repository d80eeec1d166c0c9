"""`aiayn serve` as a real process on a free 127.0.0.1 port: it answers, and SIGTERM with
requests in flight lets every one of them complete before it exits 0."""

from __future__ import annotations

import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from aiayn.cli.main import main
from aiayn.inference import load
from serve.conftest import SOURCES
from serve.helpers import ServerProcess, request

pytest.importorskip("fastapi", reason="the 'serve' extra is not installed (pip install -e '.[serve]')")

KEY = {"Authorization": "Bearer k3y"}


def wait_for(condition, timeout: float = 60.0, step: float = 0.02):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(step)
    return value


def test_serves_and_sigterm_lets_requests_in_flight_complete(translation_dir):
    # each request (32 sentences, beam 8) is a batch of its own and takes a while
    server = ServerProcess(
        translation_dir, "--batch-wait-ms", "20", "--max-batch-tokens", "600", env={"AIAYN_API_KEY": "k3y"}
    )
    try:
        assert server.url == f"http://127.0.0.1:{server.port}/"  # loopback by default
        translator = load(translation_dir, "cpu")
        status, body = request(server.port, "POST", "/v1/translate", {"text": SOURCES, "beam": 2}, KEY)
        assert status == 200, body
        assert [n[0]["text"] for n in body["translations"]] == translator.translate(SOURCES, beam=2)
        assert request(server.port, "GET", "/v1/model")[0] == 401  # the key from $AIAYN_API_KEY

        batches = [(SOURCES * 8)[i:] + (SOURCES * 8)[:i] for i in range(6)]  # 32 sentences each
        expected = [translator.translate(batch, beam=8) for batch in batches]
        before = request(server.port, "GET", "/health")[1]
        with ThreadPoolExecutor(len(batches)) as pool:
            futures = [
                pool.submit(request, server.port, "POST", "/v1/translate", {"text": b, "beam": 8}, KEY)
                for b in batches
            ]
            def all_received():
                health = request(server.port, "GET", "/health")[1]
                return health if health["submitted"] - before["submitted"] == len(batches) else None

            in_flight = len(batches) - (wait_for(all_received)["completed"] - before["completed"])
            server.process.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            with pytest.raises(ConnectionRefusedError):  # no new connections once stopping
                socket.create_connection(("127.0.0.1", server.port), timeout=5)
            answers = [f.result(timeout=120) for f in futures]
        status, stderr = server.wait(timeout=120)  # SIGTERM was sent above
    finally:
        if server.process.poll() is None:
            server.process.kill()
    assert in_flight >= 2, "the requests finished before SIGTERM: the test proved nothing"
    assert [a[0] for a in answers] == [200] * len(batches), answers
    for (_, body), want in zip(answers, expected, strict=True):
        assert [n[0]["text"] for n in body["translations"]] == want
    assert status == 0, stderr
    assert "Traceback" not in stderr and "stopped" in stderr


def test_sigint_stops_an_idle_language_model_service_with_status_0(lm_dir):
    server = ServerProcess(lm_dir)
    try:
        status, body = request(server.port, "POST", "/v1/generate", {"prompt": "the", "max_new_tokens": 5})
        assert status == 200 and isinstance(body["text"], str)
        server.process.send_signal(signal.SIGINT)
        status, stderr = server.wait(timeout=60)  # SIGINT was sent above
    finally:
        if server.process.poll() is None:
            server.process.kill()
    assert status == 0, stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize(
    "options, message",
    [
        (["--port", "70000"], "argument --port: must be an integer in [0, 65535], got '70000'"),
        (["--max-sentences", "0"], "argument --max-sentences: must be an integer >= 1, got '0'"),
        (["--batch-wait-ms", "-1"], "argument --batch-wait-ms: must be a finite number in [0, 10000]"),
        (["--batch-wait-ms", "nan"], "argument --batch-wait-ms: must be a finite number in [0, 10000]"),
        (["--api-key", " "], "--api-key must not be empty"),
        (["--threads", "0"], "argument --threads: must be an integer >= 1, got '0'"),
    ],
)
def test_bad_options_are_one_line_errors(translation_dir, options, message, capsys):
    assert main(["serve", "--model", str(translation_dir), *options]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_bad_model_and_busy_port_are_one_line_errors(tmp_path, translation_dir, capsys):
    assert main(["serve", "--model", str(tmp_path / "nothing"), "--port", "0"]) == 2
    assert "not a directory" in capsys.readouterr().err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        assert main(["serve", "--model", str(translation_dir), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"--port {port}: cannot listen there" in err and len(err.strip().splitlines()) == 1


def test_a_missing_extra_is_named(translation_dir, monkeypatch, capsys):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "uvicorn" else find_spec(name, *a)
    )
    assert main(["serve", "--model", str(translation_dir)]) == 2
    assert "optional extra 'serve': pip install 'aiayn[serve]' (missing: uvicorn)" in capsys.readouterr().err


def test_listening_beyond_this_machine_warns():
    from aiayn.cli.serve import exposure_warning

    for host in ("127.0.0.1", "127.0.0.2", "::1", "localhost"):
        assert exposure_warning(host, 8000, None) is None
    warning = exposure_warning("0.0.0.0", 8000, None)
    assert "--host 0.0.0.0 accepts connections from other machines" in warning and "--api-key" in warning
    assert "--api-key" not in exposure_warning("192.168.1.5", 8000, "key")
