"""Numba (and CuPy) kernels used by more than one method, one module per topic."""
