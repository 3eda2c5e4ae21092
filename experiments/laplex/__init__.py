"""Experiments of jaxlab.laplex (NAME `laplex_<module>`); shared set-up in `_setup.py`."""
