"""Shared by the peer scripts: MNIST from ../shared/data/mnist (IDX, gzipped), scaled like
the seed (x / 255 * 2 - 1), and the timing loop."""
import gzip
import os
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("DYGRAPH_DATA", os.path.join(HERE, "..", "..", "..", "shared", "data", "mnist"))


def load(prefix):
    with gzip.open(os.path.join(DATA, f"{prefix}-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(os.path.join(DATA, f"{prefix}-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
    return (images.astype(np.float32) / 255.0 * 2.0 - 1.0), labels


def batches(images, labels, batch, rng):
    order = rng.permutation(len(labels))
    for s in range(0, len(order) - batch + 1, batch):
        idx = order[s : s + batch]
        yield images[idx], labels[idx].reshape(-1, 1)


def timed_steps(steps, train_step, x_train, y_train, batch=64, warmup=10, finish=None):
    """Runs `train_step(images, labels)` on `warmup + steps` shuffled batches and returns the
    seconds the last `steps` took, `finish()` (waiting for queued device work) included."""
    it = batches(x_train, y_train, batch, np.random.default_rng(0))
    for step in range(steps + warmup):
        if step == warmup:
            if finish:
                finish()
            start = time.perf_counter()
        train_step(*next(it))
    if finish:
        finish()
    return time.perf_counter() - start


def report(name, steps, batch, seconds, acc):
    print(f"{name}: {steps} steps of batch {batch} in {seconds:.2f} s = {steps * batch / seconds:.0f} images/s; "
          f"test accuracy after them {acc:.4f}")
