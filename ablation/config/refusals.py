"""How bad input is refused: one line on stderr, exit 2, nothing left behind."""
from __future__ import annotations

import sys


class ConfigError(ValueError):
    """A config value that cannot work; the message names key, value and what is allowed."""


class Refused(SystemExit):
    """Refused input, on its way to the process that started the command, which
    prints its one line once, removes what the command created, and exits 2.

    A SystemExit so that Hydra passes it on untouched; picklable so that joblib's
    workers hand it back.
    """

    def __init__(self, message) -> None:
        super().__init__(2)
        self.message = str(message)

    def __reduce__(self):
        return (Refused, (self.message,))


def print_refusal(error) -> None:
    """The one way a refusal is shown: one line on stderr, ``error: <what and the
    fix>``, whatever Hydra's logging does."""
    print(f"error: {error}", file=sys.stderr, flush=True)
