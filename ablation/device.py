"""Accelerator settings that must be made before the backend touches the device."""
from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping

log = logging.getLogger(__name__)


def configure(gpu: Mapping) -> None:
    """Apply the ``gpu`` config group; call it before Keras builds anything.

    ``share_memory``: allocate GPU memory as needed, so several jobs fit on one
    GPU. JAX reads its switch from the environment when it first uses the
    device; TensorFlow's must be set per device before it is initialised (a
    later job in the same process finds it already set).

    ``compilation_cache`` (JAX): a folder where XLA keeps its compiled
    programs, so a job whose program was compiled before (another seed of the
    same variant, a rerun, a resumed job) loads it instead of compiling again;
    on a GPU compiling the train and evaluation steps costs more than the
    epochs of a short job. Other backends ignore it.
    """
    share = bool(gpu.get("share_memory", False))
    if share:
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    keras = import_keras()

    if keras.backend.backend() == "jax" and gpu.get("compilation_cache"):
        _use_compilation_cache(os.path.expanduser(str(gpu["compilation_cache"])))
    if share and keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        for device in tf.config.list_physical_devices("GPU"):
            try:
                tf.config.experimental.set_memory_growth(device, True)
            except RuntimeError:  # already initialised by an earlier job: nothing to do
                pass


def import_keras():
    """Import Keras and its backend (the first time: seconds); returns ``keras``.

    On the TensorFlow backend, JAX is hidden while TensorFlow loads: its
    ``tf.lite`` imports JAX, when it is installed, for a converter no job
    calls, which cost every job process ~0.5 s of its start and ~100 MB (see
    BENCHMARKS.md). Hidden only during this import, so ``import jax`` works
    afterwards; never when Keras, or JAX, is loaded already or Keras is set
    to load another backend. What it costs: in that process TFLite's
    ``experimental_from_jax`` converter is unavailable.
    """
    if ("keras" in sys.modules or "jax" in sys.modules
            or keras_backend_setting()[0] != "tensorflow"):
        import keras

        return keras
    sys.modules["jax"] = None  # `from jax import ...` raises ImportError, as if absent
    try:
        import keras
    finally:
        if "jax" in sys.modules and sys.modules["jax"] is None:
            del sys.modules["jax"]
    return keras


# The backends Keras 3 can load; each needs the module of the same name.
KERAS_BACKENDS = ("tensorflow", "jax", "torch", "numpy", "openvino")


def keras_backend_setting() -> tuple[str | None, str]:
    """The backend ``import keras`` will load and where that comes from, read
    as Keras reads it without importing it: a non-empty ``KERAS_BACKEND``,
    else ``backend`` in its ``keras.json``, else TensorFlow (a ``keras.json``
    that is not JSON counts as empty, as in Keras). The name is None when
    Keras cannot read its ``keras.json`` (an unreadable file, JSON that is
    not an object): it then fails to import."""
    backend = os.environ.get("KERAS_BACKEND") or None  # Keras ignores an empty one
    if backend is not None:
        return backend, "KERAS_BACKEND"
    home = os.environ.get("KERAS_HOME")
    if home is None:
        base = os.path.expanduser("~")
        home = os.path.join(base if os.access(base, os.W_OK) else "/tmp", ".keras")
    path = os.path.expanduser(os.path.join(home, "keras.json"))
    if not os.path.exists(path):
        return "tensorflow", "Keras's default"
    try:
        with open(path) as f:
            config = json.load(f)
    except ValueError:
        return "tensorflow", "Keras's default"
    except OSError:
        return None, path
    if not isinstance(config, dict):
        return None, path
    return config.get("backend", "tensorflow"), path


def _use_compilation_cache(folder: str) -> None:
    """Point JAX's persistent cache at ``folder``, or say why not: JAX itself
    only warns about its first failed read and then compiles every time."""
    try:
        os.makedirs(folder, exist_ok=True)
        probe = os.path.join(folder, f".write-test-{os.getpid()}")
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as e:
        log.warning("gpu.compilation_cache=%s cannot be used (%s): compiling every time",
                    folder, e.strerror or e)
        return
    import jax

    jax.config.update("jax_compilation_cache_dir", folder)


_frozen = False


def freeze_imported_objects() -> None:
    """Leave the objects made by the imports out of every later garbage collection.

    TensorFlow and Keras leave about half a million Python objects behind
    their import. Every full collection walks them all (~0.25 s here): one
    runs around each job, at interpreter exit (~1.3 s for a process that
    trained) and whenever tracing allocates enough, yet almost none of them
    ever becomes garbage (the few that do stay, a bounded one-off). Called
    once per process, after the imports and before the first job, so that
    what jobs create is still collected as usual.
    """
    global _frozen
    if not _frozen:  # no collection first: the imports leave next to no garbage
        import gc

        gc.freeze()
        _frozen = True


def _gradient_registry() -> dict | None:
    """TensorFlow's process-wide gradient registry, or None (not in use, or moved)."""
    import sys

    framework_ops = sys.modules.get("tensorflow.python.framework.ops")
    registry = getattr(getattr(framework_ops, "_gradient_registry", None), "_registry", None)
    return registry if isinstance(registry, dict) else None


def custom_gradient_names() -> set:
    """The custom-gradient entries registered so far (call it when a job starts)."""
    registry = _gradient_registry()
    return {name for name in (registry or ()) if str(name).startswith("CustomGradient-")}


def release_finished_graphs(existing: set) -> int:
    """Let the garbage collector free the graphs of a job that has ended.

    TensorFlow registers a gradient function in a process-wide registry for
    every ``custom_gradient`` it traces (``tf.distribute``'s ``all_reduce``
    in the optimizer step uses one), under a unique name that is never
    removed; each entry's closure keeps the whole traced train step alive,
    so a process running several jobs (the basic launcher) grew by about 75
    MB per job. Only entries registered since ``existing`` (taken with
    :func:`custom_gradient_names` when the job started) are removed, once the
    job's model and functions are gone. Returns how many (0 on other backends).
    """
    registry = _gradient_registry()
    if registry is None:
        return 0
    stale = custom_gradient_names() - set(existing)
    for name in stale:
        registry.pop(name, None)
    return len(stale)
