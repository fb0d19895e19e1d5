"""The ``tune`` config group read as a search protocol, and what a job records of it.

Each job a tuned sweep (:mod:`hydra_plugins.vit_ablation.tuned_sweep`) launches
carries ``tune.role``, ``tune.study`` and, for a trial, ``tune.trial``: the
record's ``role`` and ``tuning`` entries.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from ablation.config.settings import flatten

OBJECTIVE = "final_val_top1"     # the record's metric a trial is scored by
SIGNIFICANT_DIGITS = 3           # a proposed value, as trained and as named in folders


@dataclass(frozen=True)
class Protocol:
    """How every study of a sweep searches: the ``tune`` config group."""
    params: tuple[str, ...]
    spread: float
    trials: int
    sampler_seed: int
    search_seed: int
    epochs: int | None

    @classmethod
    def of(cls, tune: Mapping) -> Protocol:
        return cls(params=tuple(tune["params"]), spread=float(tune["spread"]),
                   trials=int(tune["trials"]), sampler_seed=int(tune["sampler_seed"]),
                   search_seed=int(tune["search_seed"]),
                   epochs=None if tune["epochs"] is None else int(tune["epochs"]))

    def key(self) -> dict:
        """What makes two searches the same (the budget aside: more trials extend a study)."""
        return {"params": list(self.params), "spread": self.spread,
                "sampler_seed": self.sampler_seed, "search_seed": self.search_seed,
                "epochs": self.epochs}


def rounded(value: float) -> float:
    """A proposed value as it is trained: :data:`SIGNIFICANT_DIGITS` significant digits."""
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def role(config: Mapping) -> str:
    """``trial`` for a search job, ``final`` for every other run (no search: ``tune`` null)."""
    return str(config["tune"]["role"]) if config["tune"] is not None else "final"


def tuning_entry(config: Mapping) -> dict | None:
    """What a job's record says of its search (``None`` outside a tuned sweep):
    its study, its trial number (trials), the searched keys and their values
    here, the objective and the protocol."""
    tune = config["tune"]
    if tune is None or tune["study"] is None:  # not launched by a tuned sweep
        return None
    protocol = Protocol.of(tune)
    flat = flatten(config)
    return {"study": tune["study"], "trial": tune["trial"],
            "values": {key: json.loads(flat[key]) for key in protocol.params if key in flat},
            "objective": OBJECTIVE, "trials": protocol.trials, **protocol.key()}
