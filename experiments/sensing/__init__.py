"""Experiments of jaxlab.sensing (NAME `sensing_<module>`); shared set-up in `_setup.py`."""
