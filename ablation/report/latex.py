"""The comparison as LaTeX a paper prints: ``comparison.tex`` and ``comparison_full.tex``.

``comparison.tex`` holds, per block, the paper's columns (:func:`compact_header`)
and the factorial effects on top-1, then the locality tables;
``comparison_full.tex`` every column of the Markdown table and the effects on
top-5 too, for an appendix. Each table is a float (:func:`float_table`): a caption
saying what the block is and what its numbers are, a booktabs tabular of the cells
:mod:`ablation.report.render` makes (bold included), and the statistics as notes
beneath it (:func:`ablation.report.captions.notes`). Nothing is sized to the page:
a wide table is the reader's to set in ``table*`` or on a landscape page.
"""
from __future__ import annotations

import pandas as pd

from ablation.config.switches import REGISTRY
from ablation.report.captions import (BEST_COLUMNS, block_architecture, is_tuned, notes,
                                      own_name, short_caption, shows_best_epoch)
from ablation.report.escape import latex_text
from ablation.report.render import (FACTORIAL_HEADER, LATEX, NOT_ESTIMABLE_NOTE,
                                    PAPER_COLUMN, block_title, display_rows, effect_rows,
                                    factorial_caption, factorial_note, header, not_estimable,
                                    select_block)
from ablation.report.tables import BLOCK, tied

# What both files need besides \documentclass{article}: booktabs (the rules) and
# amssymb (\checkmark); the first line of each names them.
LATEX_PACKAGES = ("booktabs", "amssymb")
BEST_TOP1 = next(iter(BEST_COLUMNS))
# the compact table's heads where they differ from the Markdown's
COMPACT_HEADS = {"ΔTop-1 vs ViT": "ΔTop-1 (pp) [95 % CI]"}
# under the official protocol: three top-1 columns under one head
TOP1_GROUP = "Top-1 (%)"
GROUPED_HEADS = {"Top-1 (%)": "final", BEST_TOP1: "best epoch", PAPER_COLUMN: "paper"}
TIED_NOTE = ("LSA ✓: the diagonal mask and the learnable temperature together "
             "(the temperature follows the mask in every run of this block).")


def float_table(caption: str, head: list[str], rows: list[list[str]], said: list[str],
                group: tuple[str, int, int] | None = None) -> list[str]:
    """A ``table`` float: ``caption`` above, a booktabs tabular of ``head`` and
    ``rows`` (LaTeX cells), the first column left-aligned, ``said`` beneath in
    ``\\footnotesize``; ``group``: a head over columns first..last (counted from 1).
    The caption, heads and notes are text, escaped here."""
    lines = [r"\begin{table}[tp]", r"\centering", rf"\caption{{{latex_text(caption)}}}",
             r"\smallskip", rf"\begin{{tabular}}{{l{'c' * (len(head) - 1)}}}", r"\toprule"]
    if group:
        name, first, last = group
        cells = ([""] * (first - 1)
                 + [rf"\multicolumn{{{last - first + 1}}}{{c}}{{{latex_text(name)}}}"]
                 + [""] * (len(head) - last))
        lines += [" & ".join(cells) + r" \\", rf"\cmidrule(lr){{{first}-{last}}}"]
    lines += [" & ".join(latex_text(h) for h in head) + r" \\", r"\midrule",
              *(" & ".join(row) + r" \\" for row in rows), r"\bottomrule", r"\end{tabular}"]
    if said:
        lines += [r"\par\smallskip", r"\begin{minipage}{\linewidth}\footnotesize",
                  " ".join(latex_text(s) for s in said), r"\end{minipage}"]
    return [*lines, r"\end{table}", ""]


def compact_header(block: pd.DataFrame) -> list[str]:
    """The paper's columns: the variant, its switches (a tied block's temperature is the
    mask's), n, a tuned block's values, the top-1 columns, Δ top-1, the parameters."""
    columns = ["Variant", *(s.column for s in REGISTRY if not (s.follows and tied(block))),
               "n"]
    columns += ["Tuned values"] if is_tuned(block) else []
    columns.append("Top-1 (%)")
    full = header(block)
    columns += [c for c in (BEST_TOP1, PAPER_COLUMN) if c in full]
    return [*columns, "ΔTop-1 vs ViT", "Params"]


def block_table(key, block: pd.DataFrame, effects: pd.DataFrame, full: bool) -> list[str]:
    """A block's table: every column of the Markdown table (``full``), or the paper's
    (:func:`compact_header`), whose n counts the completed runs only."""
    names = header(block) if full else compact_header(block)
    rows = display_rows(block, LATEX, names)
    if not full:
        at = names.index("n")
        for row, n in zip(rows, block["n"]):
            row[at] = str(n)
    grouped = [i for i, name in enumerate(names, start=1) if name in GROUPED_HEADS]
    group = (TOP1_GROUP, grouped[0], grouped[-1]) if shows_best_epoch(block) and not full \
        else None
    architecture = block_architecture(block)
    head = [GROUPED_HEADS[name] if group and name in GROUPED_HEADS
            else own_name(name if full else COMPACT_HEADS.get(name, name), architecture)
            for name in names]
    said = notes(block, compact=not full)
    said += [] if full or not tied(block) else [TIED_NOTE]
    said += [NOT_ESTIMABLE_NOTE] if not_estimable(effects, key) else []
    return float_table(short_caption(block, block_title(*key), full), head, rows, said, group)


def effects_float(key, mine: pd.DataFrame, what: str, head: list[str], measures,
                  said: list[str]) -> list[str]:
    """A block's factorial effects on ``what``: ``head``, a row per term of each measure
    (stem, decimals), ``said`` beneath."""
    seeds = int(mine["seeds"].iloc[0])
    caption = (f"Factorial effects of the switches on {what}: {block_title(*key)}; "
               f"{seeds} seed{'s' if seeds != 1 else ''}.")
    return float_table(caption, head, effect_rows(mine, LATEX, measures), said)


def factorial_table(key, mine: pd.DataFrame, full: bool) -> list[str]:
    metrics = ("top1", "top5") if full else ("top1",)
    said = [factorial_note(mine), factorial_caption(mine, metrics)]
    return effects_float(key, mine, f"test {'top-1 and top-5' if full else 'top-1'} "
                         "(percentage points)", FACTORIAL_HEADER[:1 + len(metrics)],
                         [(m, 2) for m in metrics], [s for s in said if s])


def comparison(table: pd.DataFrame, effects: pd.DataFrame, full: bool = False) -> str:
    """Every block's table, then its factorial effects where it has them."""
    out = ["% Each block compares runs of one dataset, model, protocol and setting; the "
           "notes beneath its table say how to read it.", ""]
    for key, block in table.groupby(BLOCK, sort=False):
        out += block_table(key, block, effects, full)
        mine = select_block(effects, key)
        if not mine.empty:
            out += factorial_table(key, mine, full)
    return "\n".join(out)


def document(table: pd.DataFrame, effects: pd.DataFrame, locality_text: str,
             full: bool = False) -> str:
    """The whole file: the packages it needs, the comparison, the locality section."""
    what = ("every column, for an appendix" if full
            else "the tables a paper prints; every column is in comparison_full.tex")
    preamble = (f"% Needs \\usepackage{{{','.join(LATEX_PACKAGES)}}}: pure ASCII, {what}; "
                "a wide table can go in table* or on a landscape page.")
    return "\n".join([preamble, comparison(table, effects, full), locality_text])
