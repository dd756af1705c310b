"""Sphinx configuration of the bmrm documentation.

Build (from the checkout's root)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

Before reading the sources the build writes, under ``docs/generated/`` (never committed):
the API reference, one page per public module listing every name of its ``__all__``
(:func:`write_api_pages`), and the results page made from ``experiments/results/*.csv``
(``docs/make_results.py``). The gallery (``docs/examples/``) runs during the build.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import re
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS))

import make_results  # noqa: E402

import bmrm  # noqa: E402
import losses  # noqa: E402

project = "bmrm"
author = "the bmrm developers"
copyright = "the bmrm developers"
release = bmrm.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "examples/README.rst", "**.ipynb_checkpoints"]
# sphinx-gallery writes its timings page (sg_execution_times.rst) at the root: generated, ignored
templates_path = ["_templates"]
html_theme = "furo"
html_title = f"bmrm {release}"
myst_heading_anchors = 3

# the API reference: numpydoc renders the docstrings; members are listed by autosummary
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": True, "show-inheritance": False}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# offline: no intersphinx, no remote images
sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "generated/gallery",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "matplotlib_animations": False,
    "reset_modules": ("matplotlib",),
    "abort_on_example_error": True,
}

# Public modules: every module of bmrm and losses whose dotted name has no part starting
# with an underscore, the packages first.
PACKAGES = (bmrm, losses)


def public_modules() -> list[str]:
    """The public modules, packages before their submodules, in name order."""
    names = []
    for package in PACKAGES:
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not any(part.startswith("_") for part in info.name.split(".")):
                names.append(info.name)
    return sorted(names, key=lambda name: (name.count("."), name))


def public_names(module) -> list[str]:
    """``__all__``, else the public functions and classes the module defines itself."""
    names = getattr(module, "__all__", None)
    if names is not None:
        return [name for name in names if name != "__version__"]
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isfunction(value) or inspect.isclass(value))
        and getattr(value, "__module__", None) == module.__name__
    ]


def write_api_pages(folder: Path) -> None:
    """One page per public module: an autosummary of the names documented there first, and
    links for the names it re-exports from a module documented before it. The folder is
    written anew, so that pages of names that no longer exist do not linger."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    documented: dict[int, str] = {}  # id of the object -> its documented full name
    toc = []
    for name in public_modules():
        module = importlib.import_module(name)
        own, again = [], []
        for attr in public_names(module):
            value = getattr(module, attr)
            key = id(value)
            if inspect.ismodule(value):
                continue
            if (inspect.isclass(value) or callable(value)) and key in documented:
                again.append((attr, documented[key]))
                continue
            own.append(attr)
            if inspect.isclass(value) or callable(value):
                documented[key] = f"{name}.{attr}"
        lines = [
            name,
            "=" * len(name),
            "",
            f".. automodule:: {name}",
            "   :no-members:",
            "",
        ]
        if own:
            lines += [
                f".. currentmodule:: {name}",
                "",
                ".. autosummary::",
                "   :toctree: .",
                "   :nosignatures:",
                "",
                *(f"   {attr}" for attr in own),
                "",
            ]
        if again:
            lines += [
                "Also available here:",
                "",
                *(f"- ``{name}.{attr}``: :obj:`{full}`" for attr, full in again),
                "",
            ]
        text = "\n".join(lines)
        path = folder / f"{name}.rst"
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        toc.append(name)
    index = [
        "API reference",
        "=============",
        "",
        "Every public name of every public module, from its docstring. A name re-exported by "
        "a package is documented once, where it is listed first, and linked from the others.",
        "",
        ".. toctree::",
        "   :maxdepth: 1",
        "",
        *(f"   {name}" for name in toc),
        "",
    ]
    text = "\n".join(index)
    path = folder / "index.rst"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


write_api_pages(DOCS / "generated" / "api")
make_results.main(
    [
        "--results",
        str(ROOT / "experiments" / "results"),
        "--out",
        str(DOCS / "generated" / "results"),
    ]
)
os.environ.setdefault("BMRM_DOCS_BUILD", "1")

# ------------------------------------------------------------------ docstrings as written
#
# The docstrings write mathematics in plain Unicode (|P|, ‖w‖) and fitted attributes with a
# trailing underscore (coef_): neither is meant as reStructuredText markup (a substitution,
# a hyperlink target). After numpydoc has turned the sections into reStructuredText, such
# characters outside literals, roles, directives and literal blocks are escaped.

_TRAILING_UNDERSCORE = re.compile(r"(?<=\w)_(?=[\s.,;:)\]'\"/]|$)")
_SEGMENTS = re.compile(r"(:\w+:`[^`]*`|``.*?``|`[^`]*`_*)")


def _escape_text(text: str) -> str:
    parts = _SEGMENTS.split(text)
    for i in range(0, len(parts), 2):  # the even parts are outside literals and roles
        parts[i] = _TRAILING_UNDERSCORE.sub(r"\\_", parts[i].replace("|", "\\|"))
    return "".join(parts)


def escape_plain_text(app, what, name, obj, options, lines) -> None:
    """Escape ``|`` and word-final ``_`` in the prose of a docstring (see above)."""
    block_indent = None  # indentation of the line that opened a literal or directive block
    doctest = False
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if not stripped:
            doctest = False
            continue
        if block_indent is not None:
            if indent > block_indent:
                continue
            block_indent = None
        if stripped.startswith(">>>") or doctest:
            doctest = True
            continue
        if stripped.startswith(".. "):
            block_indent = indent
            continue
        lines[i] = line[:indent] + _escape_text(stripped)
        if stripped.endswith("::"):
            block_indent = indent


def skip_member(app, what, name, obj, skip, options):
    """Leave out the metadata-routing setters scikit-learn adds to every estimator."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return skip


def _first_sentence_whole_literals(extract):
    """autosummary's summary, extended to the whole first line when the sentence it cut
    ends inside a double-backquoted literal (``0, ..., n``)."""

    def summary(doc, document):
        text = extract(doc, document)
        if text.count("``") % 2 and doc:
            return doc[0].strip()
        return text

    return summary


def setup(app):
    import sphinx.ext.autosummary as autosummary

    autosummary.extract_summary = _first_sentence_whole_literals(autosummary.extract_summary)
    app.connect("autodoc-process-docstring", escape_plain_text, priority=900)
    app.connect("autodoc-skip-member", skip_member)
