"""Training one configuration: fit and evaluate (:mod:`ablation.train.fit`), the
learning-rate schedule, per-epoch metrics, checkpoints, and the locality probe."""
