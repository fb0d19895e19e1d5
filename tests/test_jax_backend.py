"""The ``jax_backend`` tests again, on JAX: one pytest process with ``KERAS_BACKEND=jax``
runs every test so marked (equivalence of the attention routes, masks, dropout,
padding's compiled programs), so that ``python -m pytest`` covers both backends.

A test is marked ``@pytest.mark.jax_backend`` where it checks what a backend computes;
it runs on this session's backend (TensorFlow) with the rest of the suite, and here
on JAX. The inner run sets ``JAX_PASS``, which keeps it from starting another."""
import os
import re
import subprocess
import sys

import pytest

from tests.helpers.commands import JAX_PASS
from tests.helpers.paths import ROOT

TESTS = ROOT / "tests"


def marked_modules() -> list[str]:
    """The test modules holding a ``jax_backend`` test, relative to the repository."""
    return sorted(str(p.relative_to(ROOT)) for p in TESTS.rglob("test_*.py")
                  if p.name != "test_jax_backend.py"
                  and "@pytest.mark.jax_backend" in p.read_text())


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get(JAX_PASS) == "1", reason="already the JAX pass")
def test_the_jax_backend_tests_pass_on_jax(tmp_path):
    pytest.importorskip("jax", reason="the test extra installs jax")
    modules = marked_modules()
    assert len(modules) >= 3, modules   # the attention routes, the layers, padding
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "jax_backend", "-p", "no:cacheprovider",
         "-n", "0", "-q", f"--basetemp={tmp_path / 'jax_pass'}", *modules],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
        env={**{k: v for k, v in os.environ.items()            # not this worker's xdist
                if not k.startswith(("PYTEST_XDIST_", "PYTEST_CURRENT_TEST"))},
             "KERAS_BACKEND": "jax", JAX_PASS: "1"})
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-5000:]
    summary = out.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary), summary
    assert not re.search(r"skipped|xfail|failed|error", summary), summary   # all ran on JAX
