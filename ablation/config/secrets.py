"""Secrets never reach a record, a W&B config, a folder name or a saved file.

Keys belong in the environment (``WANDB_API_KEY``), which nothing here
records. A secret passed anyway (on the command line, in a config file) is
recognised by its key's name and its whole value is hidden.
"""
from __future__ import annotations

import re

# The one definition of a secret-looking key: its last dotted component
# *contains* one of these words (``api_key_b64``, ``hf.tokens``,
# ``aws.private_key``), case-insensitive. No key of this project's config does
# (a test checks every composed key); over-hiding a value is harmless, leaking
# one is not.
_SECRET_WORDS = r"(?:api_?key|token|secret|passw(?:or)?d|passphrase|private_?key|credential|auth)"
SECRET_KEY = re.compile(rf"{_SECRET_WORDS}[^.]*$", re.IGNORECASE)  # in the last component
REDACTED = "***redacted***"
# A secret-named key inside a dict value (``{token: 'a b'}``, ``[{'auth': x}]``)
_NESTED_SECRET = re.compile(rf"""[\w+-]*{_SECRET_WORDS}[\w+-]*['"]?\s*:""", re.IGNORECASE)


def is_secret_key(key) -> bool:
    """True for a key (dotted or not) whose last component names a secret."""
    return bool(SECRET_KEY.search(str(key)))


# Credentials inside any value: the user-info of a URL (``https://user:pass@host``;
# everything between ``//`` and the last ``@`` before the host) ...
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#@'\"]*(?:@[^\s/?#@'\"]*)*@")
# ... and ``token=...`` / ``password: ...`` inside a longer text.
_EMBEDDED_SECRET = re.compile(rf"{_SECRET_WORDS}[\w+-]*['\"]?\s*[:=]", re.IGNORECASE)


def holds_secret(value_text: str) -> bool:
    """True if an override's value text has a secret-named key at any depth
    (a dict, or a dict in a list), a URL with user-info or a ``token=...``
    inside it, or was already redacted."""
    return REDACTED in value_text or bool(_NESTED_SECRET.search(value_text)
                                          or _URL_USERINFO.search(value_text)
                                          or _EMBEDDED_SECRET.search(value_text))


def redact(value):
    """A copy with the values of secret-looking keys (``api_key``, ``token``...)
    hidden whole, and credentials inside any other text (URL user-info,
    ``password=...``) masked.

    This catches a secret passed on the command line or in a config file
    before it reaches a record or the W&B config.
    """
    if isinstance(value, dict):
        return {k: REDACTED if is_secret_key(k) and v is not None else redact(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return scrub_text(value)
    return value


# The whole value: a quoted string (either quote, with escapes; YAML's may span
# lines), else the rest of the line, whatever it holds (spaces, commas, ``=``):
# over-redacting a line of a saved file is harmless, leaking the second half of
# a key is not. Lines below it that are indented deeper (a YAML block scalar, a
# multi-line plain or quoted value, a nested mapping) belong to the value too.
_SECRET_ASSIGNMENT = re.compile(
    rf"((?<![\w.+-])[\w.+-]*{_SECRET_WORDS}[\w+-]*['\"]?[ \t]*[:=][ \t]*)"
    r"""('(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.)*"|[^\n]*[^\s]|)""", re.IGNORECASE)


def _value_end(text: str, end: int, column: int) -> int:
    """Where a value ending at ``end`` really ends: past the following lines
    indented deeper than ``column`` (blank lines between them included)."""
    line_end = text.find("\n", end)
    if line_end < 0 or text[end:line_end].strip():
        return end
    position = last = line_end
    while position < len(text):
        next_end = text.find("\n", position + 1)
        next_end = len(text) if next_end < 0 else next_end
        line = text[position + 1:next_end]
        if line.strip():
            if len(line) - len(line.lstrip(" \t")) <= column:
                break
            last = next_end
        position = next_end
    return last


def scrub_text(text: str) -> str:
    """Hide the whole value in ``key: value`` / ``key=value`` where the key
    looks secret, however many lines it spans, and the user-info of any URL."""
    text = _URL_USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", text)
    out, position = [], 0
    while match := _SECRET_ASSIGNMENT.search(text, position):
        column = match.start() - (text.rfind("\n", 0, match.start()) + 1)
        gap = "" if match.group(2) or match.group(1)[-1] in " \t=" else " "
        out.append(text[position:match.start(2)] + gap + REDACTED)
        position = _value_end(text, match.end(), column)
    return "".join(out) + text[position:]


def names_secret(override: str) -> bool:
    """True for an override (``+wandb.api_key=...``, ``~x.token``, a dict
    value holding ``{token: ...}``) whose key, or a key inside whose value at
    any depth, names a secret; flags (``-m``, ``--config-dir=...``) are not."""
    if override.startswith("-"):
        return False
    key, has_value, value = override.partition("=")
    return (is_secret_key(override_key(key))
            or bool(has_value) and holds_secret(value))


def override_key(text: str) -> str:
    """The key an override sets: ``+wandb.tags@pkg=[x]`` -> ``wandb.tags``."""
    return text.split("=", 1)[0].lstrip("+~").split("@", 1)[0]


def redact_argv(argv: list[str]) -> list[str]:
    """``argv`` with the whole value of every override that names a secret
    replaced: a secret-named key, or one inside a dict value at any depth."""
    return [f"{arg.split('=', 1)[0]}='{REDACTED}'" if "=" in arg and names_secret(arg) else arg
            for arg in argv]
