"""Experiments of jaxlab.lm (NAME `lm_<module>`); shared set-up in `_setup.py`."""
