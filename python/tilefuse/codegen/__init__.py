"""Code generation: Triton kernels (triton.py) and the Python wrapper (wrapper.py)."""
