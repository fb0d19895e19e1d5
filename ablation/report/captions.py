"""What a block's table means, in words printed under it: the protocol, what the
accuracies and Δ intervals are, what bold means, what one test image is worth,
the power, the code (:func:`notes`); a LaTeX table's caption proper is
:func:`short_caption`."""
from __future__ import annotations

import math
import re

import pandas as pd

from ablation.config.choices import ARCHITECTURES
from ablation.report import power
from ablation.report.stats import CONFIDENCE
from ablation.report.tuned_block import protocol_sentence

# display column -> comparison column prefix of a gap that may be bold
GAPS = {"ΔTop-1 vs ViT": "d_top1", "ΔTop-5 vs ViT": "d_top5"}
BEST_COLUMNS = {"Best-epoch top-1 (%, paper's measure)": "best_top1",
                "Best-epoch top-5 (%, paper's measure)": "best_top5"}

# Fewer training steps than this (the first epoch of each attempt left out) measure
# start-up and the machine's other load, not the model.
MIN_TIMED_STEPS = 200
SPEED_MARK = "†"

PROTOCOLS = {
    "holdout": "validation split held out of training; test accuracy after the final epoch",
    "official": "trained on the whole training set; test set evaluated every epoch",
}
SYNTHETIC_NOTE = ("SYNTHETIC DATA (dataset=synthetic): random images and labels, for timing "
                  "only; every accuracy and gap below is chance and means nothing.")
NO_SPREAD = ("[x, x]: the {} were identical in every seed, so the interval has no spread: it "
             "measures nothing and is not bold.")
NO_SPREAD_EFFECTS = NO_SPREAD.format("per-seed effects")
FACTORIAL_NOTE = ("Effects: each switch's main effect and every interaction, computed within "
                  "each seed from that seed's complete set of variants (effect = mean of the "
                  "metric where the term is +1 minus the mean where it is −1; for a switch, the "
                  "change off → on averaged over the other switches), with the 95 % t-interval "
                  "over the seeds (n − 1 df, uncorrected), like the Δ: the seed is the unit, "
                  "because the variants of one seed share its initialisation, data order and "
                  "augmentation draws. Bold: significant at 5 % after Holm's correction across "
                  "the block's terms of that metric.")


def own_name(text: str, architecture) -> str:
    """``text`` naming the plain model of ``architecture``: ``SL-CaiT``, ``Δ vs CaiT``."""
    name = ARCHITECTURES.get(architecture, str(architecture))
    # a function, not a template: a record's name is text, never backreferences
    return text if name == "ViT" else re.sub(r"\bViT\b", lambda _: name, text)


def block_architecture(block: pd.DataFrame) -> str:
    return block["architecture"].iloc[0]


def finite(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def image_worth(test_images) -> str:
    """``1 test image = 0.01 pp`` for 10,000 test images."""
    if not finite(test_images) or not test_images:
        return "test-set size unknown (older records)"
    points = 100 / float(test_images)
    text = f"{points:.2g}" if points < 0.1 else f"{points:.3g}"
    return f"1 test image = {text} pp ({int(test_images):,} test images)"


def shows_best_epoch(block: pd.DataFrame) -> bool:
    """Whether the block carries the best-epoch accuracies (official protocol)."""
    return bool(block["best_top1_mean"].notna().any())


def is_tuned(block: pd.DataFrame) -> bool:
    """Whether the block holds a tuned sweep's final runs."""
    return bool(block["tuning"].map(lambda e: isinstance(e, dict)).any())


def speed_shown(row) -> bool:
    """A variant's images/s is shown unless it was timed over too few steps."""
    steps = row.get("timed_steps")
    return not finite(steps) or steps >= MIN_TIMED_STEPS


def significant(row, src: str) -> bool:
    """Bold: the Holm-corrected p of the ``src`` column's family (a Δ's, an effect's) is
    below 5 % (never for a zero-wide interval, which has no test)."""
    p = row.get(f"{src}_p_holm")
    return bool(finite(p) and p < 1 - CONFIDENCE and not row[f"{src}_no_spread"])


def notes(block: pd.DataFrame, escape=str, compact: bool = False) -> list[str]:
    """What the numbers of one block mean, sentence by sentence; ``escape`` is applied
    to what comes from the records. ``compact``: for the paper's table, which shows
    top-1 only and the runs that did not complete in a note of their own."""
    protocol = block["protocol"].iloc[0]
    tests = int(block["d_top1_p"].notna().sum())
    parts = [SYNTHETIC_NOTE] if (block["dataset"] == "synthetic").any() else []
    parts.append(f"Protocol: {escape(str(protocol))} "
                 f"({PROTOCOLS.get(protocol, 'as recorded')}).")
    if compact:
        parts.append("Top-1: test accuracy after the final epoch, mean ± sample standard "
                     "deviation over n seeds (n counts completed runs); top-5, the gap in "
                     "top-5 and the training speed and time are in the full table.")
    else:
        parts.append("Top-1/top-5: test accuracy after the final epoch, mean ± sample "
                     "standard deviation over n seeds.")
    if shows_best_epoch(block):
        metrics = "top-1" if compact else "top-1/top-5"
        parts.append(f"Best-epoch {metrics}: the highest test accuracy over the epochs, the "
                     "measure the paper and its official code report (chosen on the test set, "
                     "so optimistic); mean ± sd over n seeds.")
    parts += [("Δ: paired by seed against the plain ViT, [95 % paired t-interval, n-1 df, "
               "uncorrected] when two or more seeds pair up."),
              (f"Bold: significant at 5 % after Holm's correction across the block's {tests} "
               "Δ test(s) of that metric, so an interval that excludes zero need not be bold."
               if tests else "No Δ could be tested (one seed, or no spread): nothing is bold."),
              image_worth(block["test_images"].iloc[0]) + "."]
    shown = ["d_top1"] if compact else list(GAPS.values())
    if block[[f"{c}_no_spread" for c in shown]].fillna(False).to_numpy().any():
        parts.append(NO_SPREAD.format("paired differences"))
    parts.append(power.sentence(block))
    slow = block.apply(lambda r: not speed_shown(r), axis=1).astype(bool)
    hidden = block[slow & (block["status"] == "ok")]
    if len(hidden) and not compact:
        parts.append(f"{SPEED_MARK} Train img/s left out: timed over only "
                     f"{int(hidden['timed_steps'].min())} training steps per run (fewer than "
                     f"{MIN_TIMED_STEPS}, the first epoch of each attempt excluded), which "
                     "measures start-up and the machine's other load, not the model "
                     "(comparison.csv keeps images_per_s and timed_steps).")
    parts += [not_completed_sentence(block) if compact else "",
              escape(protocol_sentence(block))]
    sources = sorted({s for s in block["paper_source"] if isinstance(s, str)})
    if sources:
        parts.append(f"Paper top-1: the best-epoch test top-1 the paper published for this "
                     f"variant and dataset, its official code's measure, beside this block's "
                     f"best-epoch top-1; not a run of this suite ({escape('; '.join(sources))}).")
    parts.append(code_sentence(block, escape))
    if (block["trainable_params"].isna() & block["params"].notna()).any():
        parts.append("Params marked * are totals (older records lack the trainable count).")
    return [own_name(part, block_architecture(block)) for part in parts if part]


def not_completed_sentence(block: pd.DataFrame) -> str:
    """``Not in n: SPT 1 failed; SL-ViT 2 interrupted.``, or "" when every run completed."""
    said = []
    for _, r in block.iterrows():
        counts = [f"{int(r[f'n_{what}'])} {what}" for what in ("failed", "interrupted")
                  if r.get(f"n_{what}")]
        if counts:
            said.append(f"{r['variant']} {', '.join(counts)}")
    return f"Runs not in n: {'; '.join(said)}." if said else ""


def short_caption(block: pd.DataFrame, title: str, full: bool = False) -> str:
    """The caption above a block's table in a paper: what the block is and what its
    numbers are; the statistics are the table's notes (:func:`notes`)."""
    metrics = "Top-1 and top-5" if full else "Top-1"
    when = ("after the final epoch and at the best epoch (the paper's measure)"
            if shows_best_epoch(block) else "after the final epoch")
    tuned = ("; each variant trained at the values its own search chose on validation"
             if is_tuned(block) else "")
    speed = "; training speed and time" if full else ""
    synthetic = (" Synthetic data: every accuracy is chance."
                 if (block["dataset"] == "synthetic").any() else "")
    return own_name(
        f"{title}.{synthetic} {metrics} test accuracy (%) of each variant {when}, mean "
        f"± sd over n seeds{tuned}; Δ: the gap to the plain ViT paired by seed, with its "
        f"95 % confidence interval, bold where significant after Holm's correction"
        f"{speed}.", block_architecture(block))


def code_sentence(block: pd.DataFrame, escape=str) -> str:
    """Which code the block's runs came from; said plainly when it is more than one."""
    codes = sorted({escape(c) for cell in block["code"].dropna()
                    for c in str(cell).split(" | ") if c})
    if not codes:
        return ""
    if len(codes) == 1:
        text = f"Code: {codes[0]}."
    else:
        text = (f"MIXED CODE: the runs of this block came from {len(codes)} versions of the "
                f"code ({'; '.join(codes)}), so a gap may reflect the code, not the switch.")
    if block["code_resumed_under_other"].any():
        text += (" Some runs were resumed under other code than they started with "
                 "(code_history in their records).")
    return text
