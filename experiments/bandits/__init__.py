"""Experiments of jaxlab.bandits (NAME `bandits_<module>`); shared set-up in `_setup.py`."""
