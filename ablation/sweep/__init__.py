"""The Hydra side of a sweep: the command (:mod:`ablation.sweep.cli`), the
checks before Hydra, the sweep callbacks, what each job did, and removing
what refused input created."""
