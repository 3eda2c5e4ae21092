"""Experiments of jaxlab.blackboard (NAME `blackboard_<module>`); shared set-up in `_setup.py`."""
