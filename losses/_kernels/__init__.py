"""numba kernels on arrays only: scores, targets, query_ptr and preallocated outputs."""
