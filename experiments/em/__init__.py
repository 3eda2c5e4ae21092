"""Experiments of jaxlab.em (NAME `em_<module>`); shared set-up in `_setup.py`."""
