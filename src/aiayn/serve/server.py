"""uvicorn, run the way `aiayn serve` needs: a clean exit on SIGTERM/SIGINT, and a line once ready.

uvicorn already shuts down gracefully on SIGTERM or SIGINT: it stops accepting connections,
waits for every request in flight (with no time limit here), then runs the app's lifespan
shutdown (which ends the batching worker). After that it raises the signal again, which would
kill the process with the signal's status; `GracefulServer` leaves that out, so the command
returns normally and exits 0.
"""

from __future__ import annotations

import contextlib
import signal
import socket
from collections.abc import Iterator

import uvicorn

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class GracefulServer(uvicorn.Server):
    """A uvicorn server that prints `ready_message` (stdout) once it accepts requests and does
    not re-raise the signal that stopped it. A second Ctrl-C stops it at once (`force_exit`)."""

    def __init__(self, config: uvicorn.Config, ready_message: str = "") -> None:
        super().__init__(config)
        self.ready_message = ready_message

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in HANDLED_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.ready_message:
            print(self.ready_message, flush=True)
