"""What a run was trained on, as a short digest: part of the run's identity.

``dataset.path`` names a place, not the data: a folder can be swapped between
a kill and the rerun. The fingerprint hashes exactly the files the loader
reads, by its own walk (:func:`ablation.data.datasets.source_files`): a
file's SHA-256, or a folder's sorted relative names with each file's SHA-256;
for data that ships with a library or is downloaded by name, the name and
the library's version. Resume, skip and the report compare it
(:func:`check_same_data`). A digest is reused within a process while every
file it covers keeps its size and modification time.
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ablation.data import raw_files
from ablation.data.datasets import source_files
from ablation.data.formats import DataError, one_line
from ablation.files import shown

_CACHE: dict[tuple, dict] = {}


def _folder_digest(source: Path, paths: list[Path]) -> str:
    """SHA-256 over each file's name relative to ``source`` and content, in sorted order."""
    h = hashlib.sha256()
    for rel, path in sorted((os.fsencode(p.relative_to(source)), p) for p in paths):
        h.update(rel + b"\0" + raw_files.file_digest(path).encode() + b"\n")
    return h.hexdigest()


def _library_fingerprint(cfg: Mapping) -> dict:
    if cfg["name"] == "synthetic":  # what is drawn, and with which generator
        text = (f"numpy {np.__version__} synthetic {cfg['train_size']}+{cfg['test_size']} "
                f"{cfg['image_size']}x{cfg['image_size']}x{cfg['channels']} "
                f"{cfg['num_classes']} classes, seed {cfg['split_seed']}")
    elif cfg["name"] == "digits":
        import sklearn

        text = f"scikit-learn {sklearn.__version__} load_digits"
    else:
        text = f"keras.datasets {cfg['name']}"
    return {"fingerprint": "sha256:" + hashlib.sha256(text.encode()).hexdigest(),
            "source": text}


def data_fingerprint(cfg: Mapping) -> dict:
    """``{"fingerprint": "sha256:<hex>", "source": "<what was read>"}`` for a dataset config.

    A file that cannot be read (not a regular file, over the cap, gone) is a
    :class:`~ablation.data.formats.DataError` in one line, never a wait."""
    read = source_files(cfg)
    if read is None:
        return _library_fingerprint(cfg)
    source, paths = read
    folder = raw_files.kind(source) == "folder"
    try:
        key = (folder, str(source.resolve()), *sorted(
            (os.fsencode(p), s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns)
            for p in paths for s in [os.stat(p)]))
        if key not in _CACHE:
            if folder:
                digest = _folder_digest(source, paths)
                text = f"{shown(source)} ({len(paths)} files)"
            else:
                digest, text = raw_files.file_digest(source), shown(source)
            _CACHE[key] = {"fingerprint": f"sha256:{digest}", "source": text}
    except OSError as e:
        raise DataError(f"dataset.path={shown(source)} cannot be read ({one_line(e)}); point "
                        f"dataset.path at the data") from None
    return dict(_CACHE[key])


def recorded_fingerprint(earlier: Mapping | None) -> dict | None:
    """The data an earlier record or checkpoint state says it was trained on."""
    data = (earlier or {}).get("data")
    return data if isinstance(data, dict) and data.get("fingerprint") else None


def check_same_data(earlier: Mapping | None, now: Mapping, folder) -> None:
    """Refuse, in one line, to resume or skip a run trained on other data."""
    before = recorded_fingerprint(earlier)
    if before is None or before["fingerprint"] == now["fingerprint"]:
        return
    raise DataError(
        f"{folder} holds a run trained on other data ({before.get('source')}, "
        f"{before['fingerprint'][:19]}) than dataset.path gives now ({now['source']}, "
        f"{now['fingerprint'][:19]}): use another name=..., or resume=false to start over")
