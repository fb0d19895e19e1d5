"""``python -m ablation.report`` (ablation/report/__main__.py): a folder without records,
or one that does not exist, is a one-line error with exit status 2."""
import subprocess
import sys

import pytest

from ablation.report import ReportError, load_runs
from tests.helpers.paths import ROOT


def test_empty_or_wrong_path_is_a_one_line_error(tmp_path, caplog):
    with pytest.raises(ReportError, match="no run.json below"):
        load_runs(tmp_path)
    (tmp_path / "vit-s0" / "run.json").mkdir(parents=True)  # a folder at a record's name
    with pytest.raises(ReportError, match="no run.json below"):
        load_runs(tmp_path)
    assert f"{tmp_path / 'vit-s0' / 'run.json'} is a folder, not a record" in caplog.text
    (tmp_path / "vit-s0" / "run.json").rmdir()
    for path in (tmp_path, tmp_path / "nope"):
        result = subprocess.run([sys.executable, "-m", "ablation.report", str(path)],
                                cwd=ROOT, capture_output=True, text=True)
        assert result.returncode == 2
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1


@pytest.mark.slow
@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("when", ["importing", "writing"])
def test_a_stopped_report_is_one_line_and_keeps_the_previous_one(tmp_path, signum, when):
    """Ctrl-C or a preemption signal while the command imports or while it writes:
    one line, exit 128 + signal, the previous report's files as they were, no stage left."""
    import os
    import shutil
    import signal
    import time

    sweep = ROOT / "results" / "examples" / "fashion_mnist"
    out = tmp_path / "out"
    out.mkdir()
    previous = {}
    for name in ("comparison.md", "comparison.csv", "report.json"):
        shutil.copy(sweep / name, out / name)
        previous[name] = (out / name).read_bytes()
    process = subprocess.Popen([sys.executable, "-m", "ablation.report", str(sweep), "--out",
                                str(out), "--wandb-mode", "disabled"],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if when == "importing":
        time.sleep(0.3)
    else:  # once the new generation's stage exists
        deadline = time.monotonic() + 60
        while not any(p.name.startswith(".report-new-") for p in out.iterdir()):
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.005)
    process.send_signal(getattr(signal, signum))
    _, err = process.communicate(timeout=120)
    number = getattr(signal, signum)
    assert process.returncode == 128 + number, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    name = "Ctrl-C" if signum == "SIGINT" else signum
    assert err.startswith(f"error: the report was stopped by {name}: the folder holds")
    assert {n: (out / n).read_bytes() for n in previous} == previous
    assert not [p for p in os.listdir(out) if p.startswith(".report-new-")]
