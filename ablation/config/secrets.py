"""Secrets never reach a record, a W&B config, a folder name or a saved file.

Keys belong in the environment (``WANDB_API_KEY``), which nothing here
records. A secret passed anyway (on the command line, in a config file) is
recognised by its key's name and its whole value is hidden.
"""
from __future__ import annotations

import re

# The one definition of a secret-looking key, by its last dotted component,
# case-insensitive. Either it *contains* one of these words (``api_key_b64``,
# ``hf.tokens``, ``aws.private_key``) ...
_SECRET_WORDS = r"(?:api_?key|token|secret|passw(?:or)?d|passphrase|private_?key|credential|auth)"
# ... or it *is*, or ends in, one of these short words after ``_``, ``-``, ``.``
# or a camel-case capital: ``key`` (``deploy.key``, ``ssh_key``, ``access_key``,
# ``sshKey``; never ``key_dim``, ``keys`` or ``monkey``), ``pwd`` (``db_pwd``),
# and ``*_pat``, a personal access token (``hf_pat``; a bare ``pat`` is not).
_SECRET_ENDINGS = (r"(?:(?<![a-z0-9])(?:key|pwd)|(?<=[a-z0-9])(?-i:Key|Pwd|Pat)"
                   r"|(?<=[_-])pat)(?!\w)")
# No key of this project's config matches either (a test checks every composed
# key); over-hiding a value is harmless, leaking one is not.
SECRET_KEY = re.compile(rf"(?:{_SECRET_WORDS}[^.]*|{_SECRET_ENDINGS})$", re.IGNORECASE)
REDACTED = "***redacted***"
# A secret-named key inside a dict value (``{token: 'a b'}``, ``[{'auth': x}]``,
# ``{ssh_key: x}``)
_NESTED_SECRET = re.compile(rf"""(?:[\w+-]*{_SECRET_WORDS}[\w+-]*|{_SECRET_ENDINGS})['"]?\s*:""",
                            re.IGNORECASE)


def is_secret_key(key) -> bool:
    """True for a key (dotted or not) whose last component names a secret."""
    return bool(SECRET_KEY.search(str(key)))


# Credentials inside any value: the user-info of a URL. With a password
# (``scheme://user:password@host``) the password may hold any character but
# white space (``#``, ``@``, ``/``, ``:``, quotes: ``https://u:p@ss/w#rd@host``),
# so everything up to the last ``@`` of the unbroken text is hidden (a ``@``
# further along the path hides more than needed: harmless); without one, the
# user-info is what lies between ``//`` and the last ``@`` before the host ...
_URL_USERINFO = re.compile(
    r"(?i)\b([a-z][a-z0-9+.-]*://)(?:[^\s/?#:'\"]*:\S*|[^\s/?#@'\"]*(?:@[^\s/?#@'\"]*)*)@")
# ... and ``token=...`` / ``password: ...`` inside a longer text.
_EMBEDDED_SECRET = re.compile(rf"(?:{_SECRET_WORDS}[\w+-]*|{_SECRET_ENDINGS})['\"]?\s*[:=]",
                              re.IGNORECASE)


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
    rf"((?<![\w.+-])(?P<key>[\w.+-]*?(?:{_SECRET_WORDS}[\w+-]*|{_SECRET_ENDINGS}))"
    r"['\"]?[ \t]*[:=][ \t]*)"
    r"""(?P<value>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.)*"|[^\n]*[^\s]|)""", re.IGNORECASE)
# A bare ``key`` or ``pwd`` (no ``deploy.`` or ``ssh_`` before it) is a key only
# where a key can stand: first on its line (a YAML mapping, a list item), after
# ``{`` or ``,`` (a flow mapping, an override list) or ``?``, ``&``, ``;`` (a
# URL's query). Elsewhere it is a word of prose: Hydra's saved help text says
# ``[KEY=VALUE ...]`` and ``Any key: KEY=VALUE``, which must stay as they are.
_BARE_ENDING = re.compile(r"[+~]*(?:key|pwd)", re.IGNORECASE)
_KEY_POSITION = re.compile(r"(?:^[ \t]*(?:-[ \t]+)?|[{,?&;][ \t]*)$")


def _stands_as_key(text: str, match: re.Match) -> bool:
    if not _BARE_ENDING.fullmatch(match.group("key")):
        return True
    line_start = text.rfind("\n", 0, match.start()) + 1
    return bool(_KEY_POSITION.search(text[line_start:match.start()]))


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
    out, position, start = [], 0, 0
    while match := _SECRET_ASSIGNMENT.search(text, start):
        if not _stands_as_key(text, match):
            start = match.start() + 1
            continue
        column = match.start() - (text.rfind("\n", 0, match.start()) + 1)
        gap = "" if match.group("value") or match.group(1)[-1] in " \t=" else " "
        out.append(text[position:match.start("value")] + gap + REDACTED)
        position = start = _value_end(text, match.end(), column)
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
