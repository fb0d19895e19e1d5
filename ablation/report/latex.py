"""The comparison as LaTeX a paper prints: ``comparison.tex`` and ``comparison_full.tex``.

``comparison.tex`` holds, per block, the table a paper prints: the variant, the
switches it turns on (a tied block, whose temperature follows the mask, shows
SPT and LSA only), n, top-1 mean ± sd (under the official protocol the
best-epoch top-1 and the paper's beside it, the three under one head), Δ top-1
[95 % CI] (bold where the Holm-corrected test is significant), the parameters,
and a tuned block's chosen values; then the block's factorial effects on top-1;
then the locality tables (:func:`ablation.report.locality_table.latex`).
``comparison_full.tex`` holds every column of the Markdown table and the
factorial effects on top-5 too, for an appendix, ``\\small``.

Each table's caption says what the block is (dataset, model, protocol, setting)
and what its numbers are (:func:`ablation.report.captions.short_caption`); the
statistics (the paired t-interval, Holm, what one test image is worth, power,
the code: :func:`ablation.report.captions.notes`) are notes beneath it. The
layout, unscaled, is :mod:`ablation.report.latex_layout`'s.

Both files need only the packages their first line names
(:data:`LATEX_PACKAGES`).
"""
from __future__ import annotations

import pandas as pd

from ablation.config.switches import REGISTRY
from ablation.report.captions import (BEST_COLUMNS, factorial_significant, notes,
                                      short_caption, shows_best_epoch)
from ablation.report.escape import latex_text
from ablation.report.latex_layout import (GAP_SPLIT, HEAD_LINE_SQUEEZED, LABEL_WORD, SD_SPLIT,
                                          SQUEEZED, VARIANT_WRAP, Column, float_table,
                                          head_lines)
from ablation.report.render import (LATEX, NOT_ESTIMABLE_NOTE, PAPER_COLUMN, PLAIN,
                                    block_title, factorial_caption, factorial_note, gap,
                                    header, is_tuned, not_estimable, row_cells, select_block)
from ablation.report.tables import BLOCK, tied

# What both files need besides \documentclass{article}: booktabs (the rules) and
# amssymb (\checkmark); the first line of each names them.
LATEX_PACKAGES = ("booktabs", "amssymb")


def preamble(full: bool) -> str:
    what = ("every column, for an appendix" if full
            else "the tables a paper prints; every column is in comparison_full.tex")
    return (f"% Needs \\usepackage{{{','.join(LATEX_PACKAGES)}}}: pure ASCII, {what}; "
            "no table is scaled.")


# --- the comparison ----------------------------------------------------------------

BEST_TOP1 = next(iter(BEST_COLUMNS))
# the compact table's heads where they differ from the Markdown's
COMPACT_HEADS = {"ΔTop-1 vs ViT": ("ΔTop-1 (pp)", "[95 % CI]")}
# under the official protocol: three top-1 columns under one head
TOP1_GROUP = "Top-1 (%)"
GROUPED_HEADS = {"Top-1 (%)": ("final",), BEST_TOP1: ("best", "epoch"), PAPER_COLUMN: ("paper",)}
GAPS = ("ΔTop-1 vs ViT", "ΔTop-5 vs ViT")
ACCURACIES = ("Top-1 (%)", "Top-5 (%)", *BEST_COLUMNS)
TUNED_WRAP, TUNED_WRAP_SQUEEZED = 90.0, 55.0  # pt
TUNED_WORD = 8  # a tuned key's name may break after its punctuation past this length


def title(key) -> str:
    """The block's title as LaTeX, its setting label free to break."""
    return latex_text(block_title(*key), long_word=LABEL_WORD)


def compact_header(block: pd.DataFrame) -> list[str]:
    """The paper's columns: the variant, the switches it turns on (a tied block's
    temperature is the mask's), n, a tuned block's values, top-1 (and the best
    epoch's and the paper's under the official protocol), Δ top-1, the parameters."""
    columns = ["Variant", *(s.column for s in REGISTRY if not (s.follows and tied(block))),
               "n"]
    columns += ["Tuned values"] if is_tuned(block) else []
    columns.append("Top-1 (%)")
    full = header(block)
    columns += [c for c in (BEST_TOP1, PAPER_COLUMN) if c in full]
    return [*columns, "ΔTop-1 vs ViT", "Params"]


def _kind(name: str) -> dict:
    """How a column of the comparison may be squeezed (:class:`Column`)."""
    if name == "Variant":
        return {"align": "l", "wrap_squeezed": VARIANT_WRAP}
    if name in GAPS:
        return {"split": GAP_SPLIT, "split_level": 1}
    if name in ACCURACIES:
        return {"split": SD_SPLIT, "split_level": SQUEEZED}
    if name == "Tuned values":
        return {"wrap": TUNED_WRAP, "wrap_squeezed": TUNED_WRAP_SQUEEZED}
    return {}


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
        squeezed = head_lines(name, HEAD_LINE_SQUEEZED)
        if squeezed == (name,) and name.endswith(" (%)"):  # the unit under its name
            squeezed = (name[:-4], "(%)")
        if full:
            head = head_lines(name)
        elif group:
            head = squeezed = GROUPED_HEADS[name]
        elif name in COMPACT_HEADS:
            head = squeezed = COMPACT_HEADS[name]
        else:
            head = head_lines(name)
        columns.append(Column(head, latex_cells, plain_cells,
                              [name in latex[1] for latex, _, _ in rows], group=group,
                              head_squeezed=squeezed if squeezed != head else None,
                              **_kind(name)))
    return columns


def _tied_sentence(block: pd.DataFrame) -> list[str]:
    if not tied(block):
        return []
    return [r"LSA \checkmark: the diagonal mask and the learnable temperature together "
            "(the temperature follows the mask in every run of this block)."]


def block_notes(block: pd.DataFrame, key, effects: pd.DataFrame, full: bool) -> list[str]:
    said = [latex_text(s) for s in notes(block, compact=not full)]
    said += [] if full else _tied_sentence(block)
    if not_estimable(effects, key):
        said.append(latex_text(NOT_ESTIMABLE_NOTE))
    return said


def factorial_columns(mine: pd.DataFrame, full: bool) -> list[Column]:
    metrics = ("top1", "top5") if full else ("top1",)
    terms = [t.replace(" x ", " × ") for t in mine["term"]]
    columns = [Column(("Term",), [LATEX.escape(t) for t in terms], terms, align="l",
                      wrap_squeezed=VARIANT_WRAP)]
    for metric in metrics:
        name = {"top1": "top-1", "top5": "top-5"}[metric]
        columns.append(Column((f"Effect on {name}", "(pp) [95 % CI]"),
                              _gap_texts(mine, metric, LATEX), _gap_texts(mine, metric, PLAIN),
                              [factorial_significant(r, metric) for _, r in mine.iterrows()],
                              split=GAP_SPLIT))
    return columns


def _gap_texts(mine: pd.DataFrame, metric: str, style) -> list[str]:
    return [gap(r[f"{metric}_effect"], r[f"{metric}_low"], r[f"{metric}_high"], style)
            for _, r in mine.iterrows()]


def factorial_table(key, mine: pd.DataFrame, full: bool) -> list[str]:
    metrics = "top-1 and top-5" if full else "top-1"
    seeds = int(mine["seeds"].iloc[0])
    caption = (f"Factorial effects of the switches on test {metrics} (percentage points): "
               f"{title(key)}; {seeds} seed{'s' if seeds != 1 else ''}.")
    continued = f"Factorial effects: {title(key)} (continued)."
    said = [factorial_note(mine),
            factorial_caption(mine, ("top1", "top5") if full else ("top1",))]
    return float_table(caption, factorial_columns(mine, full),
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
    return "\n".join([preamble(full), comparison(table, effects, full), locality_text])
