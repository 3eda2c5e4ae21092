"""Experiments of jaxlab.cells (NAME `cells_<module>`); shared set-up in `_setup.py`."""
