"""Which Keras backend a process will load, and loading it lightly.

Read without importing Keras, so the command line can refuse a backend that
cannot load before anything is written.
"""
from __future__ import annotations

import json
import os
import sys


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


def import_keras():
    """Import Keras and its backend (the first time: seconds); returns ``keras``.

    On the TensorFlow backend, JAX is hidden while TensorFlow loads: its
    ``tf.lite`` imports JAX, when it is installed, for a converter no job
    calls, which costs every job process part of its start and memory
    (docs/performance.md). Hidden only during this import, so ``import jax`` works
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
