"""Running numba's parallel kernels on the calling thread when the input is small."""

from collections.abc import Iterator
from contextlib import contextmanager

import numba

# Below this many rows the loss kernels run on the calling thread.
PARALLEL_MIN_ROWS = 20_000


@contextmanager
def serial_below(n_rows: int, min_rows: int) -> Iterator[None]:
    """Within this context, parallel kernels use one thread if ``n_rows < min_rows``.

    Waking the thread pool costs from tens of microseconds to milliseconds per call (far more
    on a loaded machine), more than a kernel on a small input takes.
    """
    if n_rows >= min_rows:
        yield
        return
    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(previous)
