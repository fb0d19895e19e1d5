"""The report's Locality section: is the attention more local with SPT and LSA?

From each completed run's ``diagnostics`` (:mod:`ablation.train.locality_probe`;
runs without them are left out): per block and variant the mean attention
distance and normalised entropy, mean ± sd over seeds with Δ vs the ViT paired by
seed (:func:`locality_table`), and the switches' factorial effects on both
(:func:`locality_effects`). The figures are :mod:`ablation.report.locality_plots`'.
"""
from __future__ import annotations

import logging

import pandas as pd

from ablation.config import SWITCHES
from ablation.config.choices import ARCHITECTURES
from ablation.config.switches import BASELINE_LABEL
from ablation.report.captions import NO_SPREAD_EFFECTS, block_architecture, own_name
from ablation.report.latex import effects_float, float_table
from ablation.report.render import LATEX, Style, block_title, effect_rows, gap, pct, select_block
from ablation.report.tables import (BASELINE, BLOCK, VARIANTS, blocks, effects_table,
                                    expected_variants, factorial_design, summarise, switch_key)

log = logging.getLogger(__name__)

# record quantity -> (column stem, display name, decimals)
MEASURES = {"mean_distance_px": ("distance", "Mean distance (px)", 2),
            "normalized_entropy": ("entropy", "Norm. entropy", 3)}
DECIMALS = [(stem, d) for stem, _, d in MEASURES.values()]
NOTE = ("Locality, on the same probe test images for every run: mean attention distance in "
        "input pixels (patch centres, class token left out; Dosovitskiy et al. 2021, Fig. 7) "
        "and attention entropy normalised by ln(keys attended) (1 = uniform), each averaged "
        "over layers and heads; mean ± sd over seeds; Δ paired by seed against the plain ViT "
        "with the same interval as accuracy. The paper's claim: SPT and LSA make attention "
        "more local (lower distance) and LSA's temperature sharper (lower entropy). "
        "Mind that the LSA mask moves the weight a token gave itself (distance 0) onto "
        "other patches, which raises the mean distance by itself.")
HEADER = ["Variant", "n", *(name for _, name, _ in MEASURES.values()),
          *(f"Δ{name} vs ViT" for _, name, _ in MEASURES.values())]
EFFECTS_HEADER = ["Term", *(f"Effect on {name[0].lower() + name[1:]} [95% CI]"
                            for _, name, _ in MEASURES.values())]
EFFECTS_NOTE = ("Effects as for accuracy: each computed within each seed from its variants, "
                "with the 95 % t-interval over the seeds (n − 1 df, uncorrected); bold: "
                "significant at 5 % after Holm's correction across the block's terms of that "
                "measure.")
LOCALITY_CAPTION = ("Attention locality: {title}. Mean attention distance (px) and "
                    "normalised attention entropy of each variant, mean ± sd over n seeds, "
                    "and their gaps to the plain ViT paired by seed [95 % CI].")
# why the probe left attention layers out (a record's diagnostics.left_out) -> what is said
LEFT_OUT = {"class_attention": "{name}'s {n} class-attention layer{s} attend{v} from the class "
                               "token only: no locality measured.",
            None: "{name}'s {n} attention layer{s} on no grid of tokens: no locality measured."}


def with_diagnostics(runs: pd.DataFrame) -> pd.DataFrame:
    """Completed runs that carry diagnostics, with ``distance``/``entropy`` columns
    (means over layers and heads)."""
    done = runs[(runs["status"] == "completed") & runs["diagnostics"].notna()].copy()
    for quantity, (stem, _, _) in MEASURES.items():
        done[stem] = [d["summary"][quantity] for d in done["diagnostics"]]
    return done


def left_out_lines(block: pd.DataFrame) -> list[str]:
    """A line per kind of attention layer that the probe left out of the block's runs."""
    name = ARCHITECTURES.get(block_architecture(block), "The model")
    found = {(why, n) for d in block["diagnostics"] for why, n in d.get("left_out", {}).items()}
    return [LEFT_OUT.get(why, LEFT_OUT[None]).format(
        name=name, n=n, s="s" if n != 1 else "", v="" if n != 1 else "s") for why, n in sorted(found)]


def locality_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per block and variant (blocks holding diagnostics only); ``attrs["left_out"]``:
    by block, :func:`left_out_lines`."""
    diag = with_diagnostics(runs)
    rows, left_out = [], {}
    for key, block in blocks(runs):
        mine = diag.loc[diag.index.intersection(block.index)]
        if mine.empty:
            continue
        left_out[key] = left_out_lines(mine)
        keys = switch_key(mine)
        base = mine[keys == BASELINE].set_index("seed")
        for variant in expected_variants(block):
            ok = mine[keys == variant].set_index("seed")
            row = {**dict(zip(BLOCK, key)), "architecture": block["architecture"].iloc[0],
                   "variant": VARIANTS[variant], **dict(zip(SWITCHES, variant)), "n": len(ok)}
            for stem, _ in DECIMALS:
                summarise(row, stem, ok[stem], base[stem], variant == BASELINE)
            rows.append(row)
    table = pd.DataFrame(rows)
    table.attrs["left_out"] = left_out
    return table


def locality_effects(runs: pd.DataFrame) -> pd.DataFrame:
    """Factorial effects of the switches on distance and entropy, per block with a full design."""
    out = []
    for key, block in blocks(with_diagnostics(runs)):
        factors = factorial_design(block)
        if factors is None:
            continue
        table = effects_table(key, block, factors, {stem: stem for stem, _ in DECIMALS}, " × ")
        if table is None:  # confounded with the seed: not estimable
            log.warning("%s: locality effects left out: no seed has every variant",
                        " x ".join(str(k) for k in key if k))
            continue
        out.append(table)
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def _display_rows(block: pd.DataFrame, style: Style) -> list[list[str]]:
    rows = []
    for _, r in block.iterrows():
        base = r["variant"] == BASELINE_LABEL
        rows.append([style.escape(own_name(r["variant"], r["architecture"])), str(r["n"]),
                     *(pct(r[f"{stem}_mean"], r[f"{stem}_std"], style, d) for stem, d in DECIMALS),
                     *("ref." if base else gap(r[f"d_{stem}"], r[f"d_{stem}_low"],
                                               r[f"d_{stem}_high"], style, d)
                       for stem, d in DECIMALS)])
    return rows


def effects_notes(effects: pd.DataFrame) -> list[str]:
    """What is printed beneath a block's locality effects."""
    spread = [f"{stem}_no_spread" for stem, _ in DECIMALS]
    none = effects[spread].fillna(False).to_numpy().any()
    return [EFFECTS_NOTE, *([NO_SPREAD_EFFECTS] if none else [])]


def elements(table: pd.DataFrame, effects: pd.DataFrame, style: Style) -> list[tuple]:
    """The Locality section as a page's elements (:func:`ablation.report.render.elements`);
    none when no run carries diagnostics."""
    if table.empty:
        return []
    out = [("intro", "Locality", NOTE)]
    for key, block in table.groupby(BLOCK, sort=False):
        out += [("h2", f"Locality: {block_title(*key)}"),
                ("table", [own_name(h, block_architecture(block)) for h in HEADER],
                 _display_rows(block, style)),
                *(("p", line) for line in table.attrs.get("left_out", {}).get(key, []))]
        mine = select_block(effects, key)
        if not mine.empty:
            out += [("md", f"Factorial effects on locality ({mine['seeds'].iloc[0]} seed(s)):"),
                    ("table", EFFECTS_HEADER, effect_rows(mine, style, DECIMALS)),
                    ("p", " ".join(effects_notes(mine)))]
    return out


def latex(table: pd.DataFrame, effects: pd.DataFrame) -> str:
    """The Locality section's tables (the same in comparison.tex and
    comparison_full.tex), :data:`NOTE` beneath each, and their factorial effects."""
    if table.empty:
        return ""
    out = []
    for key, block in table.groupby(BLOCK, sort=False):
        title, architecture = block_title(*key), block_architecture(block)
        out += float_table(own_name(LOCALITY_CAPTION.format(title=title), architecture),
                           [own_name(h, architecture) for h in HEADER],
                           _display_rows(block, LATEX), [own_name(NOTE, architecture)])
        mine = select_block(effects, key)
        if not mine.empty:
            out += effects_float(key, mine, "attention locality", EFFECTS_HEADER, DECIMALS,
                                 effects_notes(mine))
    return "\n".join(out)
