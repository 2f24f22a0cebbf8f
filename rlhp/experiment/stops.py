"""Clean stops: SIGINT (Ctrl-C) and SIGTERM (what SLURM sends before pre-emption) end a run after
the step in progress, with a checkpoint; a second Ctrl-C stops at once."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType

from rlhp.logs import CONSOLE

log = logging.getLogger(__name__)


class StopRequest:
    """While active, records the first SIGINT or SIGTERM instead of dying; a second SIGINT raises
    KeyboardInterrupt as usual. Falsy until a signal arrives; then ``signal`` names it."""

    def __init__(self, what: str = "this round") -> None:
        self.what = what
        self.signal: signal.Signals | None = None
        self._previous: dict[int, object] = {}

    def __bool__(self) -> bool:
        return self.signal is not None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signal = signal.Signals(signum)
        # A second Ctrl-C is the user insisting: Python's own handler stops at once.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        log.warning("%s: stopping after %s and saving a checkpoint (Ctrl-C again to stop at once)",
                    self.signal.name, self.what, extra=CONSOLE)

    def __enter__(self) -> StopRequest:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold a SIGINT that arrives inside the block and deliver it once the block ends.

    A checkpoint cut short is worth nothing, and writers such as ``torch.save`` turn an interrupt
    inside them into their own errors, so a Ctrl-C while one is written waits the second it takes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held and callable(previous):
            previous(signal.SIGINT, None)
