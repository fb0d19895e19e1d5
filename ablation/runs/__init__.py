"""What a run leaves on disk and in W&B: its record and schema, the folder's lock,
and its W&B run (:mod:`ablation.runs.tracking`); the job lifecycle that uses them
is :mod:`ablation.job`. Importing the record, the schema or the lock loads neither
Keras nor wandb."""
