"""A LaTeX table laid out to fit a page's text width, never scaled.

A table is :class:`Column` s; :func:`float_table` sets them as a booktabs tabular in
a float, caption above, notes beneath. The layout is the first step of
:func:`ladder` whose estimated width (Computer Modern's glyph widths,
:func:`text_width`) fits a 10 pt ``article``'s text width; a table that fits none
is split into tabulars of neighbouring columns (:func:`split`), each a float.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ablation.report.escape import latex_text
from ablation.report.render import LATEX

TEXT_WIDTH = 345.0  # pt: \textwidth of a 10 pt article
COLUMN_WIDTH = 229.5  # pt: \columnwidth of a two-column 10 pt article
MARGIN = 0.97  # of the width an estimate may fill: glyph widths only, kerning left out

# Computer Modern Roman 10 pt advance widths (pt), measured with pdflatex
_CMR10 = {2.78: "!',.:;[]`il|", 3.06: "fj", 3.33: "-", 3.6: "_", 3.61: "I", 3.89: "()t",
          3.92: "r", 3.94: "s", 4.44: "cez†", 4.72: "?", 5.0: "\"$*/0123456789\\^ago{}~–",
          5.14: "J", 5.28: "kqvxy", 5.56: "Sbdhnpu", 6.11: "Z", 6.25: "L", 6.53: "F",
          6.81: "EP", 7.08: "B", 7.22: "CTw", 7.36: "R", 7.5: "AHNUVXY", 7.64: "D",
          7.78: "&+<=>@KOQ±−×", 7.85: "G", 8.33: "#%mΔ✓", 9.17: "M", 10.0: "—",
          10.28: "W"}
GLYPH = {c: w for w, chars in _CMR10.items() for c in chars}
SPACE, OTHER = 3.33, 7.5  # an interword space; a glyph not listed
# each size's glyphs against \normalsize's (cmr9 and cmr8 are drawn wider than scaled)
SIZES = {"normalsize": 1.0, "small": 0.925, "footnotesize": 0.85}
BOLD = 1.15  # Computer Modern bold extended against roman


def text_width(text: str, size: str = "normalsize", bold: bool = False) -> float:
    """The estimated width (pt) of ``text`` set in Computer Modern at ``size``."""
    width = sum(SPACE if c == " " else GLYPH.get(c, OTHER) for c in text)
    return width * SIZES[size] * (BOLD if bold else 1.0)


GAP_SPLIT = (" [", " [")  # a gap's interval may go under its value
SD_SPLIT = (" $\\pm$ ", " ± ")  # an sd under its mean, at the last squeeze only
VARIANT_WRAP = 61.0  # pt: a row name such as "LSA (mask +" on a line, when squeezed
LABEL_WORD = 12  # a setting label's word longer than this may break after punctuation
HEAD_LINE = 16  # characters per line of a column head
HEAD_LINE_SQUEEZED = 10  # and where the rows are two lines high anyway


def head_lines(text: str, limit: int = HEAD_LINE) -> tuple[str, ...]:
    """A column head on lines of at most ``limit`` characters (split at spaces)."""
    lines = [""]
    for word in text.split(" "):
        if lines[-1] and len(lines[-1]) + 1 + len(word) > limit:
            lines.append(word)
        else:
            lines[-1] = f"{lines[-1]} {word}".lstrip()
    return tuple(lines)


@dataclass
class Column:
    """One column: its head (lines), its cells as LaTeX and as the text they print,
    which are bold (before a split only), and how it may be squeezed: ``split`` (the
    LaTeX and the text before which a cell may go onto a second line, from level
    ``split_level`` on) and ``wrap`` (a ragged paragraph at most that many pt wide;
    ``wrap_squeezed`` from level 2 on). Neighbours of one ``group`` share a head."""

    head: tuple[str, ...]
    cells: list[str]
    plain: list[str]
    bold: list[bool] = field(default_factory=list)
    align: str = "c"
    split: tuple[str, str] | None = None
    split_level: int = 1
    wrap: float | None = None
    wrap_squeezed: float | None = None
    group: str | None = None  # a head over this and its neighbours of the same group
    head_squeezed: tuple[str, ...] | None = None  # the head from squeeze level 2 on

    def __post_init__(self):
        self.bold = self.bold or [False] * len(self.cells)

    def heads(self, level: int) -> tuple[str, ...]:
        return self.head_squeezed if level >= 2 and self.head_squeezed else self.head

    def cap(self, level: int) -> float | None:
        """The wrapping width (pt at 10 pt) at squeeze ``level``, None: no wrapping."""
        return self.wrap_squeezed if level >= 2 and self.wrap_squeezed else self.wrap

    def lines(self, row: int, level: int, plain: bool = False) -> list[str]:
        """A cell's lines at squeeze ``level`` (one, or two where it splits)."""
        text = (self.plain if plain else self.cells)[row]
        if self.split is None or level < self.split_level:
            return [text]
        marker = self.split[1 if plain else 0]
        before, found, after = text.partition(marker)
        return [before, marker.lstrip() + after] if found else [text]


@dataclass(frozen=True)
class Layout:
    size: str
    sep: float  # \tabcolsep, pt
    level: int  # how far cells are squeezed (Column)
    parts: tuple[tuple[int, ...], ...]  # the columns of each tabular, in order
    width: float  # pt, the widest tabular's estimate


def _pieces(text: str) -> list[str]:
    """The parts of ``text`` no line break can split: words, cut after punctuation."""
    return re.findall(r"[^\s,._=/]*[,._=/]?", text)


def column_width(column: Column, size: str, level: int) -> float:
    """The column's estimated width (pt) at ``size`` and squeeze ``level``."""
    head = max(text_width(line, size) for line in column.heads(level))
    rows = range(len(column.cells))
    cap = column.cap(level)
    if cap is not None:
        longest = max((text_width(c, size) for c in column.plain), default=0.0)
        pieces = max((text_width(p, size) for c in column.plain for p in _pieces(c)),
                     default=0.0)
        return max(head, min(longest, cap * SIZES[size]), pieces)
    body = max((text_width(line, size, column.bold[r] and k == 0)
                for r in rows for k, line in enumerate(column.lines(r, level, plain=True))),
               default=0.0)
    return max(head, body)


def _width(widths: list[float], sep: float) -> float:
    return sum(widths) + 2 * sep * (len(widths) - 1)


def widths(columns: list[Column], size: str, level: int, sep: float) -> list[float]:
    """Each column's width; the last of a group widened where the group's head is
    wider than its columns."""
    out = [column_width(c, size, level) for c in columns]
    for name, members in _groups(columns):
        if name:
            need = text_width(name, size) - _width([out[i] for i in members], sep)
            out[members[-1]] += max(need, 0.0)
    return out


def _groups(columns: list[Column]) -> list[tuple[str | None, list[int]]]:
    """Runs of neighbouring columns of one group (None: no group)."""
    runs: list[tuple[str | None, list[int]]] = []
    for i, column in enumerate(columns):
        if runs and column.group and runs[-1][0] == column.group:
            runs[-1][1].append(i)
        else:
            runs.append((column.group, [i]))
    return runs


SQUEEZED = 3  # the last level: every cell that can split does
# How the usual columns may be squeezed (Column's keywords): a row's name, a gap, a mean ± sd
ROW_NAME = {"align": "l", "wrap_squeezed": VARIANT_WRAP}
GAP = {"split": GAP_SPLIT}
MEAN_SD = {"split": SD_SPLIT, "split_level": SQUEEZED}


def ladder(full: bool) -> list[tuple[str, int, float]]:
    """(size, squeeze level, column gap) in the order they are tried: the largest size
    first, at each size every squeeze level, each with the column gap at 6 pt, then
    4 pt. The full file's tables are ``\\small``: split rather than smaller."""
    sizes = ["small"] if full else list(SIZES)
    return [(size, level, sep) for size in sizes for level in range(SQUEEZED + 1)
            for sep in (6.0, 4.0)]


# Where no step of the ladder fits, the columns are split over tabulars set so
SPLIT = {False: ("footnotesize", SQUEEZED, 4.0), True: ("small", 2, 4.0)}


def fit(columns: list[Column], full: bool = False, width: float = TEXT_WIDTH) -> Layout:
    """The first layout of :func:`ladder` whose one tabular fits ``width``; else the
    columns split over several tabulars set as :data:`SPLIT` says."""
    room = width * MARGIN
    for size, level, sep in ladder(full):
        total = _width(widths(columns, size, level, sep), sep)
        if total <= room:
            return Layout(size, sep, level, (tuple(range(len(columns))),), total)
    size, level, sep = SPLIT[full]
    each = widths(columns, size, level, sep)
    parts = split(each, sep, room)
    return Layout(size, sep, level, parts,
                  max(_width([each[j] for j in part], sep) for part in parts))


def split(each: list[float], sep: float, room: float) -> tuple[tuple[int, ...], ...]:
    """Columns 1.. in order over the fewest tabulars that fit ``room`` (each led by
    column 0), the widest as narrow as it can be."""
    n = len(each)

    def width(a, b):  # the tabular of columns a..b-1 behind column 0
        return _width([each[0], *each[a:b]], sep)

    # best[k][b]: the narrowest widest tabular for columns 1..b-1 over k tabulars
    best = {0: {1: (0.0, ())}}
    for k in range(1, n):
        best[k] = {}
        for b in range(2, n + 1):
            options = [(max(w, width(a, b)), (*cuts, a)) for a, (w, cuts) in best[k - 1].items()
                       if a < b]
            if options:
                best[k][b] = min(options)
        done = best[k].get(n)
        if done and (done[0] <= room or k == n - 1):
            cuts = (*done[1], n)
            return tuple((0, *range(a, b)) for a, b in zip(cuts, cuts[1:]))
    return ((0,),)


def _head(lines: tuple[str, ...]) -> str:
    cells = [latex_text(line) for line in lines]
    if len(cells) == 1:
        return cells[0]
    return r"\begin{tabular}[b]{@{}c@{}}" + r" \\ ".join(cells) + r"\end{tabular}"


def _cell(column: Column, row: int, layout: Layout) -> str:
    if column.cap(layout.level) is not None:  # a ragged paragraph, top line on the row's
        width = column_width(column, layout.size, layout.level)
        if text_width(column.plain[row], layout.size) <= width:
            return column.cells[row]
        return (rf"\parbox[t]{{{width + 1:.0f}pt}}{{\raggedright " + column.cells[row]
                + r"\strut}")
    lines = column.lines(row, SQUEEZED)
    if column.bold[row]:
        lines[0] = LATEX.bold.format(lines[0])
    if len(lines) == 1 or layout.level < column.split_level:
        return " ".join(lines)
    # braces: a line starting with [ is no optional argument of the \\ before it
    return (rf"\begin{{tabular}}[t]{{@{{}}{column.align}@{{}}}}"
            + r"\\".join("{" + line + "}" for line in lines) + r"\end{tabular}")


def _group_heads(columns: list[Column]) -> list[str]:
    """The row of group heads over the column heads, ruled beneath; none without groups."""
    runs = _groups(columns)
    if not any(name for name, _ in runs):
        return []
    cells, rules = [], []
    for name, members in runs:
        if name:
            cells.append(rf"\multicolumn{{{len(members)}}}{{c}}{{{latex_text(name)}}}")
            rules.append(rf"\cmidrule(lr){{{members[0] + 1}-{members[-1] + 1}}}")
        else:
            cells += [""] * len(members)
    return [" & ".join(cells) + r" \\", " ".join(rules)]


def tabular(columns: list[Column], layout: Layout) -> list[str]:
    """One booktabs tabular of ``columns`` set as ``layout`` says."""
    spec = "".join("l" if c.cap(layout.level) is not None else c.align for c in columns)
    return [rf"\begin{{tabular}}{{@{{}}{spec}@{{}}}}", r"\toprule", *_group_heads(columns),
            " & ".join(_head(c.heads(layout.level)) for c in columns) + r" \\", r"\midrule",
            *(" & ".join(_cell(c, r, layout) for c in columns) + r" \\"
              for r in range(len(columns[0].cells))),
            r"\bottomrule", r"\end{tabular}"]


def float_table(caption: str, columns: list[Column], notes_text: list[str],
                full: bool = False, continued: str = "") -> list[str]:
    """A table float: the caption above, the tabular, the notes beneath in a minipage;
    split columns (:func:`fit`) are floats of their own, numbered as the first and
    captioned ``continued``, the notes beneath the last."""
    layout = fit(columns, full)
    out = []
    for k, part in enumerate(layout.parts):
        mine = [columns[i] for i in part]
        width = _width(widths(mine, layout.size, layout.level, layout.sep), layout.sep)
        env = "table" if width <= COLUMN_WIDTH * MARGIN else "table*"
        out += [rf"\begin{{{env}}}[tp]", r"\centering",
                *([r"\addtocounter{table}{-1}"] if k else []),  # the first part's number
                rf"\caption{{{(continued or caption) if k else caption}}}", r"\smallskip"]
        if layout.size != "normalsize":
            out.append(f"\\{layout.size}")
        if layout.sep != 6.0:
            out.append(rf"\setlength{{\tabcolsep}}{{{layout.sep:g}pt}}")
        out += tabular(mine, layout)
        if notes_text and k == len(layout.parts) - 1:
            out += [r"\par\smallskip", r"\begin{minipage}{\linewidth}\footnotesize",
                    " ".join(notes_text), r"\end{minipage}"]
        out += [rf"\end{{{env}}}", ""]
    return out
