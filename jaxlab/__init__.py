"""jaxlab: a JAX-first differentiable science toolkit.

Components live in subpackages (`jaxlab.lm`, `jaxlab.laplex`, ...); import the
one you need. `jaxlab._core` holds the small helpers they share.
"""

__version__ = "0.1.0"
