"""Process hygiene for a process that runs many jobs (the basic launcher):
leave the imports' objects out of garbage collection, and let TensorFlow free
the graphs of a job that has ended."""
from __future__ import annotations

import sys

_frozen = False


def freeze_imported_objects() -> None:
    """Leave the objects made by the imports out of every later garbage collection.

    TensorFlow and Keras leave hundreds of thousands of objects behind their
    import, which every full collection walks, yet almost none ever becomes
    garbage. Called once per process, after the imports and before the first job,
    so that what jobs create is still collected.
    """
    global _frozen
    if not _frozen:  # no collection first: the imports leave next to no garbage
        import gc

        gc.freeze()
        _frozen = True


def _gradient_registry() -> dict | None:
    """TensorFlow's process-wide gradient registry, or None (not in use, or moved)."""
    framework_ops = sys.modules.get("tensorflow.python.framework.ops")
    registry = getattr(getattr(framework_ops, "_gradient_registry", None), "_registry", None)
    return registry if isinstance(registry, dict) else None


def custom_gradient_names() -> set:
    """The custom-gradient entries registered so far (call it when a job starts)."""
    registry = _gradient_registry()
    return {name for name in (registry or ()) if str(name).startswith("CustomGradient-")}


def release_finished_graphs(existing: set) -> int:
    """Let the garbage collector free the graphs of a job that has ended.

    TensorFlow registers a gradient function in a process-wide registry for every
    ``custom_gradient`` it traces (the optimizer step's ``all_reduce``), never
    removed, whose closure keeps the whole traced train step alive. Only entries
    registered since ``existing`` (:func:`custom_gradient_names` when the job
    started) are removed. Returns how many (0 on other backends).
    """
    registry = _gradient_registry()
    if registry is None:
        return 0
    stale = custom_gradient_names() - set(existing)
    for name in stale:
        registry.pop(name, None)
    return len(stale)
