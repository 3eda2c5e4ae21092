"""Experiments of jaxlab.eeg (NAME `eeg_<module>`); shared set-up in `_setup.py`."""
