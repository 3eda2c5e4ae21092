"""Experiments of jaxlab.biophys (NAME `biophys_<module>`); shared set-up in `_setup.py`."""
