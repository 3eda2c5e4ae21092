"""Experiments of jaxlab.stereo (NAME `stereo_<module>`); shared set-up in `_setup.py`."""
