"""numba kernels on arrays only: scores, targets, query_ptr and preallocated outputs."""

# Options of every kernel. NumPy's error model (a division by zero gives inf or nan instead of
# raising, as the kernels never divide by zero) leaves the exception path of every division
# out of the compiled code, which shortens each first compilation. One set of options for all
# kernels also lets them share numba's compilations of its own functions (np.empty, min, ...),
# which it repeats for every distinct set of options of their callers.
OUTER = {"cache": True, "nogil": True, "error_model": "numpy"}
# Options of the kernels that only other kernels call: numba builds no Python entry point
# for them (unboxing of arguments, boxing of results), a part of every first compilation.
INNER = {**OUTER, "no_cpython_wrapper": True, "no_cfunc_wrapper": True}
