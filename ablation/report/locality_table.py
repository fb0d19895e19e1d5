"""The report's Locality section: is the attention more local with SPT and LSA?

Reads each run's ``diagnostics`` (see :mod:`ablation.train.locality_probe`) and its
``attention_maps.npz``; runs without them (older records, or
``diagnostics.enabled=false``) are simply left out of this section. Gives:

- :func:`locality_table`: per block and variant, the mean attention distance
  (px) and normalised entropy averaged over layers and heads, mean ± sd over
  seeds, and Δ vs the block's ViT paired by seed with the same interval as
  accuracy (:func:`ablation.report.stats.paired_gap`);
- :func:`locality_effects`: the switches' factorial effects on both
  (:func:`ablation.report.stats.factorial_effects`);
- the figures (:mod:`ablation.report.locality_plots`): distance and entropy
  per layer (each head a dot, one colour per variant), and centre-patch
  attention maps over the probe images.
"""
from __future__ import annotations

import html
import logging

import numpy as np
import pandas as pd

from ablation.config import SWITCHES
from ablation.config.switches import BASELINE_LABEL, factor_labels
from ablation.report import latex_layout as tex
from ablation.report.captions import factorial_significant
from ablation.report.escape import latex_text
from ablation.report.render import (HTML, LATEX, MARKDOWN, PLAIN, Style, block_title, gap,
                                    html_table, md_table, select_block)
from ablation.report.stats import factorial_effects, paired_gap
from ablation.report.tables import (BASELINE, BLOCK, VARIANTS, switch_key, blocks,
                                    expected_variants, factorial_design)

log = logging.getLogger(__name__)

# record quantity -> (column stem, display name, decimals)
MEASURES = {"mean_distance_px": ("distance", "Mean distance (px)", 2),
            "normalized_entropy": ("entropy", "Norm. entropy", 3)}
NOTE = ("Locality, on the same probe test images for every run: mean attention distance in "
        "input pixels (patch centres, class token left out; Dosovitskiy et al. 2021, Fig. 7) "
        "and attention entropy normalised by ln(keys attended) (1 = uniform), each averaged "
        "over layers and heads; mean ± sd over seeds; Δ paired by seed against the plain ViT "
        "with the same interval as accuracy. The paper's claim: SPT and LSA make attention "
        "more local (lower distance) and LSA's temperature sharper (lower entropy). "
        "Mind that the LSA mask moves the weight a token gave itself (distance 0) onto "
        "other patches, which raises the mean distance by itself.")


def with_diagnostics(runs: pd.DataFrame) -> pd.DataFrame:
    """Completed runs that carry diagnostics, with ``distance``/``entropy`` columns
    (means over layers and heads) and ``diagnostics`` (the record's entry)."""
    done = runs[(runs["status"] == "completed") & runs["diagnostics"].notna()].copy()
    for quantity, (stem, _, _) in MEASURES.items():
        done[stem] = [d["summary"][quantity] for d in done["diagnostics"]]
    return done


def locality_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per block and variant (blocks holding diagnostics only)."""
    diag = with_diagnostics(runs)
    rows = []
    for key, block in blocks(runs):
        info = dict(zip(BLOCK, key))
        mine = diag.loc[diag.index.intersection(block.index)]
        if mine.empty:
            continue
        keys = switch_key(mine)
        base = mine[keys == BASELINE].set_index("seed")
        for variant in expected_variants(block):
            ok = mine[keys == variant].set_index("seed")
            row = {**info,
                   "variant": VARIANTS[variant], **dict(zip(SWITCHES, variant)), "n": len(ok)}
            for stem, _, _ in MEASURES.values():
                row[f"{stem}_mean"] = ok[stem].mean() if len(ok) else np.nan
                row[f"{stem}_std"] = ok[stem].std(ddof=1) if len(ok) > 1 else np.nan
                g = ({"gap": np.nan, "low": np.nan, "high": np.nan}
                     if variant == BASELINE or base.empty or not len(ok)
                     else paired_gap(ok[stem], base[stem]))
                row[f"d_{stem}"], row[f"d_{stem}_low"], row[f"d_{stem}_high"] = (
                    g["gap"], g["low"], g["high"])
            rows.append(row)
    return pd.DataFrame(rows)


def locality_effects(runs: pd.DataFrame) -> pd.DataFrame:
    """Factorial effects of the switches on distance and entropy, per block with a full design."""
    diag = with_diagnostics(runs)
    out = []
    for key, block in blocks(diag):
        factors = factorial_design(block)
        if factors is None:
            continue
        table = None
        fitted = [factorial_effects(block, factors, stem) for stem, _, _ in MEASURES.values()]
        if any(e is None for e in fitted):  # confounded with the seed: not estimable
            log.warning("%s: locality effects left out: no seed has every variant",
                        " x ".join(str(k) for k in key if k))
            continue
        for (stem, _, _), effects in zip(MEASURES.values(), fitted):
            effects = effects.set_index("term")
            if table is None:
                table = effects[["order"]].copy()
            for col in ("effect", "low", "high", "p_value", "p_holm", "sd", "no_spread"):
                table[f"{stem}_{col}"] = effects[col]
        table = table.reset_index()
        labels = factor_labels(factors)
        table["term"] = [" × ".join(labels[f] for f in t.split(" x ")) for t in table["term"]]
        for i, (name, value) in enumerate(zip(BLOCK, key)):
            table.insert(i, name, value)
        table["seeds"] = fitted[0]["seeds"].to_numpy()
        out.append(table)
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


# --- text ------------------------------------------------------------------------

HEADER = ["Variant", "n", *(f"{name}" for _, name, _ in MEASURES.values()),
          *(f"Δ{name} vs ViT" for _, name, _ in MEASURES.values())]
EFFECTS_HEADER = ["Term", *(f"Effect on {name[0].lower() + name[1:]} [95% CI]"
                            for _, name, _ in MEASURES.values())]


def _fmt(x, decimals: int) -> str:
    return "" if x is None or not np.isfinite(x) else f"{x:.{decimals}f}"


def _display_rows(block: pd.DataFrame, style: Style) -> list[list[str]]:
    rows = []
    for _, r in block.iterrows():
        cells = [style.escape(r["variant"]), str(r["n"])]
        for stem, _, d in MEASURES.values():
            mean, std = _fmt(r[f"{stem}_mean"], d), _fmt(r[f"{stem}_std"], d)
            cells.append(style.dash if not mean else f"{mean} {style.pm} {std}" if std else mean)
        for stem, _, d in MEASURES.values():
            if r["variant"] == BASELINE_LABEL:
                cells.append("ref.")
            elif not np.isfinite(r[f"d_{stem}"]):
                cells.append(style.dash)
            else:  # distances in pixels to 2 decimals, entropies to 3
                cells.append(gap(r[f"d_{stem}"], r[f"d_{stem}_low"], r[f"d_{stem}_high"],
                                 style, d))
        rows.append(cells)
    return rows


def _effect_rows(effects: pd.DataFrame, style: Style, bold: bool = True) -> list[list[str]]:
    """Rows of effects; ``bold`` marks the significant ones in the text itself (the
    LaTeX table marks them through its columns instead, see :func:`_bold_flags`)."""
    rows = []
    for _, r in effects.iterrows():
        cells = [style.escape(r["term"])]
        for stem, _, d in MEASURES.values():
            text = gap(r[f"{stem}_effect"], r[f"{stem}_low"], r[f"{stem}_high"], style, d)
            marked = bold and factorial_significant(r, stem)
            cells.append(style.bold.format(text) if marked else text)
        rows.append(cells)
    return rows


def _bold_flags(effects: pd.DataFrame) -> list[list[bool]]:
    """Per column of the effects table (the term's first): which cells are bold."""
    return [[False] * len(effects), *([factorial_significant(r, stem)
                                       for _, r in effects.iterrows()]
                                      for stem, _, _ in MEASURES.values())]


EFFECTS_NOTE = ("Effects as for accuracy: each computed within each seed from its variants, "
                "with the 95 % t-interval over the seeds (n − 1 df, uncorrected); bold: "
                "significant at 5 % after Holm's correction across the block's terms of that "
                "measure.")
NO_SPREAD_NOTE = ("[x, x]: the per-seed effects were identical in every seed, so the interval "
                  "has no spread: it measures nothing and is not bold.")


def effects_notes(effects: pd.DataFrame) -> list[str]:
    """What is printed beneath a block's locality effects."""
    spread = [f"{stem}_no_spread" for stem, _, _ in MEASURES.values()]
    none = effects[spread].fillna(False).to_numpy().any()
    return [EFFECTS_NOTE, *([NO_SPREAD_NOTE] if none else [])]


def _sections(table: pd.DataFrame, effects: pd.DataFrame):
    for key, block in table.groupby(BLOCK, sort=False):
        yield key, block, select_block(effects, key)


def markdown(table: pd.DataFrame, effects: pd.DataFrame) -> str:
    """The Locality section (empty when no run carries diagnostics)."""
    if table.empty:
        return ""
    parts = ["", "# Locality", "", NOTE, ""]
    for key, block, mine in _sections(table, effects):
        parts += [f"## Locality: {MARKDOWN.escape(block_title(*key))}", "",
                  md_table(HEADER, _display_rows(block, MARKDOWN)), ""]
        if not mine.empty:
            parts += [f"Factorial effects on locality ({mine['seeds'].iloc[0]} seed(s)):", "",
                      md_table(EFFECTS_HEADER, _effect_rows(mine, MARKDOWN)), "",
                      " ".join(effects_notes(mine)), ""]
    return "\n".join(parts)


def html_section(table: pd.DataFrame, effects: pd.DataFrame) -> str:
    if table.empty:
        return ""
    parts = [f"<h1>Locality</h1><p>{html.escape(NOTE)}</p>"]
    for key, block, mine in _sections(table, effects):
        parts += [f"<h2>Locality: {html.escape(block_title(*key))}</h2>",
                  html_table(HEADER, _display_rows(block, HTML))]
        if not mine.empty:
            parts.append(html_table(EFFECTS_HEADER, _effect_rows(mine, HTML)))
            parts.append(f"<p>{html.escape(' '.join(effects_notes(mine)))}</p>")
    return "\n".join(parts) + "\n"


LOCALITY_CAPTION = ("Attention locality: {title}. Mean attention distance (px) and "
                    "normalised attention entropy of each variant, mean ± sd over n seeds, "
                    "and their gaps to the plain ViT paired by seed [95 % CI].")
EFFECTS_CAPTION = ("Factorial effects of the switches on attention locality: {title}; "
                   "{seeds} seed{s}.")


def _columns(heads: list[str], latex_rows: list[list[str]], plain_rows: list[list[str]],
             gaps_from: int, means: tuple[int, ...] = (),
             bold: list[list[bool]] | None = None) -> list[tex.Column]:
    """Table columns from rows of cells: the first names the row, those from
    ``gaps_from`` on are gaps (their intervals may go under them), ``means`` are
    mean ± sd."""
    def kind(i):
        if i == 0:
            return {"align": "l", "wrap_squeezed": tex.VARIANT_WRAP}
        if i >= gaps_from:
            return {"split": tex.GAP_SPLIT}
        return {"split": tex.SD_SPLIT, "split_level": tex.SQUEEZED} if i in means else {}

    return [tex.Column(tex.head_lines(head), [row[i] for row in latex_rows],
                       [row[i] for row in plain_rows], bold[i] if bold else [],
                       head_squeezed=tex.head_lines(head, tex.HEAD_LINE_SQUEEZED), **kind(i))
            for i, head in enumerate(heads)]


def latex(table: pd.DataFrame, effects: pd.DataFrame) -> str:
    """The Locality section's tables (the same in comparison.tex and
    comparison_full.tex): each with its explanation (:data:`NOTE`) as notes beneath,
    and its factorial effects where the block has them."""
    if table.empty:
        return ""
    out = []
    for key, block, mine in _sections(table, effects):
        title = block_title(*key)
        caption = lambda text: latex_text(text, long_word=tex.LABEL_WORD)  # noqa: E731
        out += tex.float_table(
            caption(LOCALITY_CAPTION.format(title=title)),
            _columns(HEADER, _display_rows(block, LATEX), _display_rows(block, PLAIN),
                     2 + len(MEASURES), tuple(range(2, 2 + len(MEASURES)))),
            [latex_text(NOTE)], continued=caption(f"Attention locality: {title} (continued)."))
        if not mine.empty:
            seeds = int(mine["seeds"].iloc[0])
            out += tex.float_table(
                caption(EFFECTS_CAPTION.format(title=title, seeds=seeds,
                                               s="s" if seeds != 1 else "")),
                _columns(EFFECTS_HEADER, _effect_rows(mine, LATEX, bold=False),
                         _effect_rows(mine, PLAIN, bold=False), 1, bold=_bold_flags(mine)),
                [latex_text(n) for n in effects_notes(mine)],
                continued=caption(f"Factorial effects on attention locality: {title} "
                                  "(continued)."))
    return "\n".join(out)
