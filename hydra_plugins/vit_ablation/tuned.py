"""``hydra/sweeper=tuned`` (chosen by the ``tune=...`` presets): Hydra's basic
sweeper, which first tunes each variant when the config has a ``tune`` group
(see :mod:`ablation.sweep.tuning`)."""
from ablation.config.hydra_internals import basic_sweeper


class TunedSweeper(basic_sweeper()):
    """The basic sweeper; with ``tune``, each variant's search, then its final runs."""

    def sweep(self, arguments):
        if self.config is None or self.config.get("tune") is None:
            return super().sweep(arguments)
        from ablation.sweep.tuning import Tuner

        return Tuner(self).run(arguments)
