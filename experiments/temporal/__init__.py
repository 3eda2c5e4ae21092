"""Experiments of jaxlab.temporal (NAME `temporal_<module>`); shared set-up in `_setup.py`."""
