"""``hydra/launcher=slurm``: Hydra's submitit Slurm launcher whose wait ends
(see :mod:`hydra_plugins.vit_ablation.slurm_wait`), and its config: submitit's
Slurm settings plus ``result_grace_s``, set in ``conf/hydra/launcher/slurm.yaml``."""
from dataclasses import dataclass

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from hydra_plugins.vit_ablation.slurm_wait import bounded_waits

try:
    from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import \
        SlurmLauncher as _SubmititSlurmLauncher
except ImportError:  # the launchers extra is not installed: Hydra's own check says so
    _SubmititSlurmLauncher = None

if _SubmititSlurmLauncher is not None:
    @dataclass
    class BoundedSlurmConf(SlurmQueueConf):
        """submitit's Slurm settings, and how long (seconds) a result may take to
        appear after Slurm ended its job (a shared file system may show it late)."""
        _target_: str = "hydra_plugins.vit_ablation.slurm.SlurmLauncher"
        result_grace_s: float = MISSING

    ConfigStore.instance().store(group="vit_ablation", name="bounded_slurm_launcher",
                                 node=BoundedSlurmConf, provider="vit_ablation")

    class SlurmLauncher(_SubmititSlurmLauncher):
        """Each job's wait ends once Slurm is done with the job, result or not."""

        def __init__(self, result_grace_s: float, **params) -> None:
            if not result_grace_s >= 0:
                raise ValueError(f"hydra.launcher.result_grace_s={result_grace_s}: "
                                 f"give seconds, 0 or more")
            super().__init__(**params)
            self.result_grace_s = float(result_grace_s)

        def launch(self, job_overrides, initial_job_idx):
            with bounded_waits(job_overrides, self.result_grace_s):
                return super().launch(job_overrides, initial_job_idx)
