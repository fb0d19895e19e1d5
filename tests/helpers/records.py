"""Hand-made run records for the reporter's tests, and a table's row by variant."""
import json

from ablation.runs.record import write_record

BASE_CONFIG = {"dataset": {"name": "cifar10"}, "model": {"name": "paper"},
               "trainer": {"epochs": 100, "learning_rate": 0.001},
               "wandb": {"mode": "disabled"}}


def record(root, spt, lsa, temp, seed, top1, top5=None, status="completed",
           dataset="cifar10", model="paper", config=None, name=None, extra=None):
    cfg = json.loads(json.dumps(config or BASE_CONFIG))
    cfg.update(spt=spt, lsa=lsa, learnable_temperature=temp, seed=seed)
    history = [{"epoch": e, "val/top1": top1 * e / 3, "temperature/block_0": 4.0 + e}
               if temp else {"epoch": e, "val/top1": top1 * e / 3} for e in (1, 2, 3)]
    rec = {"schema": 1, "status": status, "switches": {"spt": spt, "lsa": lsa,
                                                       "learnable_temperature": temp},
           "variant": "x", "dataset": dataset, "model": model, "seed": seed, "config": cfg,
           "metrics": {} if status == "failed" else {
               "test_top1": top1, "test_top5": min(top1 + 0.2, 1.0) if top5 is None else top5},
           "history": history if status == "completed" else [], "params": 1000,
           "train_seconds": 10.0, "train_images_per_s": 100.0,
           "wandb": {"mode": "disabled", "group": "g"},
           "error": "TrainingDiverged: loss nan" if status == "failed" else None,
           "finished_at": "2026-11-22T00:00:00+00:00", "data": {"test": 10000},
           **(extra or {})}
    folder = root / (name or f"{int(spt)}{int(lsa)}{int(temp)}-s{seed}-{dataset}-{model}")
    write_record(folder, rec)
    return folder


# Top-1 (fractions) per tied variant (spt, lsa=temp) and seed 0, 1, 2.
TOP1 = {(False, False): [0.50, 0.52, 0.54], (True, False): [0.53, 0.56, 0.55],
        (False, True): [0.51, 0.55, 0.56], (True, True): [0.58, 0.59, 0.60]}


def row(table, variant):
    return table[table["variant"] == variant].iloc[0]
