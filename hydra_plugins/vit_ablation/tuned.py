"""``hydra/sweeper=tuned`` (chosen by the ``tune=...`` presets): Hydra's basic
sweeper, which first tunes each variant when the config has a ``tune`` group
(see :mod:`hydra_plugins.vit_ablation.tuning`)."""
from ablation.config.hydra_internals import basic_sweeper
from hydra_plugins.vit_ablation.tuning import Tuner


class TunedSweeper(basic_sweeper()):
    """The basic sweeper; with ``tune``, each variant's search, then its final runs."""

    def sweep(self, arguments):
        if self.config is None or self.config.get("tune") is None:
            return super().sweep(arguments)
        return Tuner(self).run(arguments)
