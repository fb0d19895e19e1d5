"""Names that become folders: safe components, and job-folder suffixes.

``name``, ``sweep_id`` and ``run_name`` each become one path component, and the
command-line overrides that are settings are appended to a job folder's name, so
two settings never share a folder. Anything that could escape or hide it is refused.
"""
from __future__ import annotations

import os
import unicodedata
from collections.abc import Mapping

from ablation.config.backend import backend_suffix
from ablation.config.refusals import ConfigError
from ablation.config.settings import names_job_folder

FOLDER_KEYS = ("name", "sweep_id", "run_name")  # each names one folder
MAX_NAME_LENGTH = 120          # name, sweep_id, run_name
MAX_FOLDER_NAME_LENGTH = 200   # a job folder: run_name plus the overrides that name it
NAME_MAX, PATH_MAX = 255, 4000  # bytes: Linux's name limit; a path's, with room for the jobs'


def split_overrides(text: str) -> list[str]:
    """Hydra's ``override_dirname`` split at its commas, not at those inside
    quotes or brackets (``a='x,y',b=[1,2]`` is two overrides)."""
    items, current, quote, depth, escaped = [], [], None, 0, False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            items.append("".join(current))
            current = []
            continue
        current.append(ch)
    items.append("".join(current))
    return [item for item in items if item]


def override_key(text: str) -> str:
    """The key an override sets: ``+wandb.tags@pkg=[x]`` -> ``wandb.tags``."""
    return text.split("=", 1)[0].lstrip("+~").split("@", 1)[0]


def folder_suffix(overrides: str) -> str:
    """``_trainer.learning_rate=0.003`` from Hydra's override_dirname (only the
    overrides of settings), "" if empty; on a backend other than TensorFlow,
    ``backend=<name>`` last: another backend is another job."""
    kept = [item for item in split_overrides(str(overrides or ""))
            if names_job_folder(override_key(item))]
    backend = backend_suffix()
    kept += [backend] if backend else []
    return "_" + ",".join(kept) if kept else ""


def _unseen(text: str) -> bool:
    """Whether ``text`` holds a character that shows as nothing or reorders what
    follows (controls, bidirectional marks, zero-width spaces: Unicode Cc, Cf)."""
    return any(unicodedata.category(c) in ("Cc", "Cf") for c in text)


def check_results_dir_name(value) -> None:
    """Refuse a ``results_dir`` written with ``~`` (a config value is not expanded:
    it would make a folder named ``~``) or with characters that hide its name."""
    text = str(value)
    if text.startswith("~"):
        raise ConfigError(f"results_dir={text}: '~' is not expanded in a config value (it "
                          f"would make a folder named '~'); write the path out, e.g. "
                          f"results_dir=$HOME/{text[1:].lstrip('/')} for the shell to expand")
    if _unseen(text):
        raise ConfigError(f"results_dir={text!r} contains a control, bidirectional or "
                          f"zero-width character: the folder would show as another name")
    longest = max((len(os.fsencode(part)) for part in text.split("/")), default=0)
    if longest > NAME_MAX or len(os.fsencode(text)) > PATH_MAX:
        raise ConfigError(f"results_dir={text[:60]}... is too long for a folder name "
                          f"(at most {NAME_MAX} bytes a name, {PATH_MAX} in all)")


def check_folder_name(key: str | None, value, limit: int = MAX_NAME_LENGTH) -> None:
    """Refuse a value that is to become one path component but could escape its
    folder or name a hidden or unusable one. ``key`` None: the job folder's name."""
    text = str(value)
    problem = None
    if not text:
        problem = "it is empty"
    elif "/" in text or "\\" in text:
        problem = "it contains a path separator"
    elif text.startswith("."):
        problem = "it starts with a dot"
    elif _unseen(text):
        problem = "it contains a control, bidirectional or zero-width character"
    elif len(text) > limit:
        problem = f"it is {len(text)} characters long (at most {limit})"
    if problem and key is None:
        raise ConfigError(
            f"the job folder name {text!r} (run_name and the command-line overrides that "
            f"name it) cannot name a folder ({problem}): give that value without '/' or "
            f"leading '.', or set it in a config file instead of on the command line")
    if problem:
        raise ConfigError(
            f"{key}={text!r} cannot name a folder ({problem}): use a plain name such as "
            f"name=my-sweep, no '/', no leading '.', at most {limit} characters")


def check_folder_names(config: Mapping, job_folder: str) -> None:
    """``name``, ``sweep_id``, ``run_name`` and the job folder's name, before
    anything is written under them."""
    check_results_dir_name(config["results_dir"])
    for key in FOLDER_KEYS:
        check_folder_name(key, config[key])
    check_folder_name(None, job_folder, MAX_FOLDER_NAME_LENGTH)
