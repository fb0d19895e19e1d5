"""One job: the lifecycle around one training run (lock, skip, resume, set
aside, record, W&B), between the sweep that starts it and the training."""
from ablation.job.lifecycle import run_job
from ablation.job.records import write_failure
from ablation.runs.lock import JobBusy
