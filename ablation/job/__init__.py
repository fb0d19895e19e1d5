"""One job: the lifecycle around one training run (lock, skip, resume, set
aside, record, W&B), between the sweep that starts it and the training."""
from ablation.job.lifecycle import JobBusy, run_job, write_failure

__all__ = ["JobBusy", "run_job", "write_failure"]
