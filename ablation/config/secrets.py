"""Secrets are refused, never recorded: this tool needs none in its config.

A config that holds a secret is refused in one line, before Hydra writes
anything, naming the key and never the value. The resolved config is judged, not
only the command line. A 40-hex W&B key is caught by its key's name or by matching
``WANDB_API_KEY``, not by its shape alone: a git commit hash has the same shape.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from ablation.config.refusals import ConfigError

HINT = "W&B reads WANDB_API_KEY or ~/.netrc; secrets never go in the config"

# A name (one dotted component, or an environment variable) names a secret if it
# contains one of these words in any case (``api_key_b64``, ``GITHUB_TOKEN``), or
# is or ends in ``key`` or ``pwd`` (``deploy.key``, ``ssh_key``, ``db_pwd``; never
# ``key_dim``, ``keys`` or ``monkey``), or ends in ``_pat`` (a personal access token),
# after ``_``, ``-`` or a camel-case capital (``sshKey``). A test checks that no key
# of the suite's own config does.
_SECRET_WORDS = re.compile(r"password|passwd|passphrase|secret|token|api_?key|credential", re.I)
_SECRET_ENDINGS = re.compile(r"(?:^|[_-])(?:key|pwd)$|[_-]pat$", re.I)
_SECRET_CAMEL = re.compile(r"[a-z0-9](?:Key|Pwd|Pat)$")
# The shell's working folder is no secret, whatever its name says.
NOT_SECRET_VARIABLES = ("PWD",)
MIN_SECRET_LENGTH = 8  # a shorter variable (``TOKENIZERS_PARALLELISM=false``) guards nothing

# What a value may hold that is a credential whatever its key: URL user-info ...
_URL_USERINFO = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s/?#@:]*(?::\S*)?@", re.I)
# ... a secret-named assignment inside text (``?api_key=...``, ``{token: ...}``) ...
_ASSIGNMENT = re.compile(r"""(?:^|[\s?&;.])([\w-]+)=\S|[{,]\s*["']?([\w-]+)["']?\s*:""")
# ... and well-known credential formats.
FORMATS = {
    "a GitHub token": re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    "an OpenAI-style key": re.compile(r"\bsk-(?:[a-z]+-)?[A-Za-z0-9_]{20,}"),
    "an AWS access key id": re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
    "a presigned URL's signature": re.compile(r"X-(?:Amz|Goog)-Signature=", re.I),
    "a session cookie": re.compile(r"(?<![\w.-])session(?:_?id)?=\S", re.I),
    "a bearer token": re.compile(r"\bbearer\s+[A-Za-z0-9._~+/-]{20,}", re.I),
}


def names_secret(name) -> bool:
    """True for a name (one component, not a dotted path) that names a secret."""
    name = str(name)
    return bool(_SECRET_WORDS.search(name) or _SECRET_ENDINGS.search(name)
                or _SECRET_CAMEL.search(name))


def _secret_variables() -> dict[str, str]:
    return {name: value for name, value in os.environ.items()
            if names_secret(name) and name not in NOT_SECRET_VARIABLES
            and len(value) >= MIN_SECRET_LENGTH}


def _problem(text: str, variables: Mapping[str, str]) -> str | None:
    """What makes a value's text a secret, in words, or None."""
    if _URL_USERINFO.search(text):
        return "holds a URL with user-info (scheme://user:password@host)"
    if name := next((v for v, content in variables.items() if content in text), None):
        return f"holds the value of the environment variable {name}"
    for match in _ASSIGNMENT.finditer(text):
        if names_secret(name := match.group(1) or match.group(2)):
            return f"holds a secret-named assignment ({name}=...)"
    if what := next((what for what, pattern in FORMATS.items() if pattern.search(text)), None):
        return f"holds what looks like {what}"
    return None


def _refuse(key: str, problem: str) -> ConfigError:
    return ConfigError(f"{key} {problem}: {HINT}")


def check_no_secrets(config: Mapping, overrides: Iterable[str] = ()) -> None:
    """Refuse, in one line, a secret in ``config`` (a resolved config: every key
    at any depth and every value) or in the text of ``overrides`` (command-line
    overrides, ``hydra.*`` included, each judged before it is parsed)."""
    variables = _secret_variables()
    for override in overrides:
        key, _, text = override.partition("=")
        key = key.lstrip("+~").split("@", 1)[0]
        deletion = override.startswith("~")  # removes a key: its name carries nothing
        if not deletion and any(names_secret(part) for part in re.split(r"[./]", key)):
            raise _refuse(key, "names a secret")
        if problem := _problem(text, variables):
            raise _refuse(key, problem)

    def walk(node, path: str) -> None:
        if isinstance(node, Mapping):
            for name, value in node.items():
                key = f"{path}.{name}" if path else str(name)
                if names_secret(name):
                    raise _refuse(key, "names a secret")
                walk(value, key)
        elif isinstance(node, (list, tuple)):
            for index, value in enumerate(node):
                walk(value, f"{path}[{index}]")
        elif isinstance(node, str) and (problem := _problem(node, variables)):
            raise _refuse(path, problem)
    walk(config, "")
