"""How long numba's compiler held up a fit: compiling kernels or loading them from its cache.

The first call of a numba kernel with new argument types compiles it (seconds) or loads it
from the on-disk cache (milliseconds). :class:`CompileClock` measures the wall-clock time
during which any thread is inside numba's compiler (waiting for its lock included), through
numba's event API (the ``numba:compiler_lock`` event, triggered on every entry to the
compiler). The solver excludes that time from its ``max_time``
budget and reports it as ``compile_seconds``.
"""

from __future__ import annotations

import threading
import time

from numba.core import event

__all__ = ["CompileClock"]

_EVENTS = ("numba:compiler_lock",)


class CompileClock(event.Listener):
    """A context manager; ``seconds`` is the compiler time seen while it is active.

    Nested and concurrent entries into the compiler count once: the clock runs while at
    least one thread is inside.
    """

    def __init__(self):
        self.seconds = 0.0
        self._inside = 0
        self._since = 0.0
        self._lock = threading.Lock()

    def on_start(self, ev) -> None:
        """Start the clock at the outermost compilation's start (numba's event).

        Parameters
        ----------
        ev : numba.core.event.Event
            The compile event.
        """
        with self._lock:
            if self._inside == 0:
                self._since = time.perf_counter()
            self._inside += 1

    def on_end(self, ev) -> None:
        """Stop the clock at the outermost compilation's end (numba's event).

        Parameters
        ----------
        ev : numba.core.event.Event
            The compile event.
        """
        with self._lock:
            if self._inside == 0:  # entered before the clock started
                return
            self._inside -= 1
            if self._inside == 0:
                self.seconds += time.perf_counter() - self._since

    def current(self) -> float:
        """Return the seconds so far, including a compilation still in progress.

        Returns
        -------
        float
            The seconds spent in numba's compiler so far.
        """
        with self._lock:
            running = time.perf_counter() - self._since if self._inside else 0.0
            return self.seconds + running

    def __enter__(self) -> CompileClock:
        for kind in _EVENTS:
            event.register(kind, self)
        return self

    def __exit__(self, *exc) -> None:
        for kind in _EVENTS:
            event.unregister(kind, self)
