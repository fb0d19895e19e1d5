"""``hydra/launcher=slurm``: Hydra's submitit Slurm launcher whose wait ends
(see :mod:`hydra_plugins.vit_ablation.slurm_wait`)."""
from hydra_plugins.vit_ablation.slurm_wait import bounded_waits

try:
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import \
        SlurmLauncher as _SubmititSlurmLauncher
except ImportError:  # the launchers extra is not installed: Hydra's own check says so
    _SubmititSlurmLauncher = None

if _SubmititSlurmLauncher is not None:
    class SlurmLauncher(_SubmititSlurmLauncher):
        """Each job's wait ends once Slurm is done with the job, result or not."""

        def launch(self, job_overrides, initial_job_idx):
            with bounded_waits(job_overrides):
                return super().launch(job_overrides, initial_job_idx)
