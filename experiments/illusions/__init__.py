"""Experiments of jaxlab.illusions (P14; NAME `illusions_<module>`)."""
