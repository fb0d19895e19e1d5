"""Loading Keras and its backend lightly (which backend: :mod:`ablation.config.backend`)."""
from __future__ import annotations

import sys

from ablation.config.backend import keras_backend_setting


def import_keras():
    """Import Keras and its backend (the first time: seconds); returns ``keras``.

    On the TensorFlow backend, JAX is hidden while TensorFlow loads: its ``tf.lite``
    imports JAX for a converter no job calls, which costs every job process start
    time and memory (docs/performance.md). ``import jax`` works afterwards.
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
