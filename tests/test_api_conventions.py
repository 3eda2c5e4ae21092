"""The calling convention of DESIGN.md §2, checked over every public callable of jaxlab:
a parameter named `key` is keyword-only, and no library function takes an integer seed
(randomness comes from a JAX key; seeds belong to experiment configs)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import typing

import pytest

import jaxlab
from jaxlab._core import AbstractStep

# Protocols whose `key` is positional by contract, each with its reason:
PROTOCOL_METHODS = {
    # jaxlab._core.run_steps calls step.init(model, key) and step.step(state, key)
    **{name: "AbstractStep protocol" for name in ("init", "step")},
    # loss hooks of step objects, called by their own step as loss(model, key)
    "LeCellStep.loss": "step loss hook",
    "NBVAEStep.loss": "step loss hook",
    # objectives handed to ObjectiveStep, called as objective(params, batch, key)
    "DenoiserObjective.__call__": "objective protocol of em.ObjectiveStep",
    "JointObjective.__call__": "objective protocol of em.ObjectiveStep",
    "SRObjective.__call__": "objective protocol of em.ObjectiveStep",
    "SegObjective.__call__": "objective protocol of em.ObjectiveStep",
    # decoding strategies, called by lm.generate as sampler(logits, key)
    "Greedy.__call__": "sampling-strategy protocol of lm.generate",
    "Sample.__call__": "sampling-strategy protocol of lm.generate",
    # vmapped with positional in_axes=(0, None, None, 0, 0) by HopseStep (like a step)
    "Trainer.epoch": "epoch step, vmapped over positional in_axes",
    # chunk executors, called by jaxlab.run_steps as loop.run(step, state, key, start, n)
    **{f"{c}.run": "loop protocol of run_steps" for c in ("AbstractLoop", "ScanLoop", "StepLoop")},
    # converters of the key itself into host-side randomness (like jax.random.key_data):
    # the key is the one input, not the randomness of some other computation
    "jaxlab.numpy_rng": "key converter",
    "jaxlab.sklearn_seed": "key converter",
    # a metadata key (a string), not randomness
    "GGUFFile.get": "dictionary key",
    "GGUFFile.require": "dictionary key",
}


def _components():
    mods = [jaxlab]
    for info in pkgutil.iter_modules(jaxlab.__path__):
        if not info.name.startswith("_"):
            mods.append(importlib.import_module(f"jaxlab.{info.name}"))
    return mods


def _public_callables():
    """(qualified name, callable, owning class or None) of everything public."""
    seen = set()
    for mod in _components():
        names = getattr(mod, "__all__", None) or [n for n in vars(mod) if not n.startswith("_")]
        for name in names:
            obj = getattr(mod, name, None)
            if obj is None or inspect.ismodule(obj) or id(obj) in seen:
                continue
            seen.add(id(obj))
            if inspect.isclass(obj):
                yield f"{mod.__name__}.{name}", obj, None
                for attr, member in vars(obj).items():
                    if attr.startswith("_") and attr != "__call__":
                        continue
                    fn = getattr(member, "__func__", member)
                    if callable(fn) and not inspect.isclass(fn):
                        yield f"{mod.__name__}.{name}.{attr}", fn, obj
            elif callable(obj):
                yield f"{mod.__name__}.{name}", obj, None


def _parameters(fn):
    try:
        return inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # builtins, some C-extension objects
        return ()


def _exempt(qualname: str, owner) -> bool:
    method = ".".join(qualname.split(".")[-2:])
    if method in PROTOCOL_METHODS:
        return True
    last = qualname.rsplit(".", 1)[-1]
    return owner is not None and issubclass(owner, AbstractStep) and last in ("init", "step")


@pytest.fixture(scope="module")
def public():
    return list(_public_callables())


def test_key_is_keyword_only_in_every_public_callable(public):
    assert len(public) > 300  # the walk really covers the components
    bad = [
        f"{q}({p.name}: {p.kind.description})"
        for q, fn, owner in public
        for p in _parameters(fn)
        if p.name == "key" and p.kind is not p.KEYWORD_ONLY and not _exempt(q, owner)
    ]
    assert not bad, "key must be keyword-only:\n" + "\n".join(bad)


def test_no_library_function_takes_an_integer_seed(public):
    bad = [f"{q}({p.name})" for q, fn, _ in public for p in _parameters(fn) if "seed" in p.name]
    assert not bad, "integer seeds belong to experiment configs, not the library: " + str(bad)


def test_the_protocol_exemptions_still_exist(public):
    # each exempted method (or module-level function) is public, with a positional `key`
    methods = {".".join(q.split(".")[-2:]): fn for q, fn, _ in public}
    for name in PROTOCOL_METHODS:
        if "." not in name:
            continue
        assert name in methods, f"{name}: exempted but not public any more"
        kinds = {p.name: p.kind for p in _parameters(methods[name])}
        assert kinds.get("key") is not inspect.Parameter.KEYWORD_ONLY, name


def _annotation_classes(tp, out):
    """Classes named anywhere inside the resolved annotation `tp` (unions, generics)."""
    if inspect.isclass(tp):
        out.add(tp)
    for arg in typing.get_args(tp):
        _annotation_classes(arg, out)
    return out


def test_public_signatures_name_only_public_types(public):
    # a user reading help() must be able to import every type a signature names (the
    # cells.jepa_score(model.encoder, ...) mistake came from a hint naming a private class)
    exported = {id(obj) for _, obj, owner in public if owner is None and inspect.isclass(obj)}
    bad, resolved = [], 0
    for q, fn, _ in public:
        target = fn.__init__ if inspect.isclass(fn) else fn
        try:
            hints = typing.get_type_hints(target)
        except Exception:  # noqa: BLE001 - unresolvable forward references are not our check
            continue
        resolved += 1
        for name, tp in hints.items():
            for cls in _annotation_classes(tp, set()):
                if cls.__module__.startswith("jaxlab") and id(cls) not in exported:
                    bad.append(f"{q}({name}: {cls.__module__}.{cls.__qualname__})")
    assert resolved > 200  # the hints of most public callables resolve
    assert not bad, "public signatures name private types:\n" + "\n".join(sorted(set(bad)))
