"""Experiments of jaxlab.cslm (NAME `cslm_<module>`); shared set-up in `_setup.py`."""
