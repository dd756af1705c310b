"""The options of the solver's compiled functions (numba), in one place.

NumPy's error model (a division by zero gives inf or nan instead of raising) leaves the
exception path of every division out of the compiled code, which shortens each first
compilation. numba compiles its own functions (``np.empty``, ``max``, ...) once per set of
options of their callers; these are the options of the loss kernels too, so the solver's
functions and the kernels share those compilations.
"""

OUTER = {"cache": True, "nogil": True, "error_model": "numpy"}
# for functions that only other compiled functions call: no Python entry point (unboxing of
# arguments, boxing of results), a part of every first compilation
INNER = {**OUTER, "no_cpython_wrapper": True, "no_cfunc_wrapper": True}
