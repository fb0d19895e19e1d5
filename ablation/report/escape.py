"""Text from the records made safe for the file it lands in: names come from run
records, which anyone who can write to a results folder controls, and must read
as the text they are, never act on the reader.

- CSV (:func:`csv_text`): a text cell a spreadsheet would run as a formula gets a
  leading ``'`` (OWASP's "CSV injection" advice); numbers stay numbers.
- LaTeX (:func:`latex_text`): special characters escaped, pure ASCII: a few
  non-ASCII characters written in LaTeX, others as their unaccented letters or ``?``.
- Markdown (:func:`markdown_text`): HTML's ``<>&`` as entities; table, link, code
  and math characters backslash-escaped.

In Markdown and LaTeX a control character (a newline in a name) is a space.
"""
from __future__ import annotations

import re
import unicodedata

import pandas as pd

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """A text cell a spreadsheet would run as a formula, quoted with ``'``; a carriage
    return a line feed (which the CSV writer quotes; a lone one would end the row)."""
    if not isinstance(value, str):
        return value
    value = "'" + value if value.startswith(FORMULA_STARTS) else value
    return value.replace("\r\n", "\n").replace("\r", "\n")


def csv_text(frame: pd.DataFrame) -> str:
    """``frame.to_csv(index=False)`` with every text cell made safe (:func:`csv_cell`)."""
    return frame.map(csv_cell).to_csv(index=False)


def _printable(char: str) -> bool:
    """False for control characters and line or paragraph separators."""
    return unicodedata.category(char) not in ("Cc", "Zl", "Zp")


_MARKDOWN = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\\": "\\\\", "|": "\\|", "`": "\\`",
             "[": "\\[", "]": "\\]", "$": "\\$"}  # $: GitHub sets $...$ as mathematics


def markdown_text(text) -> str:
    """``text`` as Markdown that shows it literally (GitHub-flavoured, tables included)."""
    return "".join(_MARKDOWN.get(c, c) if _printable(c) else " " for c in str(text))


# What the default (OT1) fonts print as other glyphs, or TeX reads as commands, as
# text; $ in math mode (\$ in text mode is a text-companion glyph, a bitmap font where
# cm-super is not installed); a bracket braced (a row's \\ would read it as its argument)
_LATEX_ASCII = {
    "\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"$\$$", "&": r"\&", "#": r"\#",
    "%": r"\%", "_": r"\_", "^": r"\textasciicircum{}", "~": r"\textasciitilde{}",
    "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}", '"': r'\texttt{"}',
    "[": "{[}", "]": "{]}",
}
# The non-ASCII characters the report's own text uses, and a few common ones
LATEX_UNICODE = {
    "Δ": r"$\Delta$", "α": r"$\alpha$", "µ": r"$\mu$", "μ": r"$\mu$", "±": r"$\pm$",
    "×": r"$\times$", "−": r"$-$", "≤": r"$\leq$", "≥": r"$\geq$", "·": r"$\cdot$",
    "→": r"$\rightarrow$", "†": r"$\dagger$", "✓": r"\checkmark{}", "°": r"$^\circ$",
    "–": r"\textendash{}", "—": r"\textemdash{}", "‘": "`", "’": "'", "“": "``", "”": "''",
}
FALLBACK = "?"


def _latex_char(char: str) -> str:
    """One character as LaTeX: another non-ASCII one as its ASCII letters with the
    accents left out (é -> e, ﬁ -> fi), each character without any :data:`FALLBACK`."""
    if char in LATEX_UNICODE:
        return LATEX_UNICODE[char]
    if not _printable(char):
        return " "
    if char.isascii():
        return _LATEX_ASCII.get(char, char)
    letters = [c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c)]
    return "".join(_LATEX_ASCII.get(c, c) if c.isascii() and _printable(c) else FALLBACK
                   for c in letters) or FALLBACK


def latex_text(text) -> str:
    """``text`` as LaTeX text mode that prints it (pure ASCII); a run of hyphens stays
    hyphens (``--`` would be set as a dash)."""
    return re.sub("-(?=-)", "-{}", "".join(_latex_char(c) for c in str(text)))
