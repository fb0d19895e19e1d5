"""Accelerator settings that must be made before the backend touches the device."""
from __future__ import annotations

import logging
import os
from collections.abc import Mapping

log = logging.getLogger(__name__)


def configure(gpu: Mapping) -> None:
    """Apply the ``gpu`` config group; call it before Keras builds anything.

    ``share_memory``: allocate GPU memory as needed, so several jobs fit on one
    GPU. JAX reads its switch from the environment when it first uses the
    device; TensorFlow's must be set per device before it is initialised (a
    later job in the same process finds it already set).
    """
    if not gpu.get("share_memory", False):
        return
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import keras

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        for device in tf.config.list_physical_devices("GPU"):
            try:
                tf.config.experimental.set_memory_growth(device, True)
            except RuntimeError:  # already initialised by an earlier job: nothing to do
                pass
