"""What a run leaves on disk and in W&B: its record and schema, the folder's
lock, file writing, and its W&B run (:mod:`ablation.runs.tracking`). The job
lifecycle that uses them is :mod:`ablation.job`.

Importing this package, the record, the schema, the lock or the files loads
neither Keras nor wandb (wandb is imported only when a W&B run opens).
"""
from ablation.files import atomic_write, replaced_folder, set_aside  # re-exported for runs' users
from ablation.runs.lock import JobBusy, job_lock
from ablation.runs.record import (CHECKPOINT_DIR, RECORD_FILENAME, RecordError, earlier_run,
                                  find_records, read_record, write_record)
from ablation.runs.record_schema import SCHEMA_VERSION, SchemaError, validate_record

__all__ = ["CHECKPOINT_DIR", "RECORD_FILENAME", "SCHEMA_VERSION", "JobBusy", "RecordError",
           "SchemaError", "atomic_write", "earlier_run", "find_records", "job_lock",
           "read_record", "replaced_folder", "set_aside", "validate_record", "write_record"]
