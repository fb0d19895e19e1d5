"""``python -m ablation.report`` (ablation/report/__main__.py): a folder without records,
or one that does not exist, is a one-line error with exit status 2."""
import subprocess
import sys

import pytest

from ablation.report import ReportError, load_runs
from tests.helpers.paths import ROOT


def test_empty_or_wrong_path_is_a_one_line_error(tmp_path):
    with pytest.raises(ReportError, match="no run.json below"):
        load_runs(tmp_path)
    for path in (tmp_path, tmp_path / "nope"):
        result = subprocess.run([sys.executable, "-m", "ablation.report", str(path)],
                                cwd=ROOT, capture_output=True, text=True)
        assert result.returncode == 2
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
