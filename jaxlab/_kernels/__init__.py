"""Custom kernels behind jaxlab components (Pallas for GPU/TPU, CPU paths).

The Python side lives here; the C++ sources live in the repository's `kernels/` folder
and ship inside the wheel beside the modules that compile them (`laplex/`). Importable
without a GPU; Pallas kernels are tested in interpret mode on CPU. Users reach the
strategies through the component (`jaxlab.laplex.BlockedScan`, ...).
"""
