"""Experiments of jaxlab.topology (NAME `topology_<module>`); shared set-up in `_setup.py`."""
