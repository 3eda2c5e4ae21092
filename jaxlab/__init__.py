"""jaxlab: a JAX-first differentiable science toolkit.

Components live in subpackages (`jaxlab.lm`, `jaxlab.laplex`, ...); import the
one you need. `jaxlab.sweep` runs a function over a leading axis of seeds or configs
(vmapped, sharded over the devices when there are several). `jaxlab._core` holds the
small helpers the components share; it is private to the package.
"""

from ._core import sweep as sweep

__version__ = "0.1.0"
