"""Offline batch inference on Dask (tools/dask-batch/dask_classify.py): a LocalCluster of two
single-threaded worker processes on loopback, one Runner per worker on its own PE (npu0pe0,
npu0pe1), classifies the 10,000 Fashion-MNIST test images with the project's default model; the
accuracy must be exactly the one `furiosa-run --dataset fashion-mnist` prints for the same model,
and both workers must have done work. Run by ctest (tests/CMakeLists.txt) with FURIOSA_RUN set
and PYTHONPATH=build/python."""

import os
import pathlib
import re
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "dask-batch"))
import dask_classify  # noqa: E402

MODEL = ROOT / "models" / "fashion_mnist_int8.onnx"
DATASET = pathlib.Path(dask_classify.DEFAULT_DATASET_DIR)
TIME_BOUND = 600  # a bound against hanging (furiosa-run's timeout), not a speed claim


def env_path(name):
    value = os.environ.get(name)
    if not value or not pathlib.Path(value).exists():
        pytest.fail(f"{name}={value!r} is not an existing path (run through ctest)")
    return pathlib.Path(value)


def test_dask_classifies_fashion_mnist_like_furiosa_run():
    run = env_path("FURIOSA_RUN")
    if not (DATASET / "t10k-images-idx3-ubyte.gz").exists() and not (DATASET / "t10k-images-idx3-ubyte").exists():
        pytest.fail(f"Fashion-MNIST test split missing in {DATASET} (Debian package dataset-fashion-mnist)")
    assert MODEL.exists(), f"{MODEL} missing (the project's default model)"

    # The reference: furiosa-run's own evaluation (its default model is models/fashion_mnist_int8.onnx).
    t0 = time.monotonic()
    ref = subprocess.run([str(run), str(MODEL), "--dataset", "fashion-mnist"], capture_output=True, text=True,
                         timeout=TIME_BOUND)
    assert ref.returncode == 0, ref.stdout + ref.stderr
    m = re.search(r"^top-1 accuracy: ([0-9.]+)% \((\d+)/(\d+)\)$", ref.stdout, re.M)
    assert m, "no accuracy line in furiosa-run's output:\n" + ref.stdout
    ref_correct, ref_total = int(m.group(2)), int(m.group(3))
    assert ref_total == 10000
    print(f"furiosa-run: {m.group(0)} in {time.monotonic() - t0:.1f} s")

    images, labels = dask_classify.load_fashion_mnist_test(DATASET)
    assert images.shape == (10000, 28, 28) and labels.shape == (10000,)

    from distributed import Client, LocalCluster

    t1 = time.monotonic()
    # Workers inherit this environment (PYTHONPATH=build/python, FURIOSA_SIM_LOCK_DIR) and find
    # dask_classify through PYTHONPATH.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "tools" / "dask-batch")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        started = time.monotonic() - t1
        result = dask_classify.classify(client, MODEL, ["npu0pe0", "npu0pe1"], images=images, labels=labels,
                                        chunk_size=500)
    total_s = time.monotonic() - t1
    print(f"dask: {result['correct']}/{result['total']} correct, classification {result['seconds']:.1f} s "
          f"({result['total'] / result['seconds']:.0f} images/s), cluster start {started:.1f} s, "
          f"total {total_s:.1f} s, chunks per device {result['chunks_per_device']}")
    assert result["total"] == 10000
    assert result["correct"] == ref_correct, (result["correct"], ref_correct)
    # Both workers, each on its own PE, classified chunks.
    assert set(result["chunks_per_device"]) == {"npu0pe0", "npu0pe1"}, result["chunks_per_device"]
    assert sum(result["chunks_per_device"].values()) == 20


def test_one_device_spec_per_worker_is_required():
    from distributed import Client, LocalCluster

    # In-process (inproc transport, no port): nothing but the worker count matters here.
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        with pytest.raises(ValueError, match="1 Dask workers for 2 device specs"):
            dask_classify.classify(client, MODEL, ["npu0pe0", "npu0pe1"], images=None, labels=None)
