#!/usr/bin/env python3
"""dask-classify: offline batch inference of the Fashion-MNIST test split on a Dask cluster.

Every Dask worker process opens one Runner (furiosa.runtime.create_runner) on its own device, once,
before any task runs; the 10,000 test images are cut into chunks, each chunk runs as one task on
whichever worker the scheduler picks (that worker's Runner classifies it), and the predictions come
back to the client, which computes top-1 accuracy.

    PYTHONPATH=build/python /usr/bin/python3 tools/dask-batch/dask_classify.py \
        [--model models/fashion_mnist_int8.onnx] [--workers 2] [--devices npu0pe0,npu0pe1]
        [--scheduler tcp://HOST:PORT] [--chunk-size 1000] [--dataset-dir DIR]

Without --scheduler it starts a LocalCluster on loopback with one single-threaded worker process
per device. Importable: `classify(client, model, devices, ...)` (tests/deploy/test_dask.py).
"""

import argparse
import gzip
import os
import pathlib
import sys
import threading
import time

import numpy as np

DEFAULT_DATASET_DIR = "/usr/share/datasets/fashion-mnist"
DEFAULT_MODEL = pathlib.Path(__file__).resolve().parents[2] / "models" / "fashion_mnist_int8.onnx"

# This worker process's runners, keyed by the Dask worker's address (several workers may share a
# process when the cluster uses threads instead of processes).
_RUNNERS = {}
_RUNNERS_LOCK = threading.Lock()


def read_idx(path):
    """An unsigned-byte IDX array (type code 0x08), plain or gzip-compressed."""
    path = pathlib.Path(path)
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * k:8 + 4 * k], "big") for k in range(ndim)]
    offset = 4 + 4 * ndim
    count = int(np.prod(dims))
    if len(data) - offset != count:
        raise ValueError(f"{path}: {len(data) - offset} data bytes, dims {dims} need {count}")
    return np.frombuffer(data, dtype=np.uint8, offset=offset).reshape(dims)


def load_fashion_mnist_test(directory=DEFAULT_DATASET_DIR):
    """(images uint8 [N, 28, 28], labels uint8 [N]) of the test split, as furiosa-run reads them
    (Debian's dataset-fashion-mnist: t10k-*-ubyte.gz)."""
    directory = pathlib.Path(directory)

    def pick(stem):
        gz = directory / (stem + ".gz")
        path = gz if gz.exists() else directory / stem
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing (Debian package dataset-fashion-mnist, "
                                    f"or give the folder of the IDX files)")
        return path

    images = read_idx(pick("t10k-images-idx3-ubyte"))
    labels = read_idx(pick("t10k-labels-idx1-ubyte"))
    if images.ndim != 3 or images.shape[1:] != (28, 28) or labels.shape != images.shape[:1]:
        raise ValueError(f"{directory}: not a 28x28 image set with one label per image")
    return images, labels


def _worker_address():
    from distributed import get_worker
    return get_worker().address


def open_runner(model, device, worker_num=2):
    """Runs on a worker (client.run): opens this worker's Runner on `device`, once."""
    from furiosa.runtime import create_runner

    address = _worker_address()
    with _RUNNERS_LOCK:
        if address not in _RUNNERS:
            runner = create_runner(str(model), device=device, worker_num=worker_num)
            _RUNNERS[address] = (runner, device)
        return _RUNNERS[address][1]


def close_runner():
    """Runs on a worker (client.run): closes this worker's Runner (frees its device)."""
    with _RUNNERS_LOCK:
        entry = _RUNNERS.pop(_worker_address(), None)
    if entry:
        entry[0].close()
    return entry is not None


def classify_chunk(images):
    """A task: top-1 class of each image of `images` (uint8 [n, 28, 28]) on this worker's Runner.
    Inputs are those of furiosa-run --dataset: float32 pixel / 255, or the raw pixels for a uint8
    input. Returns (int64 predictions [n], device spec used)."""
    with _RUNNERS_LOCK:
        entry = _RUNNERS.get(_worker_address())
    if entry is None:
        raise RuntimeError(f"worker {_worker_address()} has no Runner (open_runner was not run on it)")
    runner, device = entry
    desc = runner.model.input(0)
    dtype = desc.dtype.numpy
    batch = images.reshape(-1, 1, 1, 28, 28)
    if dtype == np.uint8:
        inputs = batch
    else:
        inputs = batch.astype(np.float32) / np.float32(255)
    # All of the chunk in flight at once: the Runner's host workers and the PE stay busy while this
    # task's one thread waits for the results in order.
    futures = [runner.run_async(x) for x in inputs]
    out = np.empty(len(futures), dtype=np.int64)
    for i, f in enumerate(futures):
        outputs = f.result()
        first = outputs[0] if isinstance(outputs, (list, tuple)) else outputs
        out[i] = int(np.argmax(np.asarray(first).reshape(-1)[:10]))
    return out, device


def classify(client, model, devices, images=None, labels=None, dataset_dir=DEFAULT_DATASET_DIR,
             chunk_size=1000, worker_num=2):
    """Classifies the Fashion-MNIST test split (or `images`/`labels`) on the cluster of `client`.

    `devices`: one device spec per worker (e.g. ["npu0pe0", "npu0pe1"]), given to the workers in
    the order of their addresses; the cluster must have exactly len(devices) workers. Returns a
    dict: predictions (int64 [N]), correct, total, accuracy, seconds (classification only, runners
    already open), chunks_per_device."""
    if images is None:
        images, labels = load_fashion_mnist_test(dataset_dir)
    workers = sorted(client.scheduler_info()["workers"])
    if len(workers) != len(devices):
        raise ValueError(f"{len(workers)} Dask workers for {len(devices)} device specs {devices}: "
                         f"give one device spec per worker")
    model = str(pathlib.Path(model).resolve())
    try:
        for address, device in zip(workers, devices):
            client.run(open_runner, model, device, worker_num, workers=[address])
        t0 = time.perf_counter()
        starts = range(0, len(images), chunk_size)
        futures = [client.submit(classify_chunk, images[s:s + chunk_size], pure=False) for s in starts]
        results = client.gather(futures)
        seconds = time.perf_counter() - t0
    finally:
        client.run(close_runner)
    predictions = np.concatenate([r[0] for r in results])
    per_device = {}
    for _, device in results:
        per_device[device] = per_device.get(device, 0) + 1
    correct = int(np.sum(predictions == labels.astype(np.int64))) if labels is not None else None
    return {"predictions": predictions, "correct": correct, "total": len(predictions),
            "accuracy": None if correct is None else correct / len(predictions),
            "seconds": seconds, "chunks_per_device": per_device}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=str(DEFAULT_MODEL), help="model file (default: the project's default model)")
    ap.add_argument("--devices", default="npu0pe0,npu0pe1", help="comma list, one device spec per worker")
    ap.add_argument("--scheduler", help="address of a running scheduler (default: a LocalCluster)")
    ap.add_argument("--chunk-size", type=int, default=1000)
    ap.add_argument("--worker-num", type=int, default=2, help="host workers of each Runner")
    ap.add_argument("--dataset-dir", default=DEFAULT_DATASET_DIR)
    args = ap.parse_args()

    from distributed import Client, LocalCluster

    # The tasks must run this file's functions as the module `dask_classify`, not as __main__:
    # cloudpickle would ship __main__'s functions by value with a copy of _RUNNERS each time, so a
    # task would never see the Runner its worker opened.
    here = str(pathlib.Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import dask_classify as module

    devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    if args.scheduler:
        client, cluster = Client(args.scheduler), None
        client.upload_file(module.__file__)  # the workers import it from there
    else:
        # Local worker processes find the module (and furiosa.runtime) through PYTHONPATH.
        os.environ["PYTHONPATH"] = os.pathsep.join([here] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
        cluster = LocalCluster(n_workers=len(devices), threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None)
        client = Client(cluster)
    try:
        r = module.classify(client, args.model, devices, dataset_dir=args.dataset_dir,
                            chunk_size=args.chunk_size, worker_num=args.worker_num)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    print(f"top-1 accuracy: {100.0 * r['accuracy']:.2f}% ({r['correct']}/{r['total']})")
    print(f"throughput: {r['total'] / r['seconds']:.1f} images/s ({r['seconds']:.2f} s, "
          f"{len(devices)} workers, chunks per device: {r['chunks_per_device']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
