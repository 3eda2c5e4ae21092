"""Experiments of jaxlab.lowrank (NAME `lowrank_<module>`); shared set-up in `_setup.py`."""
