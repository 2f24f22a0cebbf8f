"""Serving the annotation app with uvicorn, and announcing where in the run folder."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path
from types import FrameType

import uvicorn

from rlhp.errors import ConfigError, NetworkError
from rlhp.human.server.app import create_app
from rlhp.runs import RunFolder
from rlhp.runs.announce import announce, withdraw
from rlhp.runs.folder import LOOPBACK


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def serve(run_dir: str | Path, host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
          lease_s: float = 120.0, parent: int | None = None) -> None:
    """Serve the run's queries until interrupted (or until process ``parent`` ends); the URL goes to
    ``annotate.json`` in the run folder once the server listens."""
    if host not in LOOPBACK and not token:
        raise ConfigError("token", f"is required to listen on {host}: anyone who reaches it could label otherwise")
    run = RunFolder(run_dir)
    app = create_app(run.path, token=token, lease_s=lease_s)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # Naming TCP makes asyncio set TCP_NODELAY on each connection; without it a keep-alive request
    # waits ~40 ms on Nagle's algorithm and delayed ACKs.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise NetworkError(f"cannot listen on {host}:{port} ({err.strerror}); choose another port "
                           "(0 takes any free one)") from None
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=2))

    def announce_when_up() -> None:
        while not server.started and not server.should_exit:
            time.sleep(0.02)
        urls = announce(run.annotate_json, host, port, token)
        also = f" (or {', '.join(urls[1:])})" if len(urls) > 1 else ""
        print(f"labelling page: {urls[0]}{also}", flush=True)
        if host not in LOOPBACK:
            print("plain HTTP: the token travels in the clear; share the page over an SSH tunnel or behind a TLS "
                  "proxy (docs/human-labels.md, 'Sharing the page safely')", flush=True)
        while parent is not None and not server.should_exit:
            if os.getppid() != parent:  # the trainer is gone, however it ended
                server.should_exit = True
            time.sleep(0.5)

    threading.Thread(target=announce_when_up, daemon=True).start()
    # uvicorn shuts down on SIGTERM, then re-raises it to the handler found: make that one unwind
    # (cleaning up below) instead of killing the process on the spot.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        server.run(sockets=[sock])
    finally:
        withdraw(run.annotate_json, os.getpid())
