"""Every public docstring follows numpydoc, checked by numpydoc's own validator.

The public names are found, not listed: every module of :mod:`bmrm` and :mod:`losses` whose
dotted path has no part starting with an underscore is public, and its public names are its
``__all__`` (or, without one, the functions and classes it defines whose names do not start
with an underscore); of a public class, the methods and properties it or a base class of
this project defines, without a leading underscore. An object exported under several names
(``bmrm.fit`` is ``bmrm.model.fit``) is checked once, under the first public name found.
Constants (``losses.metrics.METRICS``, ...) carry no docstring of their own and are left out.

The checks (codes of :data:`numpydoc.validate.ERROR_MSGS`) and why each is chosen:

- GL01, GL03, GL05: the summary starts on the opening line or the next, paragraphs are
  separated by one blank line, and no line is indented by tabs (which reST reads as
  indentation of its own) in the text the API reference is rendered from.
- GL06, GL07: only numpydoc's sections, in numpydoc's order (a Parameters section after
  Raises renders as a second, unrelated list).
- GL08: every public object has a docstring.
- GL09, GL10: deprecations lead, and reST directives have their two colons.
- SS01-SS06: a one-line summary, capitalised, ending with a period, without leading blanks,
  in the imperative for functions and methods ("Return", not "Returns"): the summary is the
  line the API reference's tables show.
- PR01-PR03: every parameter of the signature documented, none that is not, in the
  signature's order.
- PR04-PR10: each parameter has a type and a description, written as numpydoc parses them.
- RT01-RT05: a function that returns something says what, with a description; one returned
  value is given by its type alone (a name is for the parts of a tuple).
- YD01: a generator documents what it yields.
- SA02-SA04: a See Also entry, where there is one, says why.

Left out, and why: GL02 (the closing quotes on a line of their own: layout, not content);
ES01, SA01 and EX01 (an extended summary, a See Also and Examples are written where they
help, not everywhere).

The Examples sections run as doctests in :func:`test_examples`, one case per module that
has any. Both tests stay fast: the validation only reads docstrings, and the examples are
small (a few small kernel calls, one tiny fit).
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil

import pytest
from numpydoc.validate import validate

PACKAGES = ("bmrm", "losses")

CHECKED = frozenset(
    ["GL01", "GL03", "GL05", "GL06", "GL07", "GL08", "GL09", "GL10"]
    + [f"SS0{i}" for i in range(1, 7)]
    + [f"PR{i:02d}" for i in range(1, 11)]
    + [f"RT0{i}" for i in range(1, 6)]
    + ["YD01", "SA02", "SA03", "SA04"]
)

# modules that run something when imported
NOT_IMPORTED = frozenset(["bmrm.__main__"])


def _is_public_module(name: str) -> bool:
    return not any(part.startswith("_") for part in name.split("."))


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        names.append(package)
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, package + "."):
            if info.name not in NOT_IMPORTED:
                names.append(info.name)
    return names


def _own(cls: type) -> bool:
    return cls.__module__.split(".")[0] in PACKAGES


def _module_names(module) -> list[str]:
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and value.__module__ == module.__name__
    ]


def _members(cls: type):
    """(name, defining class) of the public methods and properties of ``cls``."""
    for name in dir(cls):
        if name.startswith("_"):
            continue
        owner = next((base for base in cls.__mro__ if name in vars(base)), None)
        if owner is None or not _own(owner):
            continue
        # a method as the class gives it (a decorated one, such as scikit-learn's
        # ``available_if``, resolves to a function there)
        value = getattr(cls, name, None)
        if isinstance(vars(owner)[name], property):
            yield name, owner
        elif inspect.isroutine(value) and value.__module__.split(".")[0] in PACKAGES:
            yield name, owner


def public_objects() -> tuple[dict[str, str], set[str]]:
    """Map each public object's import path (for numpydoc) to its first public name.

    Also return the modules that define the public objects.
    """
    found: dict[str, str] = {}
    defining: set[str] = set()
    for module_name in _modules():
        if not _is_public_module(module_name):
            continue
        module = importlib.import_module(module_name)
        for name in _module_names(module):
            value = getattr(module, name)
            if not (inspect.isclass(value) or callable(value)):
                continue
            if not hasattr(value, "__qualname__") or not hasattr(value, "__module__"):
                continue
            path = f"{value.__module__}.{value.__qualname__}"
            found.setdefault(path, f"{module_name}.{name}")
            if value.__module__.split(".")[0] in PACKAGES:
                defining.add(value.__module__)
            if inspect.isclass(value) and _own(value):
                for member, owner in _members(value):
                    member_path = f"{owner.__module__}.{owner.__qualname__}.{member}"
                    found.setdefault(member_path, f"{module_name}.{name}.{member}")
                    defining.add(owner.__module__)
    return found, defining


PUBLIC, DEFINING_MODULES = public_objects()


@pytest.mark.parametrize("path", sorted(PUBLIC), ids=[PUBLIC[p] for p in sorted(PUBLIC)])
def test_docstring(path):
    result = validate(path)
    errors = [f"{code}: {message}" for code, message in result["errors"] if code in CHECKED]
    assert not errors, f"{PUBLIC[path]} ({path}):\n" + "\n".join(errors)


def _doctest_modules() -> list[str]:
    """The public modules and the modules defining a public object, that hold an example."""
    modules = {name for name in _modules() if _is_public_module(name)} | DEFINING_MODULES
    finder = doctest.DocTestFinder()
    return sorted(
        name
        for name in modules
        if any(test.examples for test in finder.find(importlib.import_module(name)))
    )


@pytest.mark.parametrize("module_name", _doctest_modules())
def test_examples(module_name):
    module = importlib.import_module(module_name)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0
    assert result.failed == 0, f"{result.failed} example(s) of {module_name} failed (see above)"
