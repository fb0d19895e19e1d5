"""Accelerator settings that must be made before the backend touches the device,
and which kind of device the backend computes on."""
from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping

from ablation.files import atomic_write, make_folder, remove_file
from ablation.runtime.keras_loader import import_keras

log = logging.getLogger(__name__)


def configure(gpu: Mapping) -> None:
    """Apply the ``gpu`` config group; call it before Keras builds anything.

    ``share_memory``: allocate GPU memory as needed, so several jobs fit on one GPU
    (JAX reads it from the environment; TensorFlow's is set per device before it
    is initialised). ``compilation_cache`` (JAX only): where XLA keeps compiled
    programs, so a job compiled before loads them instead of compiling again.
    """
    share = bool(gpu["share_memory"])
    if share:
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    keras = import_keras()

    if keras.backend.backend() == "jax" and gpu["compilation_cache"]:
        _use_compilation_cache(os.path.expanduser(str(gpu["compilation_cache"])))
    if share and keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        for device in tf.config.list_physical_devices("GPU"):
            with contextlib.suppress(RuntimeError):  # already initialised by an earlier job
                tf.config.experimental.set_memory_growth(device, True)


def _use_compilation_cache(folder: str) -> None:
    """Point JAX's persistent cache at ``folder``, or say why not: JAX itself
    only warns about its first failed read and then compiles every time."""
    try:
        probe = os.path.join(make_folder(folder), f".write-test-{os.getpid()}")
        atomic_write(probe, b"", fsync=False)
        remove_file(probe)
    except OSError as e:
        log.warning("gpu.compilation_cache=%s cannot be used (%s): compiling every time",
                    folder, e.strerror or e)
        return
    import jax

    jax.config.update("jax_compilation_cache_dir", folder)


def device_platform() -> str:
    """``"gpu"`` or ``"cpu"`` (JAX: its first device's platform, e.g. ``"tpu"``):
    where Keras's backend computes."""
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return str(jax.devices()[0].platform)
    if backend == "tensorflow":
        import tensorflow as tf

        return "gpu" if tf.config.list_logical_devices("GPU") else "cpu"
    if backend == "torch":
        import torch

        return "gpu" if torch.cuda.is_available() else "cpu"
    return "cpu"
