"""furiosa-serve end to end, from Python clients over loopback: the Open Inference Protocol's
health, metadata and inference endpoints (JSON and binary tensor data), outputs equal bit for bit
to the C++ Runner's (furiosa-run), errors, load with backpressure, Prometheus metrics, and a
graceful SIGTERM. Run by ctest (tests/CMakeLists.txt) with FURIOSA_SERVE, FURIOSA_RUN and
FURIOSA_SHARED_MODELS_DIR set."""

import json
import os
import pathlib
import re
import signal
import subprocess
import threading
import time

import numpy as np
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from serve_process import ServeProcess, env_path

MNIST = "onnx-zoo/mnist-12-int8"
MOBILENET = "onnx-zoo/mobilenetv2-12-int8"
DIGITS = "furiosa-sdk/MNISTnet_uint8_quant_without_softmax"


SHARED = env_path("FURIOSA_SHARED_MODELS_DIR")
SERVE = env_path("FURIOSA_SERVE")
RUN = env_path("FURIOSA_RUN")


def read_pb(path):
    import onnx
    from onnx import numpy_helper

    t = onnx.TensorProto()
    t.ParseFromString(pathlib.Path(path).read_bytes())
    return numpy_helper.to_array(t)


def model_file(relative):
    folder = SHARED / relative
    files = sorted(folder.glob("*.onnx")) + sorted(folder.glob("*.tflite"))
    if not files:
        pytest.fail(f"no model in {folder} (../shared/models)")
    return files[0]


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """furiosa-run's outputs (the C++ Runner) for test_data_set_0 of mnist and MobileNetV2,
    computed before any server holds a device."""
    out = {}
    for relative in (MNIST, MOBILENET):
        data = SHARED / relative / "test_data_set_0"
        out_dir = tmp_path_factory.mktemp("ref")
        name = "Input3" if relative == MNIST else "input"
        subprocess.run([str(RUN), str(model_file(relative)), "--input", f"{name}={data / 'input_0.pb'}",
                        "--output-dir", str(out_dir)], check=True, capture_output=True)
        out[relative] = (read_pb(data / "input_0.pb"), {p.stem: np.load(p) for p in out_dir.glob("*.npy")})
    return out


class Server(ServeProcess):
    """furiosa-serve on free loopback ports over a model repository (serve_process.py: its own
    lock directory and process group, killed when the test ends); keyword arguments as
    ServeProcess's (gate, min_execution_us)."""

    def __init__(self, repo, **kw):
        super().__init__([SERVE, "--model-repository", repo, "--host", "127.0.0.1", "--http-port", "0",
                          "--grpc-port", "0"], **kw)


def make_repo(root, models):
    """models: {name: (relative shared folder, config dict)}."""
    for name, (relative, config) in models.items():
        src = model_file(relative)
        version = root / name / "1"
        version.mkdir(parents=True)
        (version / f"model{src.suffix}").symlink_to(src)
        (root / name / "config.json").write_text(json.dumps(config))
    return root


@pytest.fixture(scope="module")
def server(references, tmp_path_factory):
    repo = make_repo(tmp_path_factory.mktemp("repo"), {
        "mnist": (MNIST, {"device": "npu0pe0", "worker_num": 2}),
        "mobilenet": (MOBILENET, {"device": "npu0pe1", "worker_num": 2}),
    })
    with Server(repo) as s:
        yield s
        assert s.stop() == 0, s.output()


def test_startup_lines(server):
    text = "".join(server.lines)
    assert "model mnist version 1:" in text and "model mobilenet version 1:" in text


def test_health_and_metadata(server):
    assert requests.get(server.url + "/v2/health/live").status_code == 200
    assert requests.get(server.url + "/v2/health/ready").status_code == 200
    meta = requests.get(server.url + "/v2").json()
    assert meta["name"] == "furiosa-serve" and "binary_tensor_data" in meta["extensions"]
    m = requests.get(server.url + "/v2/models/mnist").json()
    assert m["name"] == "mnist" and m["versions"] == ["1"] and m["platform"] == "onnx"
    assert m["inputs"] == [{"name": "Input3", "datatype": "FP32", "shape": [1, 1, 28, 28]}]
    assert requests.get(server.url + "/v2/models/mnist/versions/1").json() == m
    assert requests.get(server.url + "/v2/models/mnist/ready").status_code == 200
    assert requests.get(server.url + "/v2/models/mnist/versions/1/ready").status_code == 200
    r = requests.get(server.url + "/v2/models/nosuch")
    assert r.status_code == 404 and "nosuch" in r.json()["error"]
    assert requests.get(server.url + "/v2/models/mnist/versions/7").status_code == 404


def test_json_infer_equals_runner(server, references):
    x, expected = references[MNIST]
    body = {"id": "q1", "inputs": [{"name": "Input3", "datatype": "FP32", "shape": list(x.shape),
                                    "data": x.flatten().tolist()}]}
    r = requests.post(server.url + "/v2/models/mnist/infer", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["id"] == "q1" and out["model_name"] == "mnist"
    (o,) = out["outputs"]
    y = np.array(o["data"], dtype=np.float32).reshape(o["shape"])
    ref = expected[o["name"]]
    assert o["datatype"] == "FP32" and y.shape == ref.shape
    assert np.array_equal(y, ref), "JSON output differs from the C++ Runner's"


def binary_infer(url, model, name, x, outputs=None):
    header = {"inputs": [{"name": name, "datatype": "FP32", "shape": list(x.shape),
                          "parameters": {"binary_data_size": x.nbytes}}],
              "parameters": {"binary_data_output": True}}
    if outputs:
        header["outputs"] = [{"name": n} for n in outputs]
    text = json.dumps(header).encode()
    return requests.post(f"{url}/v2/models/{model}/infer", data=text + x.astype(np.float32).tobytes(),
                         headers={"Inference-Header-Content-Length": str(len(text)),
                                  "Content-Type": "application/octet-stream"})


def test_binary_infer_equals_runner(server, references):
    x, expected = references[MOBILENET]
    r = binary_infer(server.url, "mobilenet", "input", x)
    assert r.status_code == 200, r.text
    n = int(r.headers["Inference-Header-Content-Length"])
    header = json.loads(r.content[:n])
    (o,) = header["outputs"]
    size = o["parameters"]["binary_data_size"]
    y = np.frombuffer(r.content[n:n + size], dtype=np.float32).reshape(o["shape"])
    assert len(r.content) == n + size
    assert np.array_equal(y, expected[o["name"]]), "binary output differs from the C++ Runner's"


def test_bad_requests_name_the_problem(server, references):
    x, _ = references[MNIST]
    url = server.url + "/v2/models/mnist/infer"
    r = requests.post(url, json={"inputs": [{"name": "Input3", "datatype": "FP32", "shape": [1, 28, 28],
                                             "data": x.flatten().tolist()}]})
    assert r.status_code == 400 and "Input3" in r.json()["error"] and "shape" in r.json()["error"]
    r = requests.post(url, json={"inputs": [{"name": "Input3", "datatype": "UINT8", "shape": [1, 1, 28, 28],
                                             "data": [0] * 784}]})
    assert r.status_code == 400 and "datatype UINT8" in r.json()["error"]
    r = requests.post(url, data=b"{oops")
    assert r.status_code == 400 and "JSON" in r.json()["error"]
    r = binary_infer(server.url, "mnist", "Input3", x, outputs=["no_such_output"])
    assert r.status_code == 400 and "no_such_output" in r.json()["error"]
    assert requests.get(server.url + "/v2/nothing").status_code == 404
    # The server still answers after the errors.
    assert binary_infer(server.url, "mnist", "Input3", x).status_code == 200


def test_models_without_config_share_the_default_device(references, tmp_path):
    """Three models and no config.json: each takes the default device spec (one fused PE), and
    all three are served from it side by side (before, the second failed with DeviceBusy). Two of
    them answer equal to furiosa-run's outputs; the device's execution counter counts every
    model's executions once."""
    repo = tmp_path / "repo"
    for name, relative in (("mnist", MNIST), ("mobilenet", MOBILENET), ("digits", DIGITS)):
        src = model_file(relative)
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / f"model{src.suffix}").symlink_to(src)
    with Server(repo) as s:
        out = s.output()
        assert len(re.findall(r"(?m)^model \w+ version 1: .*device default", out)) == 3, out
        for model, relative, name in (("mnist", MNIST, "Input3"), ("mobilenet", MOBILENET, "input")):
            x, expected = references[relative]
            r = binary_infer(s.url, model, name, x)
            assert r.status_code == 200, r.text
            k = int(r.headers["Inference-Header-Content-Length"])
            ref = next(iter(expected.values()))
            assert np.array_equal(np.frombuffer(r.content[k:], dtype=np.float32).reshape(ref.shape), ref)
        meta = requests.get(s.url + "/v2/models/digits").json()
        digits_input = meta["inputs"][0]
        x = np.zeros(digits_input["shape"], dtype=np.uint8)
        body = {"inputs": [{"name": digits_input["name"], "datatype": digits_input["datatype"],
                            "shape": digits_input["shape"], "data": x.flatten().tolist()}]}
        r = requests.post(s.url + "/v2/models/digits/infer", json=body)
        assert r.status_code == 200, r.text
        families = {f.name: f for f in text_string_to_metric_families(requests.get(s.url + "/metrics").text)}
        executions = {sample.labels["device"]: sample.value for sample in families["furiosa_npu_executions"].samples
                      if sample.name.endswith("_total")}
        assert executions == {"npu0pe0-1": 3.0}, executions
        assert s.stop() == 0, s.output()


def test_triton_introspection_extensions(server, references):
    """Triton's read-only extensions: the repository index lists both models READY; a model's
    config shows what the server applies; its statistics count the requests this test sends
    (success and failure, each with time), and the all-models form lists both."""
    index = requests.post(server.url + "/v2/repository/index", json={})
    assert index.status_code == 200, index.text
    assert {(m["name"], m["version"], m["state"]) for m in index.json()} == {("mnist", "1", "READY"),
                                                                            ("mobilenet", "1", "READY")}
    config = requests.get(server.url + "/v2/models/mnist/config").json()
    assert config["device"] == "npu0pe0" and config["worker_num"] == 2 and config["max_batch_size"] == 0
    assert config["input"][0]["name"] == "Input3" and config["input"][0]["dims"] == [1, 1, 28, 28]
    before = requests.get(server.url + "/v2/models/mnist/stats").json()["model_stats"][0]
    x, _ = references[MNIST]
    for _ in range(3):
        assert binary_infer(server.url, "mnist", "Input3", x).status_code == 200
    after = requests.get(server.url + "/v2/models/mnist/versions/1/stats").json()["model_stats"][0]
    s0, s1 = before["inference_stats"], after["inference_stats"]
    assert after["name"] == "mnist" and after["version"] == "1"
    assert s1["success"]["count"] == s0["success"]["count"] + 3
    assert s1["success"]["ns"] > s0["success"]["ns"]
    assert s1["queue"]["count"] == s0["queue"]["count"] + 3
    assert after["execution_count"] == before["execution_count"] + 3
    assert s1["compute_infer"]["count"] == after["execution_count"]
    assert s1["compute_infer"]["ns"] > s0["compute_infer"]["ns"]
    assert after["last_inference"] >= before["last_inference"] and after["last_inference"] > 0
    every = requests.get(server.url + "/v2/models/stats").json()["model_stats"]
    assert [m["name"] for m in every] == ["mnist", "mobilenet"]
    meta = requests.get(server.url + "/v2").json()
    assert {"model_repository", "statistics", "model_configuration"} <= set(meta["extensions"])


def test_metrics_are_prometheus_text(server, references):
    x, _ = references[MNIST]
    for _ in range(3):
        assert binary_infer(server.url, "mnist", "Input3", x).status_code == 200
    text = requests.get(server.url + "/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}  # raises on bad syntax
    requests_total = families["furiosa_serve_requests"]
    ok = [s.value for s in requests_total.samples
          if s.name == "furiosa_serve_requests_total" and s.labels == {"model": "mnist", "outcome": "success"}]
    assert ok and ok[0] >= 3
    assert "furiosa_serve_request_duration_seconds" in families
    assert "furiosa_serve_inflight_requests" in families


def test_load_two_models_every_request_answered_once(references, tmp_path):
    """5,000 requests from 32 concurrent clients against two models: each answered once with 200
    or 429 (max_inflight 8 per model against 16 clients each), no 5xx."""
    repo = make_repo(tmp_path / "repo", {
        "mnist": (MNIST, {"device": "npu0pe0", "worker_num": 2, "max_inflight": 8}),
        "digits": (DIGITS, {"device": "npu0pe1", "worker_num": 2, "max_inflight": 8}),
    })
    with Server(repo) as s:
        x, expected = references[MNIST]
        mnist_ref = next(iter(expected.values()))
        digits_x = np.zeros((1, 28, 28, 1), np.uint8)
        total, clients = 5000, 32
        statuses, latencies, wrong = [], [], []
        lock = threading.Lock()

        def client(k):
            session = requests.Session()
            for i in range(k, total, clients):
                t0 = time.perf_counter()
                try:
                    if i % 2 == 0:
                        r = binary_infer(s.url, "mnist", "Input3", x)
                    else:
                        header = json.dumps({"inputs": [{"name": "input", "datatype": "UINT8",
                                                         "shape": [1, 28, 28, 1],
                                                         "parameters": {"binary_data_size": 784}}]}).encode()
                        r = session.post(s.url + "/v2/models/digits/infer", data=header + digits_x.tobytes(),
                                         headers={"Inference-Header-Content-Length": str(len(header))})
                except requests.RequestException as e:  # recorded, so a failure says what happened
                    with lock:
                        statuses.append(f"{type(e).__name__}: {e}")
                    continue
                dt = time.perf_counter() - t0
                with lock:
                    statuses.append(r.status_code)
                    latencies.append(dt)
                    if i % 2 == 0 and r.status_code == 200:
                        n = int(r.headers["Inference-Header-Content-Length"])
                        y = np.frombuffer(r.content[n:], dtype=np.float32).reshape(mnist_ref.shape)
                        if not np.array_equal(y, mnist_ref):
                            wrong.append(i)

        threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
        assert len(statuses) == total
        counts = {c: statuses.count(c) for c in set(statuses)}
        assert set(counts) <= {200, 429}, counts
        assert counts.get(200, 0) > 0 and not wrong
        p99 = float(np.percentile(latencies, 99)) * 1e3
        print(f"\nload: {total} requests, 32 clients, {elapsed:.1f} s ({total / elapsed:.0f}/s), "
              f"statuses {counts}, p50 {np.percentile(latencies, 50) * 1e3:.1f} ms, p99 {p99:.1f} ms")
        assert s.stop() == 0, s.output()


def inflight(s, model):
    """furiosa_serve_inflight_requests of `model` now."""
    gauge = re.compile(r'furiosa_serve_inflight_requests\{model="%s"\} (\S+)' % re.escape(model))
    m = gauge.search(requests.get(s.url + "/metrics").text)
    return int(float(m.group(1))) if m else 0


def send_and_wait_admitted(s, model, input_name, x, ref, n):
    """Starts n client threads each sending one binary inference of x to `model` and waits until
    the in-flight gauge shows all n admitted; the caller holds them in flight (a closed gate, or
    the batcher's queue delay), so nothing here depends on how fast inferences run. Returns
    (threads, results): results[i] becomes (status, outputs equal ref) or ("unanswered", why)
    when client i is done."""
    results = [None] * n

    def client(i):
        try:
            r = binary_infer(s.url, model, input_name, x)
            k = int(r.headers.get("Inference-Header-Content-Length", 0))
            ok = r.status_code == 200 and np.array_equal(
                np.frombuffer(r.content[k:], dtype=np.float32).reshape(ref.shape), ref)
            results[i] = (r.status_code, ok)
        except requests.RequestException as e:
            results[i] = ("unanswered", str(e))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 300  # a bound against hanging: they are held, so they get there
    while time.monotonic() < deadline:
        if inflight(s, model) >= n:
            return threads, results
        assert all(r is None for r in results), f"a request was answered while held: {results}"
        time.sleep(0.01)
    pytest.fail(f"the requests were not all admitted: {inflight(s, model)} of {n} in flight")


@pytest.mark.parametrize("execution_us", [1_000, 200_000], ids=["1ms", "200ms"])
def test_sigterm_answers_requests_in_flight(references, tmp_path, execution_us):
    """16 requests held in flight (the simulated card's gate is closed) fill max_inflight, so one
    more is answered 429 at once; SIGTERM while they are held, then the gate opens: each admitted
    one is answered 200 with the right outputs and the server exits 0. Each inference takes
    `execution_us`, as on a fast and on a slow machine."""
    repo = make_repo(tmp_path / "repo", {"mobilenet": (MOBILENET, {"device": "npu0pe0-1", "worker_num": 2,
                                                                   "max_inflight": 16})})
    with Server(repo, gate=tmp_path / "gate", min_execution_us=execution_us) as s:
        x, expected = references[MOBILENET]
        ref = next(iter(expected.values()))
        n = 16
        threads, results = send_and_wait_admitted(s, "mobilenet", "input", x, ref, n)
        rejected = binary_infer(s.url, "mobilenet", "input", x)
        assert rejected.status_code == 429 and "max_inflight" in rejected.json()["error"]
        s.proc.send_signal(signal.SIGTERM)
        s.wait_for(r".*shutting down \(SIGTERM\)", 120)
        assert results == [None] * n, f"answered before the gate opened: {results}"
        s.open_gate()
        code = s.stop()
        for t in threads:
            t.join()
        assert code == 0, s.output()
        assert results == [(200, True)] * n, results


def test_sigterm_answers_200_requests_in_flight(references, tmp_path):
    """200 requests in flight at SIGTERM -- held in mnist's dynamic batcher, whose 60 s queue delay
    would otherwise keep them there -- are all answered 200 with the right outputs, and the server
    exits 0 long before the delay: shutdown hands the queued batch to the device and answers it."""
    n = 200
    repo = make_repo(tmp_path / "repo", {"mnist": (MNIST, {
        "device": "npu0pe0", "worker_num": 2, "max_inflight": 256,
        "dynamic_batching": {"max_batch_size": 256, "max_queue_delay_us": 60_000_000}})})
    with Server(repo) as s:
        x, expected = references[MNIST]
        ref = next(iter(expected.values()))
        threads, results = send_and_wait_admitted(s, "mnist", "Input3", x, ref, n)
        assert results == [None] * n, "a request was answered before SIGTERM: the batcher did not hold them"
        code = s.stop(timeout=50)  # the queue delay is 60 s: a shutdown that waited for it is killed
        for t in threads:
            t.join()
        assert code == 0, s.output()
        assert results == [(200, True)] * n, results
