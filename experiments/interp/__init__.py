"""Experiments of jaxlab.interp (NAME `interp_<module>`)."""
