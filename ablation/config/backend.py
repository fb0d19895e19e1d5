"""Which Keras backend a process will load, read without importing Keras.

A job on a backend other than TensorFlow (Keras's default) gets its own folder
(:func:`backend_suffix`), so its record never stands in for the TensorFlow run
of the same variant, nor the other way round.
"""
from __future__ import annotations

import json
import os
import sys

DEFAULT_BACKEND = "tensorflow"

# The backends Keras 3 can load; each needs the module of the same name.
KERAS_BACKENDS = ("tensorflow", "jax", "torch", "numpy", "openvino")
# Those that can train (numpy and openvino only run inference).
TRAINING_BACKENDS = ("tensorflow", "jax", "torch")


def keras_backend_setting() -> tuple[str | None, str]:
    """The backend ``import keras`` will load and where that comes from, read as
    Keras reads it: a non-empty ``KERAS_BACKEND``, else ``backend`` in its
    ``keras.json`` (not JSON: as if empty), else TensorFlow. The name is None where
    Keras cannot read its ``keras.json`` (unreadable, not an object): it then fails
    to import."""
    backend = os.environ.get("KERAS_BACKEND") or None  # Keras ignores an empty one
    if backend is not None:
        return backend, "KERAS_BACKEND"
    home = os.environ.get("KERAS_HOME")
    if home is None:
        base = os.path.expanduser("~")
        home = os.path.join(base if os.access(base, os.W_OK) else "/tmp", ".keras")
    path = os.path.expanduser(os.path.join(home, "keras.json"))
    if not os.path.exists(path):
        return DEFAULT_BACKEND, "Keras's default"
    from ablation.files import read_text

    try:
        config = json.loads(read_text(path, 1 << 20))
    except ValueError:
        return DEFAULT_BACKEND, "Keras's default"
    except OSError:
        return None, path
    if not isinstance(config, dict):
        return None, path
    return config.get("backend", DEFAULT_BACKEND), path


def backend_suffix() -> str:
    """``backend=<name>`` for a backend other than :data:`DEFAULT_BACKEND`, else "":
    the part of a job folder's name that says which backend made it (Keras's own
    answer where it is loaded already, else what it will load)."""
    loaded = getattr(getattr(sys.modules.get("keras"), "backend", None), "backend", None)
    name = loaded() if callable(loaded) else keras_backend_setting()[0]
    return f"backend={name}" if name in KERAS_BACKENDS and name != DEFAULT_BACKEND else ""
