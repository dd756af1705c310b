"""numba kernels on arrays only: scores, targets, query_ptr and preallocated outputs."""

# Options of the kernels that only other kernels call: numba builds no Python entry point
# for them (unboxing of arguments, boxing of results), a part of every first compilation.
INNER = {"cache": True, "no_cpython_wrapper": True, "no_cfunc_wrapper": True}
