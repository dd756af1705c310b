"""Shared plumbing for the experiment scripts: options, data location, output folder, results.

Scripts read real data from ``--data`` (default: ``$BMRM_DATA``, else ``../shared/data``
beside the checkout) and write a CSV of raw results, a Markdown table and, for some, PNG
plots into ``--out`` (default ``results/<script name>`` in the checkout).

The rules every script follows:

* every option is checked when the arguments are parsed (the ``type=`` functions below, or
  ``choices=``): a bad value is an argument error (``python experiments/X.py: error: --opt
  must be ...; got ...``, exit 2) before any data are read or anything is written;
* missing or unreadable data end the run with one line naming the file (exit 1), before
  the output folder exists (:func:`require`, :func:`mq2008_root`, :func:`load_letor`);
* the output folder is created (:func:`make_out`) once the arguments and the data have
  been checked, and a run that fails removes the folders it created if it left them empty
  (:func:`script`);
* every result file is written to a temporary file in the same folder, then renamed over
  the old one (:func:`write_csv`, :func:`write_text`, :func:`save_figure`), so a run that
  fails never leaves a truncated file nor replaces an earlier run's.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import functools
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from bmrm._validation import MAX_LAM, MIN_LAM
from bmrm.io import load_letor_fold

REPO = Path(__file__).resolve().parents[1]
# the tidy result files the documentation's results page is made from (docs/make_results.py)
RESULTS = REPO / "experiments" / "results"
TIDY_KEYS = ("experiment", "dataset", "method", "setting", "repetition")


def data_dir(*, existing: bool = True) -> Path | None:
    """The shared real-data folder: ``$BMRM_DATA``, else ``../shared/data`` beside the
    checkout; None when ``existing`` and that folder does not exist."""
    env = os.environ.get("BMRM_DATA")
    path = Path(env) if env else REPO.parent / "shared" / "data"
    return path if not existing or path.is_dir() else None


# --------------------------------------------------------------------------------- options


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser; a value refused by a ``type=`` function of this module is reported
    as ``--opt must be ...; got ...`` (argparse's own wording is ``argument --opt: ...``)."""

    def error(self, message: str):
        super().error(re.sub(r"^argument ([^:]+): must ", r"\1 must ", message))


def number(
    kind: type = float,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    name: str | None = None,
) -> Callable[[str], float]:
    """An argparse ``type=`` function: a finite ``kind`` (int or float) within the bounds
    (``low_open`` / ``high_open``: the bound itself excluded)."""
    noun = "an integer" if kind is int else "a number"

    def bounds() -> str:
        if low is not None and high is not None:
            if kind is int and not (low_open or high_open):
                return f" in {low}..{high}"
            return f" in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        if low is not None:
            return f" {'>' if low_open else '>='} {low:g}"
        if high is not None:
            return f" {'<' if high_open else '<='} {high:g}"
        return ""

    def convert(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {noun}{bounds()}; got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number; got {text}")
        below = low is not None and (value <= low if low_open else value < low)
        above = high is not None and (value >= high if high_open else value > high)
        if below or above:
            raise argparse.ArgumentTypeError(f"must be{bounds()}; got {text}")
        return value

    convert.__name__ = name or f"{kind.__name__} value"
    return convert


positive_int = number(int, 1, name="positive_int")
nonneg_int = number(int, 0, name="nonneg_int")
positive_float = number(float, 0.0, low_open=True, name="positive_float")
nonneg_float = number(float, 0.0, name="nonneg_float")
probability = number(float, 0.0, 1.0, name="probability")
# a relative-gap tolerance of bmrm.fit: 0 (run to the other limits) up to, not including, 1
tolerance = number(float, 0.0, 1.0, high_open=True, name="tolerance")
# the regularisation constant of bmrm.fit, within the range its master problems solve
lam_value = number(float, MIN_LAM, MAX_LAM, name="lam")
# a LETOR fold
fold_number = number(int, 1, 5, name="fold")


def int_at_least(low: int) -> Callable[[str], int]:
    """An integer >= ``low``."""
    return number(int, low, name=f"int_at_least_{low}")


def comma_list(choices: Sequence[str]) -> Callable[[str], list[str]]:
    """A comma-separated list of names among ``choices``, as a list."""

    def convert(text: str) -> list[str]:
        names = text.split(",")
        bad = [n for n in names if n not in choices]
        if bad:
            raise argparse.ArgumentTypeError(
                f"must be comma-separated names among {', '.join(choices)}; got {bad[0]!r}"
            )
        return names

    convert.__name__ = "comma_list"
    return convert


def out_folder(text: str) -> Path:
    """``--out``: a folder, existing or not; a path that names a file, or goes through one,
    is refused."""
    path = Path(text)
    for p in (path, *path.parents):
        if p.exists() or p.is_symlink():
            if not p.is_dir():
                where = "" if p == path else f" ({p} is a file)"
                raise argparse.ArgumentTypeError(f"must be a folder; got {text}{where}")
            break
    return path


def given(value, default):
    """An option's value, or ``default`` when the option was not given (None): an explicit
    0 or empty value is kept (``value or default`` would replace it)."""
    return default if value is None else value


def check_distinct(parser: argparse.ArgumentParser, option: str, values) -> None:
    """An argument error unless ``values`` repeat none."""
    if values is not None and len(set(values)) < len(values):
        parser.error(f"{option} must not repeat a value; got {list(values)}")


def base_parser(
    name: str, description: str | None, *, data: bool = True, quick: bool = True
) -> ArgumentParser:
    """The parser of ``python experiments/<name>.py``, with ``--out`` (default
    ``REPO/results/<name>``), ``--results`` (the tidy result file's folder, default
    ``--out``), and ``--data`` and ``--quick`` (the tiny test path) unless
    ``data`` / ``quick`` are False."""
    parser = ArgumentParser(prog=f"python experiments/{name}.py", description=description)
    if data:
        parser.add_argument(
            "--data",
            type=Path,
            default=data_dir(existing=False),
            help="folder holding the shared data sets (default: $BMRM_DATA or ../shared/data)",
        )
    parser.add_argument(
        "--out",
        type=out_folder,
        default=REPO / "results" / name,
        help=f"output folder (default: results/{name} in the checkout)",
    )
    parser.add_argument(
        "--results",
        type=out_folder,
        default=None,
        help="folder of the tidy result file <name>.csv and its <name>.meta.json (default: "
        "the --out folder; experiments/results is the one the documentation's results page "
        "reads)",
    )
    if quick:
        parser.add_argument(
            "--quick",
            action="store_true",
            help="a tiny configuration that runs end to end in seconds",
        )
    return parser


# ------------------------------------------------------------------------------------ data


def fail(message: str):
    """End the run with one line (exit 1)."""
    sys.exit("error: " + " ".join(str(message).split("\n")))


def require(path: Path, what: str) -> Path:
    """Exit with a one-line reason when a data file or folder is missing."""
    if not path.exists():
        fail(f"{what} not found at {path} (set --data or BMRM_DATA)")
    return path


@contextlib.contextmanager
def data_errors(path: Path | None = None):
    """Around code that reads data files: a missing, unreadable or malformed file ends the
    run with one line (the readers of :mod:`bmrm.io` name the file and the line; ``path``
    is named when the message does not)."""
    try:
        yield
    except (OSError, ValueError) as exc:
        if path is not None and str(path) not in str(exc):
            fail(f"{path}: {exc}")
        fail(exc)


def load_letor(root: Path, fold: int, **options) -> dict:
    """:func:`bmrm.io.load_letor_fold`, a missing or malformed partition ending the run with
    one line naming the file."""
    with data_errors():
        return load_letor_fold(root, fold, **options)


def mq2008_root(data: Path, what: str = "MQ2008") -> Path:
    """``<data>/mq2008``, its five partitions read (and kept in :mod:`bmrm.io`'s cache), so
    that a missing or malformed one ends the run before any work."""
    root = require(data / "mq2008", what)
    load_letor(root, 1, dense=False)  # fold 1 reads S1 .. S5
    return root


# ---------------------------------------------------------------------------------- output

_created: list[Path] = []  # folders made by make_out in the running script, deepest first


def make_out(path: Path) -> Path:
    """Create the output folder and its missing parents; call it once the arguments and the
    data have been checked. A run of a :func:`script` that fails removes them again if it
    left them empty."""
    path = Path(path)
    missing = []
    p = path
    while not (p.exists() or p.is_symlink()) and p != p.parent:
        missing.append(p)
        p = p.parent
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"cannot create the output folder {path}: {exc.strerror or exc}")
    _created.extend(missing)
    return path


def script(main: Callable) -> Callable:
    """Decorate a script's ``main``: when it fails (an exception, or a non-zero exit) the
    folders :func:`make_out` created during the call are removed if they are empty."""

    @functools.wraps(main)
    def run(*args, **kwargs):
        mark = len(_created)
        ok = False
        try:
            code = main(*args, **kwargs)
            ok = not code
            return code
        except SystemExit as exc:
            ok = exc.code in (None, 0)
            raise
        finally:
            made, _created[mark:] = _created[mark:], []
            if not ok:
                for folder in made:  # deepest first
                    try:
                        folder.rmdir()
                    except OSError:  # not empty (or already gone): keep it and its parents
                        break

    return run


@contextlib.contextmanager
def atomic_open(path: Path, mode: str = "w", **kwargs):
    """Open a temporary file beside ``path``; on success it replaces ``path`` (keeping an
    existing file's permissions), on failure it is removed and ``path`` is untouched."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        try:
            permissions = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            permissions = 0o666 & ~umask
        os.chmod(tmp, permissions)
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_csv(path: Path, rows: Sequence[dict], fields: Sequence[str] | None = None) -> None:
    """``rows`` as CSV (columns: ``fields``, else every key in order of appearance),
    written atomically (:func:`atomic_open`)."""
    if fields is None:
        fields = []
        for row in rows:
            fields.extend(k for k in row if k not in fields)
    with atomic_open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(fields))
        writer.writeheader()
        writer.writerows(rows)


def write_text(path: Path, text: str) -> None:
    """``text`` into ``path`` (UTF-8), written atomically (:func:`atomic_open`)."""
    with atomic_open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def save_figure(fig, path: Path, **options) -> None:
    """``fig.savefig`` into ``path`` (format from its suffix), written atomically."""
    path = Path(path)
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format=path.suffix.lstrip("."), **options)


def progress(message: str) -> None:
    """One progress line on stderr, with the time of day."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def markdown_table(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.4f}"
        return str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- tidy results


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def write_results(
    name: str,
    rows: Sequence[dict],
    folder: Path,
    argv: Sequence[str] | None = None,
    keep: Callable[[dict], bool] | None = None,
) -> Path:
    """Write the tidy result file ``<folder>/<name>.csv`` and its ``<name>.meta.json``.

    One row per method × data set × setting × repetition: the columns start with
    :data:`TIDY_KEYS` (every row must have them), then the measured columns (snake_case,
    units in the name: ``wall_s``, ``cpu_s``, ``ndcg_at_10``). The sibling JSON file records
    the exact command (``python experiments/<name>.py`` and ``argv``, default the process's
    arguments), the date (UTC), the machine (cores, load average, platform, Python) and the
    git commit. ``folder`` is the script's ``--results`` folder, else its ``--out`` folder:
    only a run asked to (``--results experiments/results``, :data:`RESULTS`) replaces the
    files the documentation's results page is made from. With ``keep``, the rows already in
    the file for which ``keep(row)`` is true stay, before ``rows`` (a run that adds one data
    set or setting to the others').
    """
    folder = Path(folder)
    path = folder / f"{name}.csv"
    if keep is not None and path.exists():
        with open(path, newline="") as fh:
            rows = [row for row in csv.DictReader(fh) if keep(row)] + list(rows)
    for row in rows:
        missing = [key for key in TIDY_KEYS if key not in row]
        if missing:
            raise ValueError(f"a tidy result row lacks {missing}: {row}")
    fields = list(TIDY_KEYS)
    for row in rows:
        fields.extend(k for k in row if k not in fields)
    folder.mkdir(parents=True, exist_ok=True)
    write_csv(path, rows, fields)
    args = list(sys.argv[1:] if argv is None else argv)
    meta = {
        "command": shlex.join(["python", f"experiments/{name}.py", *args]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cores": os.cpu_count(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "git_commit": _git_commit(),
    }
    write_text(folder / f"{name}.meta.json", json.dumps(meta, indent=1) + "\n")
    return path
