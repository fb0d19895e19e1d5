"""A report folder holds one complete generation of the report, never a mix.

A report is written into a fresh hidden folder beside its destination; only
when every file is there does it replace the earlier generation: the files the
earlier one listed in ``report.json`` move to ``.replaced/report-<time>/``,
``report.json`` (the generation's time and files) is written, and the new
files move in. So a file an earlier report wrote and this one does not
(``factorial_effects.csv`` of a sweep that has since lost a variant) never
stays behind to contradict it, and a report killed while writing leaves the
earlier generation as it was (and a hidden staging folder, removed by the
next report).

Only what a report wrote is ever moved or removed: the names its manifest
lists, and only names a report can write (a planted ``report.json`` naming
``multirun.yaml`` or a lock moves nothing). A file the report would replace
that no manifest lists (a figure of the user's in ``--out DIR``) stops the
report with one line, the file untouched. ``.replaced/`` keeps the newest
:data:`KEEP_REPLACED` report generations (``report-<time>/``, the report's W&B
runs included); older ones are removed, and nothing else there is touched.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ablation.files import (REPLACED_DIR, atomic_write, entries, is_folder, is_regular,
                            make_folder, move, read_text, remove_tree, replaced_folder,
                            set_aside)
from ablation.report.load import ReportError

log = logging.getLogger(__name__)

MANIFEST = "report.json"
MANIFEST_LIMIT = 1 << 20
STAGING_PREFIX = ".report-new-"
KEEP_REPLACED = 3
# What a report may write (for a folder whose report predates the manifest).
REPORT_NAMES = ("comparison.md", "comparison.tex", "comparison_full.tex", "comparison.html",
                "comparison.csv",
                "factorial_effects.csv", "locality.csv", "locality_effects.csv",
                "wandb_dashboard.json")
REPORT_GLOBS = ("top1.png", "val_top1.png", "temperature.png", "tuning.png",
                "locality_distance.png",
                "locality_entropy.png", "attention_maps.png", "attention_maps_*.png")
# What a set-aside generation is named (report_replaced_folder): nothing else is pruned.
GENERATION_NAME = re.compile(r"^report-\d{8}-\d{6}-\d{6}$")


def report_name(name: str) -> bool:
    """Whether ``name`` is a file a report writes."""
    return name in REPORT_NAMES or any(Path(name).match(g) for g in REPORT_GLOBS)


def _earlier_files(out: Path) -> list[Path]:
    """The files of the earlier generation in ``out``: those its manifest lists
    that a report writes and that are regular files; none without a manifest."""
    try:
        names = json.loads(read_text(out / MANIFEST, MANIFEST_LIMIT))["files"]
        names = [n for n in names if isinstance(n, str)]
    except (OSError, ValueError, KeyError, TypeError):
        names = []
    return [out / n for n in names
            if n == Path(n).name and report_name(n) and is_regular(out / n)]


def add_to_generation(out: Path, name: str, data: str | bytes) -> Path:
    """Write one more file of the current generation (the W&B dashboard's
    definition, made after the report) and list it in ``report.json``, so the
    next report replaces it with the rest. A file of that name no report
    listed is left alone: :class:`ReportError`."""
    listed = _earlier_files(out)
    if os.path.lexists(out / name) and out / name not in listed:
        raise ReportError(f"{out / name} exists and no report there wrote it: nothing was "
                          f"replaced; move it, or write the report elsewhere (--out DIR)")
    try:
        manifest = json.loads(read_text(out / MANIFEST, MANIFEST_LIMIT))
        if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
            raise ValueError("not a report manifest")
    except (OSError, ValueError) as e:
        raise ReportError(f"{out / MANIFEST} cannot be read ({e}): write the report again "
                          f"first") from None
    atomic_write(out / name, data, fsync=False)
    manifest["files"] = sorted({*manifest["files"], name} - {None})
    atomic_write(out / MANIFEST, json.dumps(manifest, indent=2) + "\n", fsync=False)
    return out / name


def report_replaced_folder(out: Path) -> Path:
    """A new ``out/.replaced/report-<time>/`` (not created) for a generation set aside."""
    moved = replaced_folder(out)
    return moved.with_name("report-" + moved.name)


@dataclass
class Generation:
    """One report generation: ``stage``, the folder its files are written into,
    and ``replaced``, the one ``.replaced/report-<time>/`` where everything it
    replaces (the earlier files, the earlier report W&B run) is set aside."""

    stage: Path
    replaced: Path


@contextlib.contextmanager
def generation(out: Path) -> Iterator[Generation]:
    """A staging folder to write a whole report into; on success it becomes ``out``'s."""
    for stale in entries(out, STAGING_PREFIX + "*"):  # a report killed while writing
        remove_tree(stale)
    stage = make_folder(out / f"{STAGING_PREFIX}{uuid.uuid4().hex[:8]}")
    current = Generation(stage, report_replaced_folder(out))
    try:
        yield current
        files = sorted(p.name for p in entries(stage) if is_regular(p))
        earlier = _earlier_files(out)
        theirs = [n for n in files if os.path.lexists(out / n) and out / n not in earlier]
        if theirs:
            raise ReportError(
                f"{out} holds {', '.join(theirs)}, which no earlier report there wrote: "
                f"nothing was replaced; move them, or write the report elsewhere (--out DIR)")
        earlier += [out / MANIFEST] if is_regular(out / MANIFEST) else []
        target = current.replaced
        set_aside(earlier, target)
        atomic_write(out / MANIFEST, json.dumps({
            "generation": target.name.removeprefix("report-"),
            "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "files": files}, indent=2) + "\n", fsync=False)
        for name in files:
            move(stage / name, out / name)
    finally:
        remove_tree(stage)


def prune_replaced(out: Path, keep: int = KEEP_REPLACED) -> list[Path]:
    """Remove all but the newest ``keep`` report generations (and report W&B runs)
    set aside in ``out/.replaced/``; entries holding anything else are kept."""
    folder = out / REPLACED_DIR
    if not is_folder(folder):  # absent, or a link: nothing of this report's
        return []
    allowed = {*REPORT_NAMES, MANIFEST, "wandb"}

    def report_only(entry: Path) -> bool:
        return bool(GENERATION_NAME.match(entry.name)) and is_folder(entry) and all(
            report_name(p.name) or p.name in allowed for p in entries(entry))

    generations = sorted((e for e in entries(folder) if report_only(e)),
                         key=lambda e: e.name.removeprefix("report-"))
    removed = generations[:-keep] if keep else generations
    for entry in removed:
        remove_tree(entry)
    return removed
