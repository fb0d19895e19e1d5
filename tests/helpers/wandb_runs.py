"""What W&B wrote for a run, read back with its own command."""
from __future__ import annotations

import subprocess
from pathlib import Path


def wandb_inspect(wandb_exe: str, run_dir: Path) -> dict:
    """What W&B wrote for an offline run: summary view plus the run record's group/job type."""
    import json

    summary = json.loads(subprocess.run(
        [wandb_exe, "leet", "inspect", str(run_dir), "--summary", "--json"],
        capture_output=True, text=True, check=True).stdout)
    stream = subprocess.run([wandb_exe, "leet", "inspect", str(run_dir), "--json"],
                            capture_output=True, text=True, check=True).stdout
    records = [json.loads(line) for line in stream.splitlines() if line.strip()]
    run = next(r["run"] for r in records if r.get("type") == "run")
    history = [r for r in records if r.get("type") == "history"]
    return {**summary, "group": run.get("run_group"), "job_type": run.get("job_type"),
            "history_records": history}
