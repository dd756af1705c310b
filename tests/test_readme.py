"""The README's Python examples run as written, in order, in one namespace.

A new user copies them first. The examples that need files or a Dask cluster (a LETOR file
of their own, a scheduler address) are named below and not run; any other example must run
without error.
"""

import re
import warnings
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
# what marks an example that needs the user's own files or a running Dask cluster
NEEDS_OUTSIDE = ('load_svmlight("train.txt")', 'Client("scheduler-address', "frame_test")


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_readme_examples_run(monkeypatch, tmp_path):
    blocks = examples()
    outside = [b for b in blocks if any(mark in b for mark in NEEDS_OUTSIDE)]
    # the three examples of files and clusters, and no other, are left out
    assert len(outside) == 3, [b[:80] for b in outside]
    monkeypatch.chdir(tmp_path)  # anything an example writes lands here
    namespace: dict = {}
    ran = 0
    for i, block in enumerate(blocks):
        if block in outside:
            continue
        # a file of its own, as a user's script would be (numba caches by source file)
        path = tmp_path / f"readme_example_{i}.py"
        path.write_text(block, encoding="utf-8")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(block, str(path), "exec"), namespace)
        ran += 1
    assert ran == len(blocks) - 3 >= 6
    model = namespace["model"]
    # the last model of the examples is a fitted one
    assert model.result_.fun > 0


@pytest.mark.parametrize("mark", NEEDS_OUTSIDE)
def test_every_outside_mark_still_matches_an_example(mark):
    assert any(mark in block for block in examples()), mark
