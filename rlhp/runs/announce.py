"""Where a run's labelling pages listen: ``annotate.json`` in the run folder, shared by every server of the run
(the trainer's own and any ``rlhp-annotate``), each adding itself when it listens and taking itself out when it
stops, so that stopping one never hides another.

The file reads ``{"url", "host", "port", "pid", "urls", "servers": [...]}``: the top level is the newest live
server's (what a single reader wants), ``servers`` every live one's.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

from rlhp.files import written_whole

WILDCARDS = ("0.0.0.0", "::", "")
"""Addresses that listen on every interface: no one can open a page at them."""


def page_url(host: str, port: int, token: str | None) -> str:
    """The page's URL at ``host`` (with the token, which the page then keeps in a cookie)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


def reachable_urls(host: str, port: int, token: str | None) -> list[str]:
    """The URLs a person can open for a server listening on ``host``: the address itself, or for a wildcard
    (``0.0.0.0``, ``::``) the machine's name, then each interface's address (loopback and link-local last and
    left out)."""
    if host not in WILDCARDS:
        return [page_url(host, port, token)]
    family = socket.AF_INET6 if host == "::" else socket.AF_INET
    addresses = [a.address for name, found in psutil.net_if_addrs().items() for a in found
                 if a.family in ((socket.AF_INET, socket.AF_INET6) if host == "::" else (family,))
                 and not a.address.startswith(("127.", "fe80:")) and a.address != "::1"]
    return [page_url(h, port, token) for h in [socket.gethostname(), *addresses]]


@contextmanager
def _locked(path: Path) -> Iterator[list[dict[str, Any]]]:
    """The live servers ``path`` lists, under an exclusive lock; what the block leaves in the list is written back
    (the file removed when none is left)."""
    with (path.parent / f".{path.name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        servers = [s for s in announced(path) if psutil.pid_exists(s["pid"])]
        yield servers
        if not servers:
            path.unlink(missing_ok=True)
            return
        with written_whole(path) as tmp:
            tmp.write_text(json.dumps({**servers[-1], "servers": servers}))
            os.chmod(tmp, 0o600)  # the URLs may carry the token


def announced(path: Path) -> list[dict[str, Any]]:
    """The servers ``path`` lists, oldest first (none when it is missing or unreadable)."""
    try:
        content = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return list(content.get("servers", [content])) if isinstance(content, dict) and "pid" in content else []


def announce(path: Path, host: str, port: int, token: str | None) -> list[str]:
    """Add this process's server to ``path``; return the URLs it is reachable at."""
    urls = reachable_urls(host, port, token)
    with _locked(path) as servers:
        servers[:] = [s for s in servers if s["pid"] != os.getpid()]
        servers.append({"url": urls[0], "urls": urls, "host": host, "port": port, "pid": os.getpid()})
    return urls


def withdraw(path: Path, pid: int) -> None:
    """Take the server of process ``pid`` out of ``path``."""
    with _locked(path) as servers:
        servers[:] = [s for s in servers if s["pid"] != pid]
