"""Custom kernels behind jaxlab components (Pallas for GPU/TPU, CPU paths).

Importable without a GPU; Pallas kernels are tested in interpret mode on CPU.
"""
