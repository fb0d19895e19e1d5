"""What a sweep through any launcher leaves, reduced to what must equal the basic launcher's."""
from ablation.runs.record import find_records, read_record

TIMING = {"epoch_seconds", "train_seconds", "train_images_per_s", "started_at",
          "finished_at", "locality/seconds"}


def comparable(record: dict) -> dict:
    """A record without what legitimately differs between launches."""
    history = [{k: v for k, v in row.items() if k not in TIMING} for row in record["history"]]
    config = {k: v for k, v in record["config"].items()
              if k not in ("sweep_id", "results_dir", "estimate", "report")}  # the sweep's own
    config["wandb"] = {k: v for k, v in config["wandb"].items() if k != "group"}
    config["gpu"] = {k: v for k, v in config["gpu"].items()   # a path; how jobs are launched
                     if k not in ("compilation_cache", "jobs_at_once")}
    return {"switches": record["switches"], "status": record["status"],
            "metrics": record["metrics"], "history": history, "params": record["params"],
            "config": config, "run_name": record["run_name"]}


def records_by_name(root) -> dict:
    """(record path, record) of every run below ``root``, by run name."""
    records = {}
    for path in find_records(root):
        record = read_record(path)
        records[record["run_name"]] = (path, record)
    return records
