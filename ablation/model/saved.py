"""The trained model a completed job leaves beside its record, and the call that loads it.

    from ablation.model import load_model
    model = load_model("results/smoke/vit-s0")   # a job folder, or its model.keras
    model.evaluate(x_test, y_test)               # loss, top-1, top-5 on integer labels

``model.keras`` is Keras's own format (architecture and weights), without
the optimizer's state: it is for predicting, looking at attention and
fine-tuning (compile it again with an optimizer of your choice). The job's
checkpoint, which has the optimizer's state, is what an interrupted run
resumes from and is removed when the run completes. The file holds the
suite's own layers, so it loads where :mod:`ablation.model` is importable
(this call imports it); its input is the raw image (normalisation and the
inference-time resize are layers of the model).
"""
from __future__ import annotations

from pathlib import Path

import keras

from ablation.files import entries, is_folder, is_regular, save_with

MODEL_FILENAME = "model.keras"


def save_trained(model: keras.Model, path: str | Path) -> Path:
    """Write ``model``'s architecture and weights (not its optimizer) to ``path``
    atomically: a reader, or a job killed while writing, never leaves half a file."""
    path = Path(path)
    # a fresh copy, never compiled, carries no optimizer state (AdamW's two
    # moments: two thirds of a compiled model's file)
    copy = keras.Model.from_config(model.get_config())  # uncompiled, unlike clone_model
    copy.set_weights(model.get_weights())
    return save_with(path, copy.save)


def load_model(path: str | Path, compile: bool = True) -> keras.Model:
    """The trained model of a job folder (or a ``model.keras`` path).

    With ``compile`` (the default) it is compiled for evaluation on integer
    class labels: sparse cross-entropy from logits, ``top1`` and ``top5``
    accuracy, so ``evaluate`` reproduces the record's test metrics.
    """
    import ablation.model.vit  # noqa: F401  (imports, and so registers, every layer a model holds)

    path = Path(path)
    if path.is_dir():
        if not (path / MODEL_FILENAME).exists():
            jobs = sorted(job.name for job in entries(path)
                          if is_folder(job) and is_regular(job / MODEL_FILENAME))
            if jobs:  # a sweep's folder: its jobs hold the models
                raise FileNotFoundError(
                    f"{path} is a sweep folder: its jobs' models are in {', '.join(jobs[:4])}"
                    f"{', ...' if len(jobs) > 4 else ''}; pass one job folder")
        path = path / MODEL_FILENAME
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no trained model here (a job leaves {MODEL_FILENAME} when it completes "
            f"with trainer.save_model=true)")
    try:
        model = keras.saving.load_model(path, compile=False)
    except Exception as e:  # a truncated or foreign file: Keras says "File not found"
        raise ValueError(
            f"{path} is not a readable Keras model ({type(e).__name__}): it is damaged or "
            f"incomplete; rerun its job with resume=false to train and save it again") from e
    if compile:
        classes = int(model.output_shape[-1])
        model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=[keras.metrics.SparseCategoricalAccuracy(name="top1"),
                               keras.metrics.SparseTopKCategoricalAccuracy(
                                   k=min(5, classes), name="top5")])
    return model
