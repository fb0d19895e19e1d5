"""The comparison as text people paste: the cells of every format, and the
Markdown and HTML pages.

Bold carries information, never rank: a Δ is bold when its paired t-test is
significant after Holm's correction across the block's Δ rows. Names from the
records are escaped for each format (:mod:`ablation.report.escape`). A page is a
list of elements (:func:`elements`) that :func:`markdown_page` and
:func:`html_page` set; the LaTeX tables are :mod:`ablation.report.latex`'s.
"""
from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from ablation.config.switches import BASELINE_LABEL, REGISTRY, SL_LABEL
from ablation.report import power
from ablation.report.captions import (BEST_COLUMNS, FACTORIAL_NOTE, GAPS, NO_SPREAD_EFFECTS,
                                      SPEED_MARK, block_architecture, finite, is_tuned, notes,
                                      own_name, shows_best_epoch, significant, speed_shown)
from ablation.report.escape import latex_text, markdown_text
from ablation.report.tables import BLOCK
from ablation.report.tuned_block import values_text

# Params: trainable parameters (the normalisation layer's statistics are not).
HEADER = ["Variant", *(s.column for s in REGISTRY), "n", "Top-1 (%)", "Top-5 (%)",
          "ΔTop-1 vs ViT", "ΔTop-5 vs ViT", "Params", "Train img/s", "Train time"]
TUNED_COLUMNS = ("Tuned values", "Best val top-1 (%)", "Trials")
PAPER_COLUMN = "Paper top-1 (%)"
FACTORIAL_HEADER = ["Term", "Effect on top-1 (pp) [95% CI]", "Effect on top-5 (pp) [95% CI]"]
TITLE = "Ablation: top-1 / top-5 against the plain ViT"
NOTE = ("Each block compares runs of one dataset, model, protocol and setting; "
        "its caption says how to read it.")
NO_INTERVAL_NOTE = ("No interval with one seed: the interval is made of the spread between "
                    "seeds.")
NOT_ESTIMABLE_NOTE = ("Factorial effects left out: no seed has a completed run of every "
                      "variant, so the switches cannot be told apart from the seed.")
ACROSS_GROUP = [key for key in BLOCK if key != "model"]
ACROSS_CAPTION = ("Each model against its own plain variant, never another model's: top-1 mean "
                  "± sd over seeds; Δ SL paired by seed within the model [95 % t-interval, "
                  "uncorrected]; main effects from the model's factorial (its block above). "
                  "Nothing is bold here: the corrections are made within each block.")
ACROSS_PAPER_NOTE = ("Paper: the published best-epoch top-1, plain → SL (not a run of this "
                     "suite), beside its final-epoch means.")


def title(table: pd.DataFrame) -> str:
    """The page's title: against the plain model of its one architecture, or of each."""
    kinds = set(table["architecture"])
    return (own_name(TITLE, kinds.pop()) if len(kinds) == 1
            else TITLE.replace("the plain ViT", "each model's plain variant"))


def header(block: pd.DataFrame) -> list[str]:
    """The block's columns: the best-epoch accuracies (and the paper's top-1 beside the
    best-epoch one) under the official protocol; a tuned block's search after the
    switches."""
    columns = list(HEADER)
    if shows_best_epoch(block):
        at = columns.index("Top-5 (%)") + 1
        columns[at:at] = list(BEST_COLUMNS)
        if block["paper_top1"].notna().any():
            columns.insert(columns.index(next(iter(BEST_COLUMNS))) + 1, PAPER_COLUMN)
    if is_tuned(block):
        at = columns.index("n")
        columns[at:at] = list(TUNED_COLUMNS)
    return columns


@dataclass(frozen=True)
class Style:
    on: str  # a switch that is on
    dash: str
    pm: str
    bold: str  # a format string with {}
    escape: Callable[[str], str] = str
    signed: Callable[[str], str] = str  # a signed number, "+1.23" / "-1.23"


MARKDOWN = Style("✓", "—", "±", "**{}**", markdown_text)
# signs in math mode (a minus, not a hyphen); \boldmath: bold reaches them
LATEX = Style(r"\checkmark", "--", r"$\pm$", r"\textbf{{\boldmath {}}}", latex_text,
              lambda number: f"${number}$")
HTML = Style("✓", "—", "±", "<b>{}</b>", html.escape)


def _signed(x: float, decimals: int = 2) -> str:
    """+1.23 / -1.23 with the value's own sign: -0.00 is a small negative number."""
    return f"{'-' if x < 0 else '+'}{abs(x):.{decimals}f}"


def pct(mean, std, style: Style, decimals: int = 2) -> str:
    if not finite(mean):
        return style.dash
    return (f"{mean:.{decimals}f} {style.pm} {std:.{decimals}f}" if finite(std)
            else f"{mean:.{decimals}f}")


def gap(value, low, high, style: Style, decimals: int = 2) -> str:
    """``+1.23 [+0.45, +2.01]``. An interval that has a spread but would print as one
    value (``[+0.00, +0.00]``) gets the decimals it needs."""
    if not finite(value):
        return style.dash
    if finite(low) and finite(high) and high > low:
        while decimals < 6 and round(low, decimals) == round(high, decimals):
            decimals += 1
    text = style.signed(_signed(value, decimals))
    return (f"{text} [{style.signed(_signed(low, decimals))}, "
            f"{style.signed(_signed(high, decimals))}]" if finite(low) else text)


def params(n) -> str:
    if not finite(n):
        return ""
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else str(int(n))


def duration(seconds) -> str:
    if not finite(seconds):
        return ""
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.2f} h"


def block_title(dataset, model, protocol, setting) -> str:
    return (f"{dataset} × {model}, {protocol} protocol"
            + (f" ({setting})" if setting else ""))


def row_cells(r, style: Style) -> tuple[dict[str, str], set[str]]:
    """One comparison row's cell for every column any table shows, by column name,
    and the columns whose cell is bold (the bold is left to the caller)."""
    n = str(r["n"]) + "".join(f" (+{r[f'n_{what}']} {what})"
                              for what in ("failed", "interrupted") if r.get(f"n_{what}"))
    ok = r["status"] == "ok"
    is_base = r["variant"] == BASELINE_LABEL
    cells = {
        "Variant": style.escape(own_name(r["variant"], r["architecture"])),
        **{s.column: style.on if r[s.key] else "" for s in REGISTRY}, "n": style.escape(n),
        **{col: "ref." if is_base else gap(r[src], r[f"{src}_low"], r[f"{src}_high"], style)
           for col, src in GAPS.items()},
        "Params": (params(r["trainable_params"]) if finite(r["trainable_params"])
                   else params(r["params"]) + ("*" if finite(r["params"]) else "")),
        "Train img/s": (style.dash + style.escape(SPEED_MARK) if not speed_shown(r)
                        else f"{r['images_per_s']:,.0f}" if finite(r["images_per_s"])
                        else ""),
        "Train time": duration(r["train_seconds"]),
        PAPER_COLUMN: f"{r['paper_top1']:.2f}" if finite(r.get("paper_top1")) else "",
        "Tuned values": style.escape(values_text(r.get("tuned_values"))),
        "Best val top-1 (%)": (f"{r['tuned_val_top1']:.2f}"
                               if finite(r.get("tuned_val_top1")) else ""),
        "Trials": (f"{int(r['tuned_trials'])} of {int(r['tuned_budget'])}"
                   if finite(r.get("tuned_budget")) else ""),
    }
    for col, src in (("Top-1 (%)", "top1"), ("Top-5 (%)", "top5"),
                     *((col, src) for col, src in BEST_COLUMNS.items())):
        cells[col] = pct(r.get(f"{src}_mean"), r.get(f"{src}_std"), style) if ok \
            else r["status"]
    bold = {col for col, src in GAPS.items() if not is_base and significant(r, src)}
    return cells, bold


def display_rows(block: pd.DataFrame, style: Style, columns=None) -> list[list[str]]:
    """The block's rows as display strings (every column of :func:`header`, or
    ``columns``), a significant Δ bold."""
    rows = []
    for _, r in block.iterrows():
        cells, bold = row_cells(r, style)
        rows.append([style.bold.format(cells[h]) if h in bold else cells[h]
                     for h in columns or header(block)])
    return rows


def effect_rows(effects: pd.DataFrame, style: Style,
                measures=(("top1", 2), ("top5", 2))) -> list[list[str]]:
    """Rows of factorial effects: the term, then each measure's effect [95 % CI] at its
    decimals, bold where significant."""
    rows = []
    for _, r in effects.iterrows():
        row = [style.escape(r["term"].replace(" x ", " × "))]
        for stem, decimals in measures:
            text = gap(r[f"{stem}_effect"], r[f"{stem}_low"], r[f"{stem}_high"], style,
                       decimals)
            row.append(style.bold.format(text) if significant(r, stem) else text)
        rows.append(row)
    return rows


def factorial_caption(effects: pd.DataFrame, metrics=("top1", "top5")) -> str:
    """What is particular to one block's effects (on ``metrics``, those shown):
    zero-wide intervals and its power."""
    no_spread = effects[[f"{m}_no_spread" for m in metrics]].fillna(False).to_numpy().any()
    return " ".join(s for s in ([NO_SPREAD_EFFECTS] if no_spread else [])
                    + [power.factorial_sentence(effects)] if s)


def not_estimable(effects: pd.DataFrame, key) -> bool:
    """Whether this block had a factorial whose effects could not be estimated."""
    return tuple(key) in {tuple(k) for k in effects.attrs.get("not_estimable", [])}


def factorial_note(effects: pd.DataFrame) -> str:
    """The effects' footnote; the one-seed remark only where a block really has one seed."""
    return FACTORIAL_NOTE + (" " + NO_INTERVAL_NOTE if (effects["seeds"] == 1).any() else "")


def select_block(effects: pd.DataFrame, key) -> pd.DataFrame:
    if effects.empty:
        return effects
    return effects[(effects[BLOCK] == list(key)).all(axis=1)]


def elements(table: pd.DataFrame, effects: pd.DataFrame, style: Style) -> list[tuple]:
    """The comparison as a page's elements, its tables' cells in ``style``: ``intro``
    (a title and its note), ``h2``, ``table`` (head, rows), ``p`` (text, or a function
    of the escape for what comes from the records) and ``md`` (Markdown only)."""
    out = [("intro", title(table), NOTE)]
    for key, block in table.groupby(BLOCK, sort=False):
        out += [("h2", block_title(*key)),
                ("table", [own_name(h, block_architecture(block)) for h in header(block)],
                 display_rows(block, style)),
                ("p", lambda escape, block=block: " ".join(notes(block, escape)))]
        mine = select_block(effects, key)
        if not mine.empty:
            out += [("md", f"Factorial effects ({mine['seeds'].iloc[0]} seed(s)):"),
                    ("table", FACTORIAL_HEADER, effect_rows(mine, style))]
            said = factorial_caption(mine)
            out += [("p", said)] if said else []
        elif not_estimable(effects, key):
            out.append(("p", NOT_ESTIMABLE_NOTE))
    if not effects.empty:
        out.append(("p", factorial_note(effects)))
    return out + across_elements(table, effects, style)


def across_elements(table: pd.DataFrame, effects: pd.DataFrame, style: Style) -> list[tuple]:
    """The models side by side, as the paper's table, for each dataset, protocol and
    setting that two models or more ran: a row per model, in the table's order, which is
    the paper's (:func:`ablation.report.tables.blocks`), with its plain and SL top-1, the
    SL gain within that model and the switches' main effects."""
    out = []
    for (dataset, protocol, setting), group in table.groupby(ACROSS_GROUP, sort=False,
                                                             dropna=False):
        if group["model"].nunique() < 2:
            continue
        rows = [_model_summary(mine, select_block(effects, (dataset, model, protocol, setting)))
                for model, mine in group.groupby("model", sort=False)]
        names = list(dict.fromkeys(t for row in rows for t in row["effects"]))  # main effects
        paper = any(r[side] is not None and finite(r[side].get("paper_top1"))
                    for r in rows for side in ("plain", "sl"))
        head = ["Model", "n (plain, SL)", "Top-1 plain (%)", "Top-1 SL (%)", "ΔTop-1 SL (pp)",
                *(f"{name} effect (pp)" for name in names),
                *(["Paper plain → SL (%)"] if paper else [])]
        out += [("h2", f"Across models: {dataset}, {protocol} protocol"
                 + (f" ({setting})" if setting else "")),
                ("table", head, [_across_row(r, names, paper, style) for r in rows]),
                ("p", ACROSS_CAPTION + (" " + ACROSS_PAPER_NOTE if paper else ""))]
    return out


def _model_summary(mine: pd.DataFrame, effects: pd.DataFrame) -> dict:
    """One model's plain and SL comparison rows (None where missing) and its block's
    main effects by term."""
    plain, sl = (mine[mine["variant"] == label] for label in (BASELINE_LABEL, SL_LABEL))
    return {"model": mine["model"].iloc[0], "architecture": mine["architecture"].iloc[0],
            "plain": plain.iloc[0] if len(plain) else None, "sl": sl.iloc[0] if len(sl) else None,
            "effects": {e["term"]: e for _, e in effects.iterrows() if e["order"] == 1}}


def _across_row(r: dict, names: list[str], paper: bool, style: Style) -> list[str]:
    """One model's cells in the summary; a dash where a variant or an effect is missing."""
    plain, sl = r["plain"], r["sl"]

    def top1(x) -> str:
        return (style.dash if x is None else x["status"] if x["status"] != "ok"
                else pct(x["top1_mean"], x["top1_std"], style))

    def interval(x, value: str, stem: str) -> str:  # a gap or an effect, with its CI
        return style.dash if x is None else gap(x[value], x[f"{stem}_low"], x[f"{stem}_high"],
                                                style)

    papers = [f"{x['paper_top1']:.2f}" if x is not None and finite(x.get("paper_top1"))
              else style.dash for x in (plain, sl)]
    return [style.escape(f"{own_name('ViT', r['architecture'])} ({r['model']})"),
            ", ".join(str(x["n"]) if x is not None else style.dash for x in (plain, sl)),
            top1(plain), top1(sl), interval(sl, "d_top1", "d_top1"),
            *(interval(r["effects"].get(name), "top1_effect", "top1") for name in names),
            *([" → ".join(papers)] if paper else [])]


def md_table(head, rows) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def html_table(head, rows) -> str:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>\n<thead><tr>{cells}</tr></thead>\n<tbody>{body}</tbody>\n</table>"


MARKDOWN_SET = {"intro": lambda title, note: f"# {title}\n\n{note}",
                "h2": lambda text: "## " + markdown_text(text), "table": md_table,
                "md": str, "p": lambda p: p if isinstance(p, str) else p(markdown_text)}
HTML_SET = {"intro": lambda title, note: f"<h1>{title}</h1><p>{html.escape(note)}</p>",
            "h2": lambda text: f"<h2>{html.escape(text)}</h2>", "table": html_table,
            "p": lambda p: f"<p>{html.escape(p if isinstance(p, str) else p(str))}</p>"}
HTML_HEAD = ["<!doctype html><meta charset='utf-8'><title>vit-ablation report</title>",
             "<style>body{font-family:sans-serif} table{border-collapse:collapse;margin:1em 0}"
             " td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}"
             " td:first-child,th:first-child{text-align:left}</style>"]


def markdown_page(page: list[tuple]) -> str:
    return "\n".join(line for kind, *data in page for line in (MARKDOWN_SET[kind](*data), ""))


def html_page(page: list[tuple]) -> str:
    return "\n".join([*HTML_HEAD, *(HTML_SET[kind](*data) for kind, *data in page
                                    if kind in HTML_SET)]) + "\n"
