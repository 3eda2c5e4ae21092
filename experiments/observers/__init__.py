"""Experiments of jaxlab.observers (NAME `observers_<module>`); shared set-up in `_setup.py`."""
