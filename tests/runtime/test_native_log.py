"""The backends' native start-up lines stay out of a sweep's output, on every backend.

TensorFlow writes absl lines (``absl::InitializeLog``, oneDNN, ``cudart_stub``) to
file descriptor 2 while it is imported, whatever ``TF_CPP_MIN_LOG_LEVEL`` says, and
Keras imports it on JAX and PyTorch too, in the middle of a job; JAX logs its TPU
probe at INFO, which Hydra's logging prints. ``VIT_ABLATION_DEBUG=1`` shows them all.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from ablation.runtime.native_log import quiet_native_stderr
from tests.helpers.commands import run_cli
from tests.helpers.paths import ROOT

NATIVE = ("absl::InitializeLog", "oneDNN custom operations", "cudart_stub", "cuInit",
          "cpu_feature_guard", "Unable to initialize backend", "libtpu")

# A stand-in for TensorFlow: its import writes native lines to fd 2, as TensorFlow's does,
# and one line of its own that must still be seen.
FAKE_TENSORFLOW = textwrap.dedent("""\
    import os
    os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are "
                b"written to STDERR\\n"
                b"I0000 00:00:1795836117.629419    6639 port.cc:153] oneDNN custom operations "
                b"are on.\\n"
                b"I0000 00:00:1795836117.630393    6639 cudart_stub.cc:31] Could not find cuda "
                b"drivers on your machine, GPU will not be used.\\n"
                b"a line of its own\\n")
    """)

SCRIPT = textwrap.dedent("""\
    import importlib, logging, sys
    from ablation.runtime.native_log import quiet_by_default
    quiet_by_default()
    quiet_by_default()  # twice: one hook
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    def later():  # imported lazily, as Keras does on JAX at its first set_random_seed
        return importlib.import_module("tensorflow")
    module = later()
    print(type(module.__loader__).__name__, type(module.__spec__.loader).__name__)
    platform = logging.getLogger("jax._src.xla_bridge")
    platform.info("Unable to initialize backend 'tpu': INTERNAL: Failed to open libtpu.so")
    platform.warning("a platform warning")
    """)


def _run(tmp_path, debug: bool) -> subprocess.CompletedProcess:
    (tmp_path / "tensorflow").mkdir(exist_ok=True)
    (tmp_path / "tensorflow" / "__init__.py").write_text(FAKE_TENSORFLOW)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIT_ABLATION_")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    if debug:
        env["VIT_ABLATION_DEBUG"] = "1"
    return subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_lazy_import_and_the_platform_search_print_no_native_line(tmp_path):
    quiet = _run(tmp_path, debug=False)
    assert quiet.returncode == 0, quiet.stderr
    for line in NATIVE:
        assert line not in quiet.stdout + quiet.stderr, (line, quiet.stderr)
    # what is not a native line still reaches the terminal, once
    assert quiet.stderr.count("a line of its own\n") == 1, quiet.stderr
    assert "jax._src.xla_bridge: a platform warning" in quiet.stderr
    # the module keeps its own loader once loaded
    assert quiet.stdout.split() == ["SourceFileLoader", "SourceFileLoader"]

    shown = _run(tmp_path, debug=True)
    assert shown.returncode == 0, shown.stderr
    for line in ("absl::InitializeLog", "cudart_stub", "Unable to initialize backend 'tpu'"):
        assert line in shown.stderr, (line, shown.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("backend, estimate", [("jax", "true"), ("jax", "false"),
                                               ("tensorflow", "true")])
def test_a_sweep_prints_no_native_start_up_line(tmp_path, backend, estimate):
    """One job of the smoke preset from a fresh interpreter, as a user starts it: the
    backend first loaded by the estimate's probe in the sweep's process, or by the job."""
    pytest.importorskip(backend)
    result = run_cli("-m", "spt=true", "experiment=smoke", "trainer.epochs=1",
                     "dataset.limit_train=256", "dataset.limit_test=64", "wandb.mode=disabled",
                     f"results_dir={tmp_path}", "report.after_sweep=false",
                     f"estimate={estimate}", env={"KERAS_BACKEND": backend})
    terminal = result.stdout + result.stderr
    assert result.returncode == 0, terminal[-3000:]
    assert "test top-1" in terminal
    for line in NATIVE:
        assert line not in terminal, (line, terminal[-3000:])


def test_native_log_lines_are_dropped_and_others_kept(capfd, monkeypatch):
    monkeypatch.delenv("VIT_ABLATION_DEBUG", raising=False)
    native = (b"WARNING: All log messages before absl::InitializeLog() is called are written to "
              b"STDERR\nI0000 00:00:1795366846.926888    5836 cudart_stub.cc:31] Could not find "
              b"cuda drivers on your machine, GPU will not be used.\nE0000 00:00:1795366853.973241"
              b"    5836 cuda_platform.cc:52] failed call to cuInit: INTERNAL\n")
    with quiet_native_stderr():
        os.write(2, native + b"a Python warning\n")
    assert capfd.readouterr().err == "a Python warning\n"
    monkeypatch.setenv("VIT_ABLATION_DEBUG", "1")
    with quiet_native_stderr():
        os.write(2, native)
    assert "cudart_stub" in capfd.readouterr().err
