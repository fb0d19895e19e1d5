"""Keep the backends' native start-up lines out of a sweep's output.

TensorFlow (through absl and XLA) writes lines such as ``cudart_stub.cc:31] Could
not find cuda drivers`` to fd 2 while it is imported, whatever
``TF_CPP_MIN_LOG_LEVEL`` says (absl writes them before TensorFlow reads it), and
Keras imports TensorFlow on every backend, even in the middle of a job.
:func:`quiet_native_stderr` captures fd 2 around such a moment and writes back
every line that is not a native log line, so a Python warning is still seen;
:func:`quiet_by_default` puts it around TensorFlow's import wherever it happens and
keeps JAX's INFO lines about its platform search out of the log.
``VIT_ABLATION_DEBUG=1`` turns all of this off.
"""
from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import logging
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator

DEBUG_ENV = "VIT_ABLATION_DEBUG"

# absl / glog format: "I0000 00:00:1795366846.926426    5836 cudart_stub.cc:31] ..."
NATIVE_LINE = re.compile(
    r"^(?:[IWEF]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ [\w.\-/]+:\d+\]"
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called)")


def debugging() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


# modules whose import writes native start-up lines to fd 2
QUIET_IMPORTS = ("tensorflow",)
# loggers whose INFO lines are a backend's platform search, not the run's news
PLATFORM_LOGGERS = ("jax._src.xla_bridge",)


def quiet_by_default() -> None:
    """Unless debugging, quiet TensorFlow's C++ logging, its import and JAX's platform
    search. Call before anything imports TensorFlow or JAX (TensorFlow reads the
    variable once); calling it again changes nothing."""
    if debugging():
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    if not any(isinstance(finder, _QuietImports) for finder in sys.meta_path):
        sys.meta_path.insert(0, _QuietImports(QUIET_IMPORTS))
    for name in PLATFORM_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level < logging.WARNING:  # a level set on purpose stays
            logger.setLevel(logging.WARNING)


class _QuietImports(importlib.abc.MetaPathFinder):
    """Finds nothing itself: hands the import of one of ``names`` (top-level
    packages) to the finders after it, its loader wrapped in
    :func:`quiet_native_stderr`. Everything the package imports while it loads
    (its submodules, its shared libraries) is inside that capture."""

    def __init__(self, names) -> None:
        self.names = frozenset(names)
        self._finding = threading.local()

    def find_spec(self, name, path=None, target=None):
        if name not in self.names or getattr(self._finding, "on", False) or debugging():
            return None
        self._finding.on = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._finding.on = False
        if spec is None or spec.loader is None:
            return None
        spec.loader = _QuietLoader(spec.loader)
        return spec


class _QuietLoader(importlib.abc.Loader):
    """``loader`` with its module executed inside :func:`quiet_native_stderr`; the
    module keeps ``loader`` as its own once loaded."""

    def __init__(self, loader) -> None:
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        try:
            with quiet_native_stderr():
                self.loader.exec_module(module)
        finally:
            module.__loader__ = self.loader
            if module.__spec__ is not None:
                module.__spec__.loader = self.loader

    def __getattr__(self, name):
        return getattr(self.loader, name)


@contextlib.contextmanager
def quiet_native_stderr() -> Iterator[None]:
    """Drop native log lines written to fd 2 inside the block; keep all others."""
    if debugging():
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            kept = [line for line in capture.read().decode(errors="replace").splitlines(True)
                    if not NATIVE_LINE.match(line)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()
