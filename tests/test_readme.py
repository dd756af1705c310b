"""The README's Python examples run as written, in order, in one namespace.

A new user copies them first. The example that reads LETOR / svmlight files gets
``train.txt`` and ``test.txt`` written beforehand (generated queries in the svmlight format
with ``qid:``), so every example runs.
"""

import re
import warnings
from pathlib import Path

import numpy as np

import bmrm
from bmrm.demo import make_ranking_data
from bmrm.io import dump_svmlight

README = Path(__file__).resolve().parent.parent / "README.md"


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_readme_examples_run(monkeypatch, tmp_path):
    blocks = examples()
    monkeypatch.chdir(tmp_path)  # anything an example writes lands here
    X, y, qid = make_ranking_data(60, 10, 8, seed=3)
    dump_svmlight("train.txt", X[:400], y[:400], qid[:400])
    dump_svmlight("test.txt", X[400:], y[400:], qid[400:])
    namespace: dict = {}
    checked = set()
    for i, block in enumerate(blocks):
        # a file of its own, as a user's script would be (numba caches by source file)
        path = tmp_path / f"readme_example_{i}.py"
        path.write_text(block, encoding="utf-8")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(block, str(path), "exec"), namespace)
        if "load_svmlight" in block:
            # the saved model file predicts as the fitted model did
            loaded = bmrm.load("model.json")
            assert np.array_equal(loaded.predict(namespace["X_test"]), namespace["scores"])
            checked.add("files")
        if "OrdinalRegressor" in block:
            # the regressor's labels are classes of its training labels
            assert set(np.unique(namespace["labels"])) <= set(np.unique(namespace["y"]))
            checked.add("ordinal")
        if "CofiRank(" in block:
            # CofiRank's objective never increased over its outer iterations
            objective = np.asarray(namespace["model"].result_.objective)
            assert objective.size >= 1
            assert np.all(np.diff(objective) <= 1e-12 * np.abs(objective[:-1]))
            checked.add("cofirank")
    assert checked == {"files", "ordinal", "cofirank"}
