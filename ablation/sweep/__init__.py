"""The Hydra side of a sweep: the command (:mod:`ablation.sweep.cli`), the
checks before Hydra, the sweep's start, and removing what refused input
created. What each job did comes back to the suite's sweeper as the job's
return value (:mod:`hydra_plugins.vit_ablation.outcomes`)."""
