"""What a run was trained on, as a short digest: part of the run's identity.

``dataset.path`` names a place, not the data: a folder can be swapped for
another between a kill and the rerun. The fingerprint is taken from what is
read: an archive or file's SHA-256; a folder's sorted relative file names
with each file's SHA-256 (an image folder's classes and images: a fraction of
what decoding them costs, once per process); for data that
ships with a library or is downloaded by name, the name and the library's
version. Resume, skip and the report compare it (:func:`check_same_data`).
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

_CACHE: dict[tuple, dict] = {}


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _folder_digest(folder: Path) -> tuple[str, int]:
    """SHA-256 over every regular file's relative name and content, in sorted
    order; links are not followed (the loaders do not follow them either)."""
    files = []
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        for name in names:
            path = Path(root) / name
            if not path.is_symlink() and path.is_file():
                files.append((os.fsencode(path.relative_to(folder)), path))
    h = hashlib.sha256()
    for rel, path in sorted(files):
        h.update(rel + b"\0" + _file_digest(path).encode() + b"\n")
    return h.hexdigest(), len(files)


def _source(cfg: Mapping) -> Path | None:
    """The file or folder a dataset config reads, if it reads one."""
    if cfg.get("path"):
        return Path(cfg["path"])
    for folder in cfg.get("search_paths") or []:
        if Path(folder).is_dir():
            return Path(folder)
    return None


def data_fingerprint(cfg: Mapping) -> dict:
    """``{"fingerprint": "sha256:<hex>", "source": "<what was read>"}`` for a dataset config."""
    source = _source(cfg)
    if source is None:
        if cfg["name"] == "synthetic":  # what is drawn, and with which generator
            import numpy as np

            text = (f"numpy {np.__version__} synthetic {cfg['train_size']}+{cfg['test_size']} "
                    f"{cfg['image_size']}x{cfg['image_size']}x{cfg['channels']} "
                    f"{cfg['num_classes']} classes, seed {cfg.get('split_seed', 0)}")
        elif cfg["name"] == "digits":
            import sklearn

            text = f"scikit-learn {sklearn.__version__} load_digits"
        else:
            text = f"keras.datasets {cfg['name']}"
        return {"fingerprint": "sha256:" + hashlib.sha256(text.encode()).hexdigest(),
                "source": text}
    info = source.stat()
    key = (str(source.resolve()), info.st_size, info.st_mtime_ns)
    if key not in _CACHE:
        if source.is_dir():
            digest, files = _folder_digest(source)
            shown = f"{source} ({files} files)"
        else:
            digest, shown = _file_digest(source), str(source)
        _CACHE[key] = {"fingerprint": f"sha256:{digest}", "source": shown}
    return dict(_CACHE[key])


def recorded_fingerprint(earlier: Mapping | None) -> dict | None:
    """The data an earlier record or checkpoint state says it was trained on."""
    data = (earlier or {}).get("data")
    return data if isinstance(data, dict) and data.get("fingerprint") else None


def check_same_data(earlier: Mapping | None, now: Mapping, folder) -> None:
    """Refuse, in one line, to resume or skip a run trained on other data."""
    from ablation.data.formats import DataError

    before = recorded_fingerprint(earlier)
    if before is None or before["fingerprint"] == now["fingerprint"]:
        return
    raise DataError(
        f"{folder} holds a run trained on other data ({before.get('source')}, "
        f"{before['fingerprint'][:19]}) than dataset.path gives now ({now['source']}, "
        f"{now['fingerprint'][:19]}): use another name=..., or resume=false to start over")
