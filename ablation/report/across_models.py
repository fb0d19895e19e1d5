"""The models side by side, as the paper's table: per dataset and protocol, each model's
plain and SL top-1, the SL gain within that model and the switches' main effects."""
from __future__ import annotations

import pandas as pd

from ablation.config.switches import BASELINE_LABEL, SL_LABEL
from ablation.report.tables import BLOCK

GROUP = [key for key in BLOCK if key != "model"]
CAPTION = ("Each model against its own plain variant, never another model's: top-1 mean "
           "± sd over seeds; Δ SL paired by seed within the model [95 % t-interval, "
           "uncorrected]; main effects from the model's factorial (its block above). Nothing "
           "is bold here: the corrections are made within each block.")
PAPER_NOTE = ("Paper: the published best-epoch top-1, plain → SL (not a run of this suite), "
              "beside its final-epoch means.")


def summaries(table: pd.DataFrame, effects: pd.DataFrame) -> list[tuple[tuple, list[dict]]]:
    """For each dataset, protocol and setting that two models or more ran: one row per
    model, in the table's order, which is the paper's (:func:`ablation.report.tables.blocks`):
    its plain and SL comparison rows, None where missing, and its block's main effects by
    term."""
    out = []
    for key, group in table.groupby(GROUP, sort=False, dropna=False):
        if group["model"].nunique() < 2:
            continue
        rows = []
        for model, mine in group.groupby("model", sort=False):
            plain = mine[mine["variant"] == BASELINE_LABEL]
            sl = mine[mine["variant"] == SL_LABEL]
            block = (effects[(effects[BLOCK] == [key[0], model, *key[1:]]).all(axis=1)]
                     if not effects.empty else effects)
            rows.append({"model": model, "architecture": mine["architecture"].iloc[0],
                         "plain": plain.iloc[0] if len(plain) else None,
                         "sl": sl.iloc[0] if len(sl) else None,
                         "effects": {e["term"]: e for _, e in block.iterrows()
                                     if e["order"] == 1}})
        out.append((key, rows))
    return out


def terms(rows: list[dict]) -> list[str]:
    """The main-effect terms any model of the summary has, in their first order."""
    return list(dict.fromkeys(t for row in rows for t in row["effects"]))
