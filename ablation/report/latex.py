"""The comparison as LaTeX a paper prints: ``comparison.tex`` and ``comparison_full.tex``.

``comparison.tex`` holds, per block, the paper's columns (:func:`compact_header`)
and the factorial effects on top-1, then the locality tables;
``comparison_full.tex`` every column of the Markdown table and the effects on
top-5 too, for an appendix. Each table's caption says what the block is and what
its numbers are; the statistics are notes beneath it
(:func:`ablation.report.captions.notes`); the layout is
:mod:`ablation.report.latex_layout`'s.
"""
from __future__ import annotations

import pandas as pd

from ablation.config.switches import REGISTRY
from ablation.report.captions import (BEST_COLUMNS, GAPS, block_architecture, is_tuned, notes,
                                      own_name, short_caption, shows_best_epoch, significant)
from ablation.report.escape import latex_text
from ablation.report.latex_layout import (GAP, HEAD_LINE_SQUEEZED, LABEL_WORD, MEAN_SD,
                                          ROW_NAME, Column, float_table, head_lines)
from ablation.report.render import (LATEX, NOT_ESTIMABLE_NOTE, PAPER_COLUMN, PLAIN,
                                    block_title, effect_rows, factorial_caption,
                                    factorial_note, header, not_estimable, row_cells,
                                    select_block)
from ablation.report.tables import BLOCK, tied

# What both files need besides \documentclass{article}: booktabs (the rules) and
# amssymb (\checkmark); the first line of each names them.
LATEX_PACKAGES = ("booktabs", "amssymb")
BEST_TOP1 = next(iter(BEST_COLUMNS))
# the compact table's heads where they differ from the Markdown's
COMPACT_HEADS = {"ΔTop-1 vs ViT": ("ΔTop-1 (pp)", "[95 % CI]")}
# under the official protocol: three top-1 columns under one head
TOP1_GROUP = "Top-1 (%)"
GROUPED_HEADS = {"Top-1 (%)": ("final",), BEST_TOP1: ("best", "epoch"), PAPER_COLUMN: ("paper",)}
ACCURACIES = ("Top-1 (%)", "Top-5 (%)", *BEST_COLUMNS)
TUNED_WRAP, TUNED_WRAP_SQUEEZED = 90.0, 55.0  # pt
TUNED_WORD = 8  # a tuned key's name may break after its punctuation past this length
TIED_NOTE = (r"LSA \checkmark: the diagonal mask and the learnable temperature together "
             "(the temperature follows the mask in every run of this block).")


def title(key) -> str:
    """The block's title as LaTeX, its setting label free to break."""
    return latex_text(block_title(*key), long_word=LABEL_WORD)


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


def _kind(name: str) -> dict:
    """How a column of the comparison may be squeezed (:class:`Column`)."""
    if name == "Tuned values":
        return {"wrap": TUNED_WRAP, "wrap_squeezed": TUNED_WRAP_SQUEEZED}
    return (ROW_NAME if name == "Variant" else GAP if name in GAPS
            else MEAN_SD if name in ACCURACIES else {})


def block_columns(block: pd.DataFrame, full: bool) -> list[Column]:
    """The block's columns: every one of the Markdown table's (``full``), or the
    paper's (:func:`compact_header`), whose n counts the completed runs only."""
    rows = [(row_cells(r, LATEX), row_cells(r, PLAIN), r) for _, r in block.iterrows()]
    names = header(block) if full else compact_header(block)
    official = shows_best_epoch(block)
    columns = []
    for name in names:
        latex_cells = [latex[0][name] for latex, _, _ in rows]
        plain_cells = [plain[0][name] for _, plain, _ in rows]
        if name == "n" and not full:
            latex_cells = plain_cells = [str(r["n"]) for _, _, r in rows]
        if name == "Tuned values":
            latex_cells = [latex_text(c, long_word=TUNED_WORD) for c in plain_cells]
        group = TOP1_GROUP if official and not full and name in GROUPED_HEADS else None
        shown = own_name(name, block_architecture(block))
        squeezed = head_lines(shown, HEAD_LINE_SQUEEZED)
        if squeezed == (name,) and name.endswith(" (%)"):  # the unit under its name
            squeezed = (name[:-4], "(%)")
        head = GROUPED_HEADS[name] if group else None if full else COMPACT_HEADS.get(name)
        squeezed, head = head or squeezed, head or head_lines(shown)
        columns.append(Column(head, latex_cells, plain_cells,
                              [name in latex[1] for latex, _, _ in rows], group=group,
                              head_squeezed=squeezed if squeezed != head else None,
                              **_kind(name)))
    return columns


def block_notes(block: pd.DataFrame, key, effects: pd.DataFrame, full: bool) -> list[str]:
    said = [latex_text(s) for s in notes(block, compact=not full)]
    said += [] if full or not tied(block) else [TIED_NOTE]
    if not_estimable(effects, key):
        said.append(latex_text(NOT_ESTIMABLE_NOTE))
    return said


def effects_columns(mine: pd.DataFrame, measures, heads) -> list[Column]:
    """A factorial effects table's columns: the term, then each measure's effect
    (``measures``: stem, decimals) under its head (``heads``: lines, squeezed lines)."""
    rows = [effect_rows(mine, style, measures, bold=False) for style in (LATEX, PLAIN)]
    columns = [Column(("Term",), [r[0] for r in rows[0]], [r[0] for r in rows[1]], **ROW_NAME)]
    for i, ((stem, _), (head, squeezed)) in enumerate(zip(measures, heads), start=1):
        columns.append(Column(head, [r[i] for r in rows[0]], [r[i] for r in rows[1]],
                              [significant(r, stem) for _, r in mine.iterrows()],
                              head_squeezed=squeezed, **GAP))
    return columns


def factorial_table(key, mine: pd.DataFrame, full: bool) -> list[str]:
    metrics = "top-1 and top-5" if full else "top-1"
    seeds = int(mine["seeds"].iloc[0])
    caption = (f"Factorial effects of the switches on test {metrics} (percentage points): "
               f"{title(key)}; {seeds} seed{'s' if seeds != 1 else ''}.")
    continued = f"Factorial effects: {title(key)} (continued)."
    said = [factorial_note(mine),
            factorial_caption(mine, ("top1", "top5") if full else ("top1",))]
    names = {"top1": "top-1", "top5": "top-5"}
    measures = [(m, 2) for m in (("top1", "top5") if full else ("top1",))]
    heads = [((f"Effect on {names[m]}", "(pp) [95 % CI]"), None) for m, _ in measures]
    return float_table(caption, effects_columns(mine, measures, heads),
                       [latex_text(s) for s in said if s], full, continued)


def comparison(table: pd.DataFrame, effects: pd.DataFrame, full: bool = False) -> str:
    """Every block's table, then its factorial effects where it has them."""
    out = ["% Each block compares runs of one dataset, model, protocol and setting; the "
           "notes beneath its table say how to read it.", ""]
    for key, block in table.groupby(BLOCK, sort=False):
        caption = latex_text(short_caption(block, block_title(*key), full),
                             long_word=LABEL_WORD)
        out += float_table(caption, block_columns(block, full),
                           block_notes(block, key, effects, full), full,
                           continued=f"{title(key)} (continued).")
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
                "no table is scaled.")
    return "\n".join([preamble, comparison(table, effects, full), locality_text])
