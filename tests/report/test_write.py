"""Writing a report (ablation/report/write.py): every output gets the umask's mode, and
reports of one folder wait for each other."""
import pytest

from ablation.report import write_report
from tests.helpers.files import file_modes
from tests.helpers.records import record


def test_every_output_gets_the_umask_mode(tmp_path, umask_027):
    # a full factorial with locality diagnostics: every kind of output the reporter writes
    diag = {"probe_images": 4, "layers": [], "summary": {"mean_distance_px": 5.0,
                                                         "normalized_entropy": 0.5}}
    for spt, lsa in ((False, False), (True, False), (False, True), (True, True)):
        record(tmp_path, spt, lsa, lsa, 0, 0.5 + 0.01 * spt, extra={"diagnostics": diag})
    out = tmp_path / "out"
    write_report(tmp_path, out_dir=out, make_plots=False)
    modes = file_modes(out)
    assert {"comparison.md", "comparison.csv", "comparison.tex", "comparison.html",
            "factorial_effects.csv", "locality.csv", "locality_effects.csv"} <= set(modes)
    assert set(modes.values()) == {umask_027}, modes
    assert set(file_modes(tmp_path / "111-s0-cifar10-paper").values()) == {umask_027}


def test_reports_of_one_folder_wait_for_each_other(tmp_path):
    import threading
    import time

    from ablation.runs.lock import REPORT_LOCK_FILE, job_lock
    from ablation.report import ReportError

    for spt, lsa in ((False, False), (True, True)):
        record(tmp_path, spt, lsa, lsa, 0, 0.5)
    held, release = threading.Event(), threading.Event()

    def other_report():  # another report of this folder, in the middle of writing
        with job_lock(tmp_path, name=REPORT_LOCK_FILE):
            held.set()
            release.wait(10)
            time.sleep(0.3)  # still writing: the waiting report must not start yet
            seen_at_release.append((tmp_path / "comparison.md").exists())

    seen_at_release = []
    other = threading.Thread(target=other_report)
    other.start()
    held.wait(10)
    with pytest.raises(ReportError, match="being reported by another process"):
        write_report(tmp_path, make_plots=False, lock_wait_s=0.2)
    assert not (tmp_path / "comparison.md").exists()
    release.set()
    write_report(tmp_path, make_plots=False, lock_wait_s=10)   # waits, then reports
    other.join()
    assert seen_at_release == [False] and (tmp_path / "comparison.md").exists()
