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
                    # classmethod objects are not callable: document their function
                    if isinstance(member, (classmethod, staticmethod)):
                        member = member.__func__
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


def _own_doc(obj) -> str:
    """The object's own docstring; a dataclass's generated `Name(field, ...)` is none."""
    doc = (obj.__doc__ or "").strip()
    if inspect.isclass(obj) and re.match(rf"{re.escape(obj.__name__)}\(", doc):
        return ""
    return doc


def _public_definitions():
    """(qualified name, object) of every public class and function the components re-export
    (what the API reference documents; constants and type aliases are described in the
    component's docstring)."""
    for qual, obj in _public_objects():
        if qual.count(".") == 2 and (inspect.isclass(obj) or inspect.isfunction(obj)):
            yield qual, obj


def test_every_public_class_and_function_has_its_own_docstring():
    missing = sorted(q for q, obj in _public_definitions() if not _own_doc(obj))
    assert not missing, "public names without a docstring (the API reference shows them): " + str(
        missing
    )


# Public functions whose docstring lacks `**Arguments:**` or `**Returns:**` (mostly one-line
# docstrings of small helpers), counted on 2026-12-01. A ratchet: new functions document
# both sections; lower the number when you add them to an old one.
MISSING_SECTIONS_AT_MOST = 257


def test_function_docstrings_have_arguments_and_returns():
    lacking = []
    for qual, obj in _public_definitions():
        if not inspect.isfunction(obj) or not inspect.signature(obj).parameters:
            continue
        doc = _own_doc(obj)
        if "**Arguments:**" not in doc or "**Returns:**" not in doc:
            lacking.append(qual)
    assert len(lacking) <= MISSING_SECTIONS_AT_MOST, (
        f"{len(lacking)} public functions lack **Arguments:**/**Returns:** "
        f"(at most {MISSING_SECTIONS_AT_MOST}): {sorted(lacking)}"
    )


def test_no_public_docstring_points_to_a_private_module():
    """Issue 60: public docstrings name the public API (`jaxlab.run_steps`,
    `jaxlab.data.wheel_file`), never `jaxlab._core` or `jaxlab._kernels`."""
    objs = list(_public_objects())
    objs += [
        (f"jaxlab.{i.name}", importlib.import_module(f"jaxlab.{i.name}"))
        for i in pkgutil.iter_modules(jaxlab.__path__)
        if not i.name.startswith("_")
    ]
    pointing = sorted(
        q for q, obj in objs if re.search(r"jaxlab\._\w|`_core\b", inspect.getdoc(obj) or "")
    )
    assert not pointing, "public docstrings naming a private module: " + str(pointing)


def _hooks():
    """docs/hooks.py (the site's navigation and API-table summaries), loaded by path."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "docs" / "hooks.py"
    spec = importlib.util.spec_from_file_location("jaxlab_docs_hooks", path)
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _public_constants():
    hooks = _hooks()
    for comp in hooks.components():
        mod = importlib.import_module(f"jaxlab.{comp}")
        for name, obj in vars(mod).items():
            if name.startswith("_") or inspect.ismodule(obj):
                continue
            if inspect.isclass(obj) or callable(obj):
                continue
            yield hooks, comp, name, obj


# constants whose file another change owns for now; their summary is their type, never
# the type's docstring
PENDING_CONSTANT_DOCS: set[str] = set()


def test_every_public_constant_has_its_own_docstring():
    """Issue 60: a constant's `__doc__` is its type's ("Built-in immutable sequence."), which
    the API tables showed as its summary; each has an attribute docstring instead."""
    consts = list(_public_constants())
    assert len(consts) > 40
    missing = sorted(
        f"{comp}.{name}"
        for hooks, comp, name, _ in consts
        if not hooks.constant_docstring(comp, name)
    )
    assert set(missing) <= PENDING_CONSTANT_DOCS, "constants without a docstring: " + str(
        sorted(set(missing) - PENDING_CONSTANT_DOCS)
    )
    for hooks, comp, name, obj in consts:
        line = hooks.summary(comp, name, obj)
        builtin = (inspect.getdoc(type(obj)) or "").split("\n")[0]
        assert builtin not in line, f"{comp}.{name}: summary is its type's docstring"
        assert line, f"{comp}.{name}: empty summary"


def test_constant_docstring_reads_the_string_after_the_assignment():
    hooks = _hooks()
    doc = hooks.constant_docstring("routing", "QUESTION_TYPES")
    assert doc.startswith("The easy-VQA question types")
    from jaxlab import routing

    assert hooks.summary("routing", "QUESTION_TYPES", routing.QUESTION_TYPES) == doc.replace(
        "\n", " "
    )
    # a function keeps its own docstring's first paragraph
    first = inspect.getdoc(routing.aiq).split("\n\n")[0].replace("\n", " ")
    assert hooks.summary("routing", "aiq", routing.aiq) == first
