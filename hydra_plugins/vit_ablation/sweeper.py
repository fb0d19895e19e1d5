"""``hydra/sweeper=vit_ablation``, every multirun's sweeper (the default): Hydra's
basic sweeper whose end is computed from what its jobs hand back
(:mod:`hydra_plugins.vit_ablation.outcomes`); with a ``tune=...`` preset, each
variant is searched first (:mod:`hydra_plugins.vit_ablation.tuned_sweep`)."""
from __future__ import annotations

from pathlib import Path

from ablation.config.compose import sweep_job
from ablation.config.hydra_internals import basic_sweeper
from hydra_plugins.vit_ablation.outcomes import end_sweep
from hydra_plugins.vit_ablation.tuned_sweep import Tuner


class AblationSweeper(basic_sweeper()):
    """The basic sweeper (with ``tune``: each variant's search, then its final runs),
    then the sweep's end from its jobs' returns."""

    def sweep(self, arguments):
        if self.config.get("tune") is None:
            returns = self.run_batches(arguments)
        else:
            returns = Tuner(self).run(arguments)
        end_sweep(self.config, returns, self.folder_of)
        return [returns]

    def run_batches(self, arguments: list[str]) -> list:
        """Every combination, in batches through the launcher, as Hydra's basic sweeper
        runs them; every job's ``JobReturn``, in order. A job whose task raised is not
        raised here (Hydra's sweeper would end the sweep with it): the end lists it."""
        from hydra.core.override_parser.overrides_parser import OverridesParser
        from omegaconf import OmegaConf

        from ablation.files import atomic_write, make_folder

        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        self.overrides = self.split_arguments(
            parser.parse_overrides([*self._parse_config(), *arguments]), self.max_batch_size)
        sweep_dir = make_folder(Path(str(self.config.hydra.sweep.dir)))
        atomic_write(sweep_dir / "multirun.yaml", OmegaConf.to_yaml(self.config), fsync=False)
        returns = []
        while not self.is_done():
            batch = self.get_job_batch()
            self.validate_batch_is_legal(batch)
            returns += self.launcher.launch(batch, initial_job_idx=len(returns))
        return returns

    def folder_of(self, overrides: list[str]) -> Path:
        """The folder of the job that ``overrides`` describe, as Hydra composes it."""
        return sweep_job(self.hydra_context.config_loader, self.config, overrides)[1]
