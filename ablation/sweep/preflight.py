"""What the sweep command does with the command line before Hydra sees it.

Four things cannot wait for Hydra:

- A secret passed as an override (``+wandb.api_key='A B'``) would be echoed
  by Hydra's job line, saved in ``.hydra/`` and ``multirun.yaml``, put in a
  folder name and read by wandb from ``sys.argv``. The suite never uses such a
  value (keys belong in the environment), so the whole value is replaced in
  ``sys.argv`` (:func:`ablation.config.secrets.redact_argv`) before Hydra
  parses it: it then exists nowhere but in this process's original argument
  list, whatever it contained (spaces, commas, quotes, ``=``) and however it
  was quoted.
- An unknown config group option (``dataset=nonexistent``) makes Hydra print
  a block of lines and exit 1; here it is one line naming the key, the value
  and the valid options, and exit 2, before anything is written.
- An override Hydra cannot parse (``name=é`` unquoted, ``name=~``), a key
  that does not exist (``trainer.epoch=3``) or an interpolation that cannot
  resolve (``name='${oc.env:NOPE}'``, ``name='${name}'``) would be a block of
  lines or a traceback, exit 1: :func:`ablation.config.compose.check_composes`
  composes the config once, as Hydra will, and turns each into one line, exit
  2. Sweep values are checked per job in
  :class:`ablation.sweep.callbacks.SweepStart`.
- A Keras backend that cannot load (:func:`check_backend`).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ablation.config.compose import check_composes, check_group_options
from ablation.config.refusals import ConfigError

__all__ = ["check_backend", "check_command_line"]


def check_command_line(args: list[str], conf_dir: str | Path) -> None:
    """Every check of the (already redacted) command line, in order; raises
    :class:`ConfigError` with one line. ``args`` is argv without the program."""
    check_group_options(args, conf_dir)
    check_composes(args, conf_dir)
    check_backend()


def check_backend() -> None:
    """Refuse, in one line, a Keras backend that cannot load, before anything is
    written: Keras itself fails at the first job, in a traceback, after Hydra
    has made the job's folder (``KERAS_BACKEND=tensorflw``, a backend not
    installed, a ``keras.json`` that is not a JSON object)."""
    from ablation.runtime.backend import KERAS_BACKENDS, keras_backend_setting

    if "keras" in sys.modules:  # loaded already: whatever it picked works
        return
    name, source = keras_backend_setting()
    if name is None:
        raise ConfigError(f"Keras cannot read its settings file {source} (it must hold a "
                          f"JSON object, e.g. {{\"backend\": \"tensorflow\"}}): fix or remove it")
    where = {"KERAS_BACKEND": f"KERAS_BACKEND={name}",
             "Keras's default": f"Keras's default backend, {name},"}.get(
                 source, f"backend {name!r} in {source}")
    if not isinstance(name, str) or name not in KERAS_BACKENDS:
        raise ConfigError(f"{where} is not a Keras backend: use one of "
                          f"{', '.join(KERAS_BACKENDS)}")
    if importlib.util.find_spec(name) is None:
        hint = ' (pip install -e ".[jax]")' if name == "jax" else ""
        raise ConfigError(f"{where}, but {name} is not installed{hint}")


