"""The comparison as text people paste: Markdown, LaTeX, HTML, and CSV.

Percentages have two decimals as papers print them. Bold carries
information, never rank: a Δ is bold when its paired t-test is significant
at 5 % after Holm's correction across the block's Δ rows (the interval shown
is the uncorrected 95 % one). Each block's caption
(:mod:`ablation.report.captions`) says what one test image is worth in points,
so a reader can tell a gap of a few images from a real one.

Names from the records (dataset, model, setting, code) are escaped for each
format (:mod:`ablation.report.escape`): they print as text in Markdown, LaTeX
and HTML and never act on the reader. The cells are made here for every format
(:func:`row_cells`); the LaTeX tables, laid out to fit a paper's text width, are
:mod:`ablation.report.latex`'s.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass

import pandas as pd

from ablation.config.switches import BASELINE_LABEL, REGISTRY
from ablation.report import power
from ablation.report.captions import (  # noqa: F401 - caption, image_worth: used from here
    BEST_COLUMNS, FACTORIAL_NOTE, GAPS, SPEED_MARK, caption, image_worth, shows_best_epoch,
    factorial_significant, significant, speed_shown)
from ablation.report.escape import latex_text, markdown_text
from ablation.report.tables import BLOCK
from ablation.report.tuned_block import values_text

HEADER = ["Variant", *(s.column for s in REGISTRY), "n", "Top-1 (%)", "Top-5 (%)",
          "ΔTop-1 vs ViT", "ΔTop-5 vs ViT", "Params", "Train img/s", "Train time"]
# Params: trainable parameters (the normalisation layer's statistics are not).


TUNED_COLUMNS = ("Tuned values", "Best val top-1 (%)", "Trials")
PAPER_COLUMN = "Paper top-1 (%)"


def header(block: pd.DataFrame) -> list[str]:
    """The block's columns: best-epoch accuracies beside the final-epoch ones where
    the block has them (official protocol); the paper's top-1 beside the measured
    one (best-epoch, official protocol) where the preset names it; a tuned block's
    search after the switches."""
    columns = list(HEADER)
    if shows_best_epoch(block):
        at = columns.index("Top-5 (%)") + 1
        columns[at:at] = list(BEST_COLUMNS)
    if shows_best_epoch(block) and "paper_top1" in block and block["paper_top1"].notna().any():
        # the paper's measure: beside the best-epoch top-1, never the final-epoch one
        columns.insert(columns.index(next(iter(BEST_COLUMNS))) + 1, PAPER_COLUMN)
    if is_tuned(block):
        at = columns.index("n")
        columns[at:at] = list(TUNED_COLUMNS)
    return columns


def is_tuned(block: pd.DataFrame) -> bool:
    return "tuning" in block and block["tuning"].map(lambda e: isinstance(e, dict)).any()


@dataclass(frozen=True)
class Style:
    on: str
    off: str
    dash: str
    pm: str
    bold: str  # a format string with {}
    escape: callable = staticmethod(lambda s: s)
    signed: callable = staticmethod(lambda s: s)  # a signed number, "+1.23" / "-1.23"


def _math(number: str) -> str:
    """A signed number in math mode: the minus a minus sign, not a hyphen."""
    return f"${number}$"


MARKDOWN = Style("✓", "", "—", "±", "**{}**", staticmethod(markdown_text))
# \boldmath: bold reaches the numbers set in math mode (the signs)
LATEX = Style(r"\checkmark", "", "--", r"$\pm$", r"\textbf{{\boldmath {}}}",
              staticmethod(latex_text), staticmethod(_math))
HTML = Style("✓", "", "—", "±", "<b>{}</b>", staticmethod(html.escape))
# as printed, for measuring a LaTeX cell's width (ablation.report.latex_layout)
PLAIN = Style("✓", "", "–", "±", "{}", staticmethod(lambda s: s),
              staticmethod(lambda s: s.replace("-", "−", 1)))


def _finite(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def _signed(x: float, decimals: int = 2) -> str:
    """+1.23 / -1.23 with the value's own sign: -0.00 is a small negative number (a
    bound just below zero), +0.00 zero or a small positive one. Values that are zero
    up to floating-point round-off are exactly 0 by then (:func:`stats.clean_zero`)."""
    return f"{'-' if x < 0 else '+'}{abs(x):.{decimals}f}"


def pct(mean, std, style: Style) -> str:
    if not _finite(mean):
        return style.dash
    return f"{mean:.2f} {style.pm} {std:.2f}" if _finite(std) else f"{mean:.2f}"


def gap(value, low, high, style: Style, decimals: int = 2) -> str:
    """``+1.23 [+0.45, +2.01]``. An interval that has a spread but would print as one
    value (``[+0.00, +0.00]``, which reads as no spread) gets the decimals it needs."""
    if not _finite(value):
        return style.dash
    if _finite(low) and _finite(high) and high > low:
        while decimals < 6 and round(low, decimals) == round(high, decimals):
            decimals += 1
    text = style.signed(_signed(value, decimals))
    return (f"{text} [{style.signed(_signed(low, decimals))}, "
            f"{style.signed(_signed(high, decimals))}]" if _finite(low) else text)


def params(n) -> str:
    if not _finite(n):
        return ""
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else str(int(n))


def duration(seconds) -> str:
    if not _finite(seconds):
        return ""
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.2f} h"


def block_title(dataset, model, protocol, setting) -> str:
    return (f"{dataset} × {model}, {protocol} protocol"
            + (f" ({setting})" if setting else ""))


def row_cells(r, style: Style) -> tuple[dict[str, str], set[str]]:
    """One comparison row's cell for every column any table shows, by column name,
    and the columns whose cell is bold (a Δ whose Holm-corrected test is significant;
    the bold is left to the caller)."""
    mark = lambda on: style.on if on else style.off  # noqa: E731
    n = str(r["n"]) + "".join(f" (+{r[f'n_{what}']} {what})"
                              for what in ("failed", "interrupted") if r.get(f"n_{what}"))
    if r["status"] != "ok":
        top1 = top5 = r["status"]
    else:
        top1 = pct(r["top1_mean"], r["top1_std"], style)
        top5 = pct(r["top5_mean"], r["top5_std"], style)
    is_base = r["variant"] == BASELINE_LABEL
    cells = {
        "Variant": style.escape(r["variant"]),
        **{s.column: mark(r[s.key]) for s in REGISTRY}, "n": style.escape(n),
        "Top-1 (%)": top1, "Top-5 (%)": top5,
        "ΔTop-1 vs ViT": "ref." if is_base else gap(r["d_top1"], r["d_top1_low"],
                                                    r["d_top1_high"], style),
        "ΔTop-5 vs ViT": "ref." if is_base else gap(r["d_top5"], r["d_top5_low"],
                                                    r["d_top5_high"], style),
        "Params": (params(r["trainable_params"]) if _finite(r["trainable_params"])
                   else params(r["params"]) + ("*" if _finite(r["params"]) else "")),
        "Train img/s": (style.dash + style.escape(SPEED_MARK) if not speed_shown(r)
                        else f"{r['images_per_s']:,.0f}" if _finite(r["images_per_s"])
                        else ""),
        "Train time": duration(r["train_seconds"]),
    }
    cells[PAPER_COLUMN] = f"{r['paper_top1']:.2f}" if _finite(r.get("paper_top1")) else ""
    cells["Tuned values"] = style.escape(values_text(r.get("tuned_values")))
    cells["Best val top-1 (%)"] = (f"{r['tuned_val_top1']:.2f}"
                                   if _finite(r.get("tuned_val_top1")) else "")
    cells["Trials"] = (f"{int(r['tuned_trials'])} of {int(r['tuned_budget'])}"
                       if _finite(r.get("tuned_budget")) else "")
    for col, src in BEST_COLUMNS.items():
        cells[col] = (pct(r.get(f"{src}_mean"), r.get(f"{src}_std"), style)
                      if r["status"] == "ok" else r["status"])
    bold = {col for col, src in GAPS.items() if not is_base and significant(r, src)}
    return cells, bold


def display_rows(block: pd.DataFrame, style: Style) -> list[list[str]]:
    """The block's rows as display strings; a Δ bold where its Holm-corrected test is
    significant."""
    rows = []
    for _, r in block.iterrows():
        cells, bold = row_cells(r, style)
        rows.append([style.bold.format(cells[h]) if h in bold else cells[h]
                     for h in header(block)])
    return rows


def _factorial_rows(effects: pd.DataFrame, style: Style) -> list[list[str]]:
    rows = []
    for _, r in effects.iterrows():
        row = [style.escape(r["term"].replace(" x ", " × "))]
        for metric in ("top1", "top5"):
            text = gap(r[f"{metric}_effect"], r[f"{metric}_low"], r[f"{metric}_high"], style)
            row.append(style.bold.format(text) if factorial_significant(r, metric) else text)
        rows.append(row)
    return rows


def factorial_caption(effects: pd.DataFrame, metrics=("top1", "top5")) -> str:
    """What is particular to one block's effects (on ``metrics``, those shown):
    zero-wide intervals and its power."""
    parts = []
    if effects[[f"{m}_no_spread" for m in metrics]].fillna(False).to_numpy().any():
        parts.append("[x, x]: the per-seed effects were identical in every seed, so the "
                     "interval has no spread: it measures nothing and is not bold.")
    said = power.factorial_sentence(effects)
    if said:
        parts.append(said)
    return " ".join(parts)


FACTORIAL_HEADER = ["Term", "Effect on top-1 (pp) [95% CI]", "Effect on top-5 (pp) [95% CI]"]
NOTE = ("Each block compares runs of one dataset, model, protocol and setting; "
        "its caption says how to read it.")
NO_INTERVAL_NOTE = ("No interval with one seed: the interval is made of the spread between "
                    "seeds.")


NOT_ESTIMABLE_NOTE = ("Factorial effects left out: no seed has a completed run of every "
                      "variant, so the switches cannot be told apart from the seed.")


def not_estimable(effects: pd.DataFrame, key) -> bool:
    """Whether this block had a factorial whose effects could not be estimated."""
    return tuple(key) in {tuple(k) for k in effects.attrs.get("not_estimable", [])}


def factorial_note(effects: pd.DataFrame) -> str:
    """The effects' footnote; the one-seed remark only where a block really has one seed."""
    one_seed = not effects.empty and bool((effects["seeds"] == 1).any())
    return FACTORIAL_NOTE + (" " + NO_INTERVAL_NOTE if one_seed else "")


def md_table(header, rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def markdown(table: pd.DataFrame, effects: pd.DataFrame) -> str:
    parts = ["# Ablation: top-1 / top-5 against the plain ViT", "", NOTE, ""]
    for key, block in table.groupby(BLOCK, sort=False):
        parts += [f"## {MARKDOWN.escape(block_title(*key))}", "",
                  md_table(header(block), display_rows(block, MARKDOWN)), "",
                  caption(block, MARKDOWN.escape), ""]
        mine = select_block(effects, key)
        if not mine.empty:
            parts += [f"Factorial effects ({mine['seeds'].iloc[0]} seed(s)):", "",
                      md_table(FACTORIAL_HEADER, _factorial_rows(mine, MARKDOWN)), ""]
            said = factorial_caption(mine)
            parts += [said, ""] if said else []
        elif not_estimable(effects, key):
            parts += [NOT_ESTIMABLE_NOTE, ""]
    if not effects.empty:
        parts += [factorial_note(effects), ""]
    return "\n".join(parts)


def select_block(effects: pd.DataFrame, key) -> pd.DataFrame:
    if effects.empty:
        return effects
    mask = True
    for column, value in zip(BLOCK, key):
        mask = mask & (effects[column] == value)
    return effects[mask]


def html_table(header, rows) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>{body}</tbody>\n</table>"


def html_page(table: pd.DataFrame, effects: pd.DataFrame) -> str:
    parts = ["<!doctype html><meta charset='utf-8'><title>vit-ablation report</title>",
             "<style>body{font-family:sans-serif} table{border-collapse:collapse;margin:1em 0}"
             " td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}"
             " td:first-child,th:first-child{text-align:left}</style>",
             f"<h1>Ablation: top-1 / top-5 against the plain ViT</h1><p>{html.escape(NOTE)}</p>"]
    for key, block in table.groupby(BLOCK, sort=False):
        parts += [f"<h2>{html.escape(block_title(*key))}</h2>",
                  html_table(header(block), display_rows(block, HTML)),
                  f"<p>{html.escape(caption(block))}</p>"]
        mine = select_block(effects, key)
        if not mine.empty:
            parts.append(html_table(FACTORIAL_HEADER, _factorial_rows(mine, HTML)))
            said = factorial_caption(mine)
            if said:
                parts.append(f"<p>{html.escape(said)}</p>")
        elif not_estimable(effects, key):
            parts.append(f"<p>{html.escape(NOT_ESTIMABLE_NOTE)}</p>")
    if not effects.empty:
        parts.append(f"<p>{html.escape(factorial_note(effects))}</p>")
    return "\n".join(parts) + "\n"
