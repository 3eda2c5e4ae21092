"""Experiments of jaxlab.beliefs (P13; NAME `beliefs_<module>`)."""
