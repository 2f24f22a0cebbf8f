"""Serving the annotation app with uvicorn, and announcing where in the run folder."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from pathlib import Path
from types import FrameType

import uvicorn

from rlhp.errors import ConfigError, NetworkError
from rlhp.files import written_whole
from rlhp.human.server.app import create_app
from rlhp.runs import RunFolder
from rlhp.runs.folder import LOOPBACK


def url_for(host: str, port: int, token: str | None) -> str:
    """The page's URL (with the token, which the page then keeps in a cookie)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


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
    url = url_for(host, port, token)

    def announce() -> None:
        while not server.started and not server.should_exit:
            time.sleep(0.02)
        with written_whole(run.annotate_json) as tmp:
            tmp.write_text(json.dumps({"url": url, "host": host, "port": port, "pid": os.getpid()}))
            os.chmod(tmp, 0o600)  # the URL may carry the token
        print(f"labelling page: {url}", flush=True)
        while parent is not None and not server.should_exit:
            if os.getppid() != parent:  # the trainer is gone, however it ended
                server.should_exit = True
            time.sleep(0.5)

    threading.Thread(target=announce, daemon=True).start()
    # uvicorn shuts down on SIGTERM, then re-raises it to the handler found: make that one unwind
    # (cleaning up below) instead of killing the process on the spot.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        server.run(sockets=[sock])
    finally:
        if run.annotate_json.is_file() and json.loads(run.annotate_json.read_text()).get("pid") == os.getpid():
            run.annotate_json.unlink(missing_ok=True)
