import pytest

from tests._data import data_dir, missing_data_reason


@pytest.fixture
def shared_data():
    path = data_dir()
    if path is None:
        pytest.skip(missing_data_reason())
    return path


@pytest.fixture
def force_threads(monkeypatch):
    """``force_threads(n)`` makes every kernel run over blocks (``losses._threads.run_queries``
    and the blocked products of ``bmrm.solver``) split its input into ``n`` blocks (fewer
    only when there are fewer queries or row blocks) whatever its size, until the test ends.
    It returns a list that receives the number of blocks of every such run from then on.

    Below ``PARALLEL_MIN_ROWS`` rows the package runs a kernel as one block on the calling
    thread, so a test on a small input that sets numba's thread count never reaches the
    thread pool; with this fixture it does, and ``force_threads(1)`` gives the one-block run
    to compare with.
    """
    import bmrm.solver.cut_cache
    import bmrm.solver.products
    import losses._threads

    state = {"threads": 1, "runs": [], "installed": False}

    def n_threads_for(n_rows, min_rows=None):
        return state["threads"]

    def counting(run_blocks):
        def run(kernel, bounds, *args):
            state["runs"].append(len(bounds) - 1)
            return run_blocks(kernel, bounds, *args)

        return run

    def force(n_threads: int) -> list[int]:
        if not state["installed"]:  # wraps the run_blocks in place now
            for module in (losses._threads, bmrm.solver.products, bmrm.solver.cut_cache):
                monkeypatch.setattr(module, "n_threads_for", n_threads_for)
                monkeypatch.setattr(module, "run_blocks", counting(module.run_blocks))
            state["installed"] = True
        state["threads"] = n_threads
        state["runs"] = []
        return state["runs"]

    return force
