"""A report folder holds one complete generation of the report, never a mix.

A report is written into a fresh hidden folder beside its destination; only
when every file is there does it replace the earlier generation: the files the
earlier one listed in ``report.json`` (or, for a folder without one, every
file a report writes) move to ``.replaced/report-<time>/``, the new files move
in, and ``report.json`` (the generation's time and files) is written last. So a
file an earlier report wrote and this one does not (``factorial_effects.csv``
of a sweep that has since lost a variant) never stays behind to contradict it,
and a report killed while writing leaves the earlier generation as it was (and
a hidden staging folder, removed by the next report). ``.replaced/`` keeps the
newest :data:`KEEP_REPLACED` report entries; older ones are removed.
"""
from __future__ import annotations

import contextlib
import json
import logging
import shutil
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from ablation.runs.files import REPLACED_DIR, atomic_write, replaced_folder, set_aside

log = logging.getLogger(__name__)

MANIFEST = "report.json"
STAGING_PREFIX = ".report-new-"
KEEP_REPLACED = 3
# What a report may write (for a folder whose report predates the manifest).
REPORT_NAMES = ("comparison.md", "comparison.tex", "comparison.html", "comparison.csv",
                "factorial_effects.csv", "locality.csv", "locality_effects.csv")
REPORT_GLOBS = ("*.png",)


def _earlier_files(out: Path) -> list[Path]:
    try:
        names = json.loads((out / MANIFEST).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        names = [*REPORT_NAMES, *(p.name for g in REPORT_GLOBS for p in out.glob(g))]
    return [out / Path(str(n)).name for n in names if (out / Path(str(n)).name).is_file()]


@contextlib.contextmanager
def generation(out: Path) -> Iterator[Path]:
    """A staging folder to write a whole report into; on success it becomes ``out``'s."""
    for stale in out.glob(STAGING_PREFIX + "*"):  # a report killed while writing
        shutil.rmtree(stale, ignore_errors=True)
    stage = out / f"{STAGING_PREFIX}{uuid.uuid4().hex[:8]}"
    stage.mkdir()
    try:
        yield stage
        files = sorted(p.name for p in stage.iterdir() if p.is_file())
        earlier = [*_earlier_files(out), *([out / MANIFEST] if (out / MANIFEST).exists() else [])]
        moved = replaced_folder(out)
        target = moved.with_name("report-" + moved.name)
        set_aside(earlier, target)
        for name in files:
            (stage / name).rename(out / name)
        atomic_write(out / MANIFEST, json.dumps({
            "generation": target.name.removeprefix("report-"),
            "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "files": files}, indent=2) + "\n", fsync=False)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def prune_replaced(out: Path, keep: int = KEEP_REPLACED) -> list[Path]:
    """Remove all but the newest ``keep`` report generations (and report W&B runs)
    set aside in ``out/.replaced/``; entries holding anything else are kept."""
    folder = out / REPLACED_DIR
    if not folder.is_dir():
        return []
    allowed = {*REPORT_NAMES, MANIFEST, "wandb"}

    def report_only(entry: Path) -> bool:
        return entry.is_dir() and not entry.is_symlink() and all(
            p.name in allowed or p.suffix == ".png" for p in entry.iterdir())

    entries = sorted((e for e in folder.iterdir() if report_only(e)),
                     key=lambda e: e.name.removeprefix("report-"))
    removed = entries[:-keep] if keep else entries
    for entry in removed:
        shutil.rmtree(entry, ignore_errors=True)
    return removed
