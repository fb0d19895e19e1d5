"""The process a job runs in: the Keras backend, accelerator settings, native
log capture and memory hygiene across jobs."""
