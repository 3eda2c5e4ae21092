"""Experiments of jaxlab.routing (NAME `routing_<module>`); shared set-up in `_setup.py`."""
