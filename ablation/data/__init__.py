"""Datasets in memory (:mod:`ablation.data.datasets`), their file formats, and the
training batches (repeated passes, Mixup/CutMix: :mod:`ablation.data.batches`)."""
from ablation.data.datasets import (LOADERS, Dataset, check_source, load_dataset,
                                    load_dataset_cached)
from ablation.data.formats import DataError

__all__ = ["LOADERS", "DataError", "Dataset", "check_source", "load_dataset",
           "load_dataset_cached"]
