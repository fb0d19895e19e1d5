"""Keep the backends' C++ start-up lines out of a sweep's output.

TensorFlow (through absl and XLA) writes lines such as ``cudart_stub.cc:31]
Could not find cuda drivers`` twice while it is imported, before it reads
``TF_CPP_MIN_LOG_LEVEL``, and ``failed call to cuInit`` when it first looks
for a GPU. They are noise on a machine without one and hide the lines that
matter. :func:`quiet_native_stderr` captures file descriptor 2 around those
moments and writes back every line that is not such a native log line, so a
Python warning or error printed meanwhile is still seen.

``VIT_ABLATION_DEBUG=1`` turns all of this off: every line is shown.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator

DEBUG_ENV = "VIT_ABLATION_DEBUG"

# absl / glog format: "I0000 00:00:1795366846.926426    5836 cudart_stub.cc:31] ..."
NATIVE_LINE = re.compile(
    r"^(?:[IWEF]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ [\w.\-/]+:\d+\]"
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called)")


def debugging() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


def quiet_by_default() -> None:
    """Unless debugging, TensorFlow's C++ logging shows only fatal errors.

    Call before TensorFlow is imported (it reads the variable once)."""
    if not debugging():
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"


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
