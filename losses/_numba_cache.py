"""Recovery from a damaged numba cache of this project's kernels.

numba keeps each ``cache=True`` kernel in an index file (``.nbi``) and data files (``.nbc``)
in a cache folder (``NUMBA_CACHE_DIR``, or ``__pycache__`` beside the source). numba reads
them with :mod:`pickle` and lets any error through: a truncated, zero-byte or overwritten
file (a full disk, a copy interrupted, two numba versions writing one folder) makes every
later call of the kernel fail with a raw ``UnpicklingError`` or ``EOFError`` until someone
finds and deletes the file.

:func:`install` makes an unreadable cache file of a kernel of the ``losses`` or ``bmrm``
packages (and of those only: the kernels of other packages meet numba's own behaviour) read
as a missing entry: numba compiles the kernel again and writes a good file over the bad one.
The first such file of each cache folder is reported once per process by a
``RuntimeWarning`` naming the folder.
"""

from __future__ import annotations

import functools
import os
import threading
import warnings

from numba.core import caching

__all__ = ["install"]

_PACKAGES = ("losses", "bmrm")
_warned: set[str] = set()
_lock = threading.Lock()


@functools.cache
def _cache_folder_names() -> frozenset[str]:
    """What numba names the cache folder of a source folder of ``losses`` or ``bmrm``:
    ``<folder>/__pycache__`` beside the sources, and the last part of the folder under
    ``NUMBA_CACHE_DIR`` or the user's cache (the folder's name and a hash of its path)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    names = set()
    for package in _PACKAGES:
        for folder, subfolders, _ in os.walk(os.path.join(root, package)):
            subfolders[:] = [name for name in subfolders if name != "__pycache__"]
            names.add(os.path.join(folder, "__pycache__"))
            source = os.path.join(folder, "module.py")
            names.add(caching._CacheLocator.get_suitable_cache_subpath(source))
    return frozenset(names)


def _ours(cache_path: str) -> bool:
    """Whether ``cache_path`` holds the cache of a kernel of ``losses`` or ``bmrm``."""
    path = os.path.abspath(cache_path)
    names = _cache_folder_names()
    return path in names or os.path.basename(path) in names


def _report(cache_path: str, name: str, exc: BaseException) -> None:
    with _lock:
        if cache_path in _warned:
            return
        _warned.add(cache_path)
    warnings.warn(
        f"numba's cache folder {cache_path} holds an unreadable file {name} "
        f"({type(exc).__name__}: {exc}); the kernels whose cache files cannot be read are "
        "compiled again and their files rewritten",
        RuntimeWarning,
        stacklevel=2,
    )


def install() -> None:
    """Make unreadable cache files of this project's kernels read as cache misses (see
    the module docstring); installing twice changes nothing."""
    cls = caching.IndexDataCacheFile
    if getattr(cls, "_bmrm_recovery", False):
        return
    load_index, load_data = cls._load_index, cls._load_data

    def _load_index(self):
        try:
            return load_index(self)
        except Exception as exc:  # unpickling garbage may raise anything
            if not _ours(self._cache_path) or isinstance(exc, PermissionError):
                raise
            _report(self._cache_path, self._index_name, exc)
            return {}  # no entry: compiled, then the index is written anew

    def _load_data(self, name):
        try:
            return load_data(self, name)
        except OSError:
            raise  # a file removed meanwhile: numba's own handling (a miss)
        except Exception as exc:
            if not _ours(self._cache_path):
                raise
            _report(self._cache_path, name, exc)
            return None  # a miss: compiled, then this data file is written over

    cls._load_index = _load_index
    cls._load_data = _load_data
    cls._bmrm_recovery = True
