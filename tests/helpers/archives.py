"""Archives made in the official CIFAR format."""
import io
import pickle
import tarfile

import numpy as np


def cifar_batch(images, labels, fine):
    """A batch pickled as the official python archives are (bytes keys, CHW rows)."""
    data = images.transpose(0, 3, 1, 2).reshape(len(images), 3072)
    key = b"fine_labels" if fine else b"labels"
    return pickle.dumps({b"batch_label": b"made for tests", key: list(map(int, labels)),
                         b"data": data, b"filenames": [b"x.png"] * len(images)})


def make_cifar_archive(path, fine, n_train=20, n_test=10):
    rng = np.random.default_rng(0)
    classes = 100 if fine else 10
    x_train = rng.integers(0, 256, (n_train, 32, 32, 3), dtype=np.uint8)
    y_train = rng.integers(0, classes, n_train)
    x_test = rng.integers(0, 256, (n_test, 32, 32, 3), dtype=np.uint8)
    y_test = rng.integers(0, classes, n_test)
    folder = "cifar-100-python" if fine else "cifar-10-batches-py"
    names = [f"class{i}".encode() for i in range(classes)]
    if fine:
        members = {"train": cifar_batch(x_train, y_train, True),
                   "test": cifar_batch(x_test, y_test, True),
                   "meta": pickle.dumps({b"fine_label_names": names,
                                         b"coarse_label_names": names[:20]})}
    else:
        members = {f"data_batch_{i + 1}": cifar_batch(x_train[i::5], y_train[i::5], False)
                   for i in range(5)}
        members["test_batch"] = cifar_batch(x_test, y_test, False)
        members["batches.meta"] = pickle.dumps({b"label_names": names})
        order = np.concatenate([np.arange(i, n_train, 5) for i in range(5)])
        x_train, y_train = x_train[order], y_train[order]
    with tarfile.open(path, "w:gz") as tar:
        for name, payload in members.items():
            info = tarfile.TarInfo(f"{folder}/{name}")
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    return x_train, y_train, x_test, y_test
