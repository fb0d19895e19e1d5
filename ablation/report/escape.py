"""Text from the records made safe for the file it lands in: names come from run
records, which anyone who can write to a results folder controls, and must read
as the text they are, never act on the reader.

- CSV (:func:`csv_text`): a text cell a spreadsheet would run as a formula gets a
  leading ``'`` (OWASP's "CSV injection" advice); numbers stay numbers.
- LaTeX (:func:`latex_text`): special characters escaped, every non-ASCII
  character written in LaTeX (pure ASCII, glyphs of the Type 1 fonts every TeX
  has; ``?`` where there is none), long words breakable.
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
    frame = frame.copy()
    for column in frame.columns:
        if frame[column].dtype == object or pd.api.types.is_string_dtype(frame[column]):
            frame[column] = frame[column].map(csv_cell)
    return frame.to_csv(index=False)


def _printable(char: str) -> bool:
    """False for control characters and line or paragraph separators."""
    return unicodedata.category(char) not in ("Cc", "Zl", "Zp")


_MARKDOWN = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\\": "\\\\", "|": "\\|", "`": "\\`",
             "[": "\\[", "]": "\\]", "$": "\\$"}  # $: GitHub sets $...$ as mathematics


def markdown_text(text) -> str:
    """``text`` as Markdown that shows it literally (GitHub-flavoured, tables included)."""
    return "".join(_MARKDOWN.get(c, c) if _printable(c) else " " for c in str(text))


# Only glyphs of the fonts every TeX installation has as Type 1 (OT1, OML, OMS): a
# text-companion (TS1) glyph such as \$, \dag or \S in text mode would make TeX
# generate a bitmap font where cm-super is not installed, so these are in math mode.
_LATEX_ASCII = {
    "\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"$\$$", "&": r"\&", "#": r"\#",
    "%": r"\%", "_": r"\_", "^": r"\textasciicircum{}", "~": r"\textasciitilde{}",
    # the default (OT1) font prints these as other glyphs
    "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}", '"': r'\texttt{"}',
    # after a row's \\ a [ would be read as its optional argument
    "[": "{[}", "]": "{]}",
}
_GREEK_NAMES = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi "
                "omicron pi rho sigma sigma tau upsilon phi chi psi omega").split()
# capitals LaTeX has; the others look like Latin ones
_GREEK_CAPITALS = {"Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi", "Sigma", "Upsilon", "Phi",
                   "Psi", "Omega"}
_LATIN_LOOKALIKE = {"Alpha": "A", "Beta": "B", "Epsilon": "E", "Zeta": "Z", "Eta": "H",
                    "Iota": "I", "Kappa": "K", "Mu": "M", "Nu": "N", "Omicron": "O", "Rho": "P",
                    "Tau": "T", "Chi": "X"}


def _greek() -> dict[str, str]:
    """U+03B1-U+03C9 and their capitals (U+03C2, the final sigma, has none)."""
    table = {}
    for i, name in enumerate(_GREEK_NAMES):
        table[chr(0x03B1 + i)] = "o" if name == "omicron" else "$\\" + name + "$"
        capital = name.capitalize()
        if i != 0x03C2 - 0x03B1:
            table[chr(0x0391 + i)] = ("$\\" + capital + "$" if capital in _GREEK_CAPITALS
                                      else _LATIN_LOOKALIKE[capital])
    return table


LATEX_UNICODE = {
    **_greek(), "\u00b5": r"$\mu$",  # the micro sign
    "±": r"$\pm$", "×": r"$\times$", "÷": r"$\div$", "·": r"$\cdot$", "•": r"$\bullet$",
    "≥": r"$\geq$", "≤": r"$\leq$", "≠": r"$\neq$", "≈": r"$\approx$", "∞": r"$\infty$",
    "−": r"$-$", "→": r"$\rightarrow$", "←": r"$\leftarrow$", "↔": r"$\leftrightarrow$",
    "⇒": r"$\Rightarrow$", "√": r"$\surd$", "∈": r"$\in$", "∼": r"$\sim$", "′": r"$'$",
    "°": r"$^\circ$", "¹": r"$^1$", "²": r"$^2$", "³": r"$^3$",
    "½": "1/2", "¼": "1/4", "¾": "3/4",
    "–": "--", "—": "---", "‐": "-", "‑": "-", "‘": "`", "’": "'", "‚": ",",
    "“": "``", "”": "''", "„": ",,", "«": r"$\ll$", "»": r"$\gg$", "…": r"\dots{}",
    # in math mode (TS1 above)
    "†": r"$\dagger$", "‡": r"$\ddagger$", "§": r"$\S$", "¶": r"$\P$", "©": "(c)",
    "£": r"$\mathsterling$", "✓": r"\checkmark{}", "✔": r"\checkmark{}", "¡": "!`", "¿": "?`",
    "ß": r"\ss{}", "æ": r"\ae{}", "Æ": r"\AE{}", "œ": r"\oe{}", "Œ": r"\OE{}",
    "ø": r"\o{}", "Ø": r"\O{}", "ł": r"\l{}", "Ł": r"\L{}", "ı": r"\i{}", "ȷ": r"\j{}",
    "\u00a0": "~", "\u00ad": "", "\u200b": "", "\u200c": "", "\u200d": "", "\ufeff": "",
}
# combining accents the default (OT1) encoding has, as LaTeX accent commands
_ACCENTS = {"\u0300": "`", "\u0301": "'", "\u0302": "^", "\u0303": "~", "\u0304": "=",
            "\u0306": "u", "\u0307": ".", "\u0308": '"', "\u030a": "r", "\u030b": "H",
            "\u030c": "v", "\u0327": "c", "\u0323": "d", "\u0331": "b"}
_BELOW = {"c", "d", "b"}  # accents under the letter: an i keeps its dot
FALLBACK = "?"


def _accented(char: str) -> str | None:
    """``é`` -> ``\\'{e}`` (accents OT1 lacks dropped); None for no accented ASCII letter."""
    base, *marks = unicodedata.normalize("NFD", char)
    if not marks or not (base.isascii() and base.isalpha()):
        return None
    text = base
    for mark in marks:
        accent = _ACCENTS.get(mark)
        if accent is None:
            continue
        if text in ("i", "j") and accent not in _BELOW:
            text = "\\" + text  # the dotless i under an accent above
        text = rf"\{accent}{{{text}}}"
    return text


def _latex_char(char: str, depth: int = 0) -> str:
    if char.isascii():
        if not _printable(char):
            return " "
        return _LATEX_ASCII.get(char, char)
    if char in LATEX_UNICODE:
        return LATEX_UNICODE[char]
    if not _printable(char):
        return " "
    accented = _accented(char)
    if accented is not None:
        return accented
    if unicodedata.category(char).startswith("Z"):
        return " "  # other spaces
    compatible = unicodedata.normalize("NFKD", char)
    if compatible != char and depth < 2:
        return "".join(_latex_char(c, depth + 1) for c in compatible
                       if not unicodedata.combining(c))
    return FALLBACK


# A word longer than this (a path, a URL) may break after its punctuation, or every
# LONG_RUN characters without any: TeX hyphenates no word holding digits or symbols.
LONG_WORD = 30
LONG_RUN = 16
BREAK_AFTER = frozenset("/\\}=,._|")


def latex_text(text, long_word: int = LONG_WORD) -> str:
    """``text`` as LaTeX text mode that prints it (pure ASCII); a word longer than
    ``long_word`` characters may break after its punctuation."""
    out = []
    for word in re.split(r"(\s+)", str(text)):
        breakable, previous, run = len(word) > long_word, "", 0
        for i, char in enumerate(word):
            # "--" would be set as a dash: a run of hyphens stays hyphens
            out.append("{}-" if char == "-" and previous == "-" else _latex_char(char))
            run += 1
            # never inside a number (0.002, 10,000)
            decimal = char in ".," and previous.isdigit() and word[i + 1:i + 2].isdigit()
            if breakable and (char in BREAK_AFTER and not decimal or run >= LONG_RUN) \
                    and i < len(word) - 1:
                out.append(r"\hspace{0pt}")
                run = 0
            previous = char
    return "".join(out)
