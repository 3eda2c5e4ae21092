"""Public docstrings say what they mean where a user reads them (`help()`): no pointer to
a private module's docstring, and documented keyword lists that match the signature."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import jaxlab


def _public_objects():
    for info in pkgutil.iter_modules(jaxlab.__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"jaxlab.{info.name}")
        for name in getattr(mod, "__all__", None) or [n for n in vars(mod) if n[0] != "_"]:
            obj = getattr(mod, name, None)
            if obj is None or inspect.ismodule(obj):
                continue
            yield f"jaxlab.{info.name}.{name}", obj
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if not attr.startswith("_") and callable(member):
                        yield f"jaxlab.{info.name}.{name}.{attr}", member


def test_no_public_docstring_points_to_an_invisible_module_docstring():
    pointing = sorted(
        q for q, obj in _public_objects() if re.search(r"module doc", inspect.getdoc(obj) or "")
    )
    assert not pointing, "docstrings pointing to a private module docstring: " + str(pointing)


def test_topology_trainer_documents_its_real_arguments():
    import jaxlab.topology as tp

    doc = inspect.getdoc(tp.Trainer)
    params = [p for p in inspect.signature(tp.Trainer).parameters if p != "self"]
    assert "model" in params
    assert "static" not in params
    for p in params:
        assert f"`{p}`" in doc, p
    assert "- `static`" not in doc


def test_cells_fit_lists_every_keyword_it_forwards():
    from jaxlab import cells

    doc = inspect.getdoc(cells.fit)
    forwarded = [p for p in inspect.signature(cells.train_lecell).parameters if p != "counts"]
    for p in forwarded:
        assert f"`{p}`" in doc, p
