"""furiosa-serve over gRPC (inference.GRPCInferenceService), dynamic batching and deadlines, from
Python clients: stubs generated at test time with grpc_tools.protoc from the published KServe proto
(../shared/protocols/kserve-v2/grpc_predict_v2.proto, for wire compatibility); mnist-12-int8 and
MobileNetV2 with raw and typed contents equal bit for bit to furiosa-run's outputs;
health/metadata; RESOURCE_EXHAUSTED at the admission limit; DEADLINE_EXCEEDED; 64 concurrent
requests through max_batch_size 8 equal to the unbatched model's outputs; the HTTP deadline
parameter. Run by ctest (server_test_serve_grpc) like test_serve.py."""

import importlib
import json
import re
import subprocess
import sys
import threading
import time

import grpc  # Debian python3-grpcio (.ci/install-deps): when missing the tests fail, never skip
import numpy as np
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

import test_serve as ts

PROTO_DIR = ts.SHARED.parent / "protocols" / "kserve-v2"


@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    """(messages module, stub class) generated from the published proto."""
    out = tmp_path_factory.mktemp("stubs")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_DIR}", f"--python_out={out}",
                    f"--grpc_python_out={out}", str(PROTO_DIR / "grpc_predict_v2.proto")], check=True)
    sys.path.insert(0, str(out))
    try:
        messages = importlib.import_module("grpc_predict_v2_pb2")
        services = importlib.import_module("grpc_predict_v2_pb2_grpc")
    finally:
        sys.path.remove(str(out))
    return messages, services.GRPCInferenceServiceStub


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    out = {}
    for relative in (ts.MNIST, ts.MOBILENET):
        data = ts.SHARED / relative / "test_data_set_0"
        out_dir = tmp_path_factory.mktemp("ref")
        name = "Input3" if relative == ts.MNIST else "input"
        subprocess.run([str(ts.RUN), str(ts.model_file(relative)), "--input", f"{name}={data / 'input_0.pb'}",
                        "--output-dir", str(out_dir)], check=True, capture_output=True)
        out[relative] = (ts.read_pb(data / "input_0.pb"), {p.stem: np.load(p) for p in out_dir.glob("*.npy")})
    return out


class GrpcServer(ts.Server):
    """furiosa-serve with HTTP and gRPC on free loopback ports."""

    def __init__(self, repo, **kw):
        super().__init__(repo, **kw)
        try:
            m = self.wait_for(r"gRPC: 127\.0\.0\.1:(\d+)", 60)
        except BaseException:
            self.kill()
            raise
        self.channel = grpc.insecure_channel(f"127.0.0.1:{m.group(1)}")
        self.returncode = None

    def stop(self, timeout=120):
        if self.returncode is None:
            self.channel.close()
            self.returncode = super().stop(timeout)
        return self.returncode

    def stub(self, pb):
        return pb[1](self.channel)

    def metrics(self):
        text = requests.get(self.url + "/metrics").text
        return {f.name: f for f in text_string_to_metric_families(text)}


def sample(families, family, name, labels):
    for s in families[family].samples:
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return None


@pytest.fixture(scope="module")
def server(references, tmp_path_factory):
    repo = ts.make_repo(tmp_path_factory.mktemp("repo"), {
        "mnist": (ts.MNIST, {"device": "npu0pe0", "worker_num": 2}),
        "mobilenet": (ts.MOBILENET, {"device": "npu0pe1", "worker_num": 2, "max_inflight": 4}),
    })
    gate = tmp_path_factory.mktemp("gate") / "open"
    gate.touch()  # open: test_resource_exhausted_at_admission_limit closes it for a while
    with GrpcServer(repo, gate=gate) as s:
        yield s
        assert s.stop() == 0, s.output()


def infer_request(pb, model, name, x, raw=True, outputs=None, **kw):
    msgs = pb[0]
    req = msgs.ModelInferRequest(model_name=model, id="r1", **kw)
    t = req.inputs.add(name=name, datatype="FP32", shape=list(x.shape))
    if raw:
        req.raw_input_contents.append(x.astype(np.float32).tobytes())
    else:
        t.contents.fp32_contents.extend(x.astype(np.float32).flatten().tolist())
    for o in outputs or []:
        req.outputs.add(name=o)
    return req


def output_array(resp, i=0):
    o = resp.outputs[i]
    if resp.raw_output_contents:
        assert o.datatype == "FP32"
        return np.frombuffer(resp.raw_output_contents[i], dtype=np.float32).reshape(list(o.shape))
    return np.array(o.contents.fp32_contents, dtype=np.float32).reshape(list(o.shape))


def test_startup_line(server):
    assert any(l.startswith("gRPC: 127.0.0.1:") for l in server.lines)


def test_health_and_metadata(server, pb):
    msgs, stub = pb[0], server.stub(pb)
    assert stub.ServerLive(msgs.ServerLiveRequest()).live
    assert stub.ServerReady(msgs.ServerReadyRequest()).ready
    assert stub.ModelReady(msgs.ModelReadyRequest(name="mnist")).ready
    assert stub.ModelReady(msgs.ModelReadyRequest(name="mnist", version="1")).ready
    meta = stub.ServerMetadata(msgs.ServerMetadataRequest())
    assert meta.name == "furiosa-serve"
    m = stub.ModelMetadata(msgs.ModelMetadataRequest(name="mnist"))
    assert m.name == "mnist" and list(m.versions) == ["1"] and m.platform == "onnx"
    assert [(t.name, t.datatype, list(t.shape)) for t in m.inputs] == [("Input3", "FP32", [1, 1, 28, 28])]
    for call, req in ((stub.ModelMetadata, msgs.ModelMetadataRequest(name="nosuch")),
                      (stub.ModelReady, msgs.ModelReadyRequest(name="mnist", version="7"))):
        with pytest.raises(grpc.RpcError) as e:
            call(req)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "typed"])
@pytest.mark.parametrize("relative,model,name", [(ts.MNIST, "mnist", "Input3"), (ts.MOBILENET, "mobilenet", "input")],
                         ids=["mnist", "mobilenet"])
def test_infer_equals_runner(server, pb, references, raw, relative, model, name):
    x, expected = references[relative]
    resp = server.stub(pb).ModelInfer(infer_request(pb, model, name, x, raw=raw))
    assert resp.model_name == model and resp.model_version == "1" and resp.id == "r1"
    assert bool(resp.raw_output_contents) == raw
    (o,) = resp.outputs
    y = output_array(resp)
    assert np.array_equal(y, expected[o.name]), "gRPC output differs from the C++ Runner's"


def test_http_and_grpc_agree(server, pb, references):
    x, _ = references[ts.MNIST]
    r = ts.binary_infer(server.url, "mnist", "Input3", x)
    n = int(r.headers["Inference-Header-Content-Length"])
    http_y = np.frombuffer(r.content[n:], dtype=np.float32)
    grpc_y = output_array(server.stub(pb).ModelInfer(infer_request(pb, "mnist", "Input3", x)))
    assert np.array_equal(http_y, grpc_y.flatten())


def test_bad_requests(server, pb, references):
    x, _ = references[ts.MNIST]
    stub = server.stub(pb)
    cases = [
        (infer_request(pb, "mnist", "Input3", x.reshape(1, 28, 28)), grpc.StatusCode.INVALID_ARGUMENT, "Input3"),
        (infer_request(pb, "mnist", "nosuch", x), grpc.StatusCode.INVALID_ARGUMENT, "nosuch"),
        (infer_request(pb, "mnist", "Input3", x, outputs=["no_such_output"]), grpc.StatusCode.INVALID_ARGUMENT,
         "no_such_output"),
        (infer_request(pb, "nosuch", "Input3", x), grpc.StatusCode.NOT_FOUND, "nosuch"),
    ]
    for req, code, word in cases:
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelInfer(req)
        assert e.value.code() == code and word in e.value.details(), (code, e.value)
    stub.ModelInfer(infer_request(pb, "mnist", "Input3", x))  # still serving


def wait_inflight(s, model, n):
    """Waits until `model` has n requests in flight (they are held by the closed gate)."""
    deadline = time.monotonic() + 300  # a bound against hanging, not a speed claim
    while time.monotonic() < deadline:
        m = re.search(r'furiosa_serve_inflight_requests\{model="%s"\} (\S+)' % re.escape(model),
                      requests.get(s.url + "/metrics").text)
        if m and int(float(m.group(1))) >= n:
            return
        time.sleep(0.01)
    pytest.fail(f"{n} calls to {model} were not all admitted")


def test_resource_exhausted_at_admission_limit(server, pb, references):
    """With the card's gate closed, 4 MobileNetV2 calls fill max_inflight 4 and stay in flight; 28
    more are answered RESOURCE_EXHAUSTED at once; once the gate opens the 4 are answered OK with
    the right outputs."""
    x, expected = references[ts.MOBILENET]
    ref = next(iter(expected.values()))
    stub = server.stub(pb)
    server.close_gate()
    try:
        held = [stub.ModelInfer.future(infer_request(pb, "mobilenet", "input", x)) for _ in range(4)]
        wait_inflight(server, "mobilenet", 4)
        codes = []
        for _ in range(28):
            with pytest.raises(grpc.RpcError) as e:
                stub.ModelInfer(infer_request(pb, "mobilenet", "input", x), timeout=120)
            codes.append(e.value.code())
            assert "max_inflight" in e.value.details()
        assert codes == [grpc.StatusCode.RESOURCE_EXHAUSTED] * 28
        assert not any(f.done() for f in held), "a held call was answered"
    finally:
        server.open_gate()
    assert all(np.array_equal(output_array(f.result(timeout=120)), ref) for f in held)
    rejected = sample(server.metrics(), "furiosa_serve_request_failures", "furiosa_serve_request_failures_total",
                      {"model": "mobilenet", "reason": "resource_exhausted"})
    assert rejected == 28


def test_tiny_client_deadline(server, pb, references):
    x, _ = references[ts.MOBILENET]
    with pytest.raises(grpc.RpcError) as e:
        server.stub(pb).ModelInfer(infer_request(pb, "mobilenet", "input", x), timeout=0.000001)
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


def test_http_deadline_parameter(server, references):
    """parameters.timeout_us: 1 us has passed by the time the request would be submitted (504,
    counted as deadline_exceeded, never reaching the device); a generous one is served."""
    x, expected = references[ts.MNIST]
    before = sample(server.metrics(), "furiosa_serve_request_failures", "furiosa_serve_request_failures_total",
                    {"model": "mnist", "reason": "deadline_exceeded"})
    body = {"inputs": [{"name": "Input3", "datatype": "FP32", "shape": list(x.shape), "data": x.flatten().tolist()}],
            "parameters": {"timeout_us": 1}}
    r = requests.post(server.url + "/v2/models/mnist/infer", json=body)
    assert r.status_code == 504 and "deadline" in r.json()["error"], r.text
    after = sample(server.metrics(), "furiosa_serve_request_failures", "furiosa_serve_request_failures_total",
                   {"model": "mnist", "reason": "deadline_exceeded"})
    assert after == before + 1
    body["parameters"]["timeout_us"] = 60_000_000
    r = requests.post(server.url + "/v2/models/mnist/infer", json=body)
    assert r.status_code == 200, r.text
    assert np.array_equal(np.array(r.json()["outputs"][0]["data"], np.float32), next(iter(expected.values())).flatten())
    body["parameters"]["timeout_us"] = 0
    assert requests.post(server.url + "/v2/models/mnist/infer", json=body).status_code == 400


def test_metrics_names(server):
    families = server.metrics()
    for name in ("furiosa_serve_queue_duration_seconds", "furiosa_serve_batch_size", "furiosa_serve_request_failures",
                 "furiosa_npu_executions", "furiosa_npu_busy_seconds", "furiosa_host_operator_seconds"):
        assert name in families, name
    assert sample(families, "furiosa_npu_executions", "furiosa_npu_executions_total", {"device": "npu0pe0"}) > 0
    busy = sample(families, "furiosa_npu_busy_seconds", "furiosa_npu_busy_seconds_total", {"device": "npu0pe1"})
    assert 0 < busy < 60, busy
    queued = sample(families, "furiosa_serve_queue_duration_seconds", "furiosa_serve_queue_duration_seconds_count",
                    {"model": "mnist"})
    assert queued > 0
    # mnist-12-int8's quantize/dequantize run on the host (partition report), so time accrues.
    host = sample(families, "furiosa_host_operator_seconds", "furiosa_host_operator_seconds_total", {"model": "mnist"})
    assert host is not None and 0 < host < 60, host


@pytest.fixture(scope="module")
def batching_server(server, tmp_path_factory):
    """mnist unbatched on npu0pe0 and the same model with dynamic batching 8 on npu0pe1 (after the
    module's first server has stopped)."""
    assert server.stop() == 0, server.output()
    repo = ts.make_repo(tmp_path_factory.mktemp("repo-b"), {
        "mnist": (ts.MNIST, {"device": "npu0pe0", "worker_num": 2}),
        "mnist_b8": (ts.MNIST, {"device": "npu0pe1", "worker_num": 2,
                                "dynamic_batching": {"max_batch_size": 8, "max_queue_delay_us": 2_000_000}}),
    })
    with GrpcServer(repo) as s:
        yield s
        assert s.stop() == 0, s.output()


def test_dynamic_batching_equals_unbatched(batching_server, pb, references):
    """64 concurrent requests with 64 different inputs through max_batch_size 8: each answer equals
    the unbatched model's answer to the same input bit for bit, and batches > 1 were formed."""
    s = batching_server
    assert "dynamic batching 8 within 2000000 us, compiled for batches 1, 2, 4, 8" in s.output(), s.output()
    x, _ = references[ts.MNIST]
    rng = np.random.default_rng(7)
    xs = [np.clip(x + rng.normal(0, 40, x.shape), 0, 255).astype(np.float32) for _ in range(64)]
    stub = s.stub(pb)
    unbatched = [output_array(stub.ModelInfer(infer_request(pb, "mnist", "Input3", xi))) for xi in xs]
    assert len({u.tobytes() for u in unbatched}) > 1, "the inputs should give different outputs"
    results = [None] * 64

    def client(i):
        results[i] = output_array(stub.ModelInfer(infer_request(pb, "mnist_b8", "Input3", xs[i], raw=i % 2 == 0)))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(64):
        assert results[i] is not None and results[i].shape == unbatched[i].shape
        assert np.array_equal(results[i], unbatched[i]), f"request {i}: batched output differs from unbatched"
    families = s.metrics()
    count = sample(families, "furiosa_serve_batch_size", "furiosa_serve_batch_size_count", {"model": "mnist_b8"})
    total = sample(families, "furiosa_serve_batch_size", "furiosa_serve_batch_size_sum", {"model": "mnist_b8"})
    ones = [x.value for x in families["furiosa_serve_batch_size"].samples
            if x.name == "furiosa_serve_batch_size_bucket" and x.labels.get("model") == "mnist_b8"
            and float(x.labels["le"]) == 1.0][0]
    print(f"\nbatching: 64 requests in {count:.0f} executions (mean batch {total / count:.1f})")
    assert total == 64 and count < 64 and ones < count, (count, total, ones)


def test_deadline_expires_in_the_batcher(batching_server, pb, references):
    """A lone request to the batched model waits for the 2 s delay; with a 0.2 s deadline it is
    answered DEADLINE_EXCEEDED and never submitted (no batch recorded)."""
    s = batching_server
    x, _ = references[ts.MNIST]
    before = s.metrics()
    batches = sample(before, "furiosa_serve_batch_size", "furiosa_serve_batch_size_count", {"model": "mnist_b8"})
    with pytest.raises(grpc.RpcError) as e:
        s.stub(pb).ModelInfer(infer_request(pb, "mnist_b8", "Input3", x), timeout=0.2)
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    deadline = time.monotonic() + 120  # a bound against hanging: the batcher drops it by 2 s
    while time.monotonic() < deadline:
        after = s.metrics()
        expired = sample(after, "furiosa_serve_request_failures", "furiosa_serve_request_failures_total",
                         {"model": "mnist_b8", "reason": "deadline_exceeded"})
        if expired:
            break
        time.sleep(0.01)
    assert expired == 1
    assert sample(after, "furiosa_serve_batch_size", "furiosa_serve_batch_size_count", {"model": "mnist_b8"}) == batches


@pytest.mark.parametrize("execution_us", [1_000, 200_000], ids=["1ms", "200ms"])
def test_sigterm_answers_grpc_calls_in_flight(pb, references, tmp_path, execution_us):
    """SIGTERM while 8 MobileNetV2 gRPC calls are held in flight (the card's gate is closed), then
    the gate opens: each is answered OK with the right outputs and the server exits 0. Each
    inference takes `execution_us`, as on a fast and on a slow machine."""
    repo = ts.make_repo(tmp_path / "repo", {"mobilenet": (ts.MOBILENET, {"device": "npu0pe0-1", "max_inflight": 8})})
    with GrpcServer(repo, gate=tmp_path / "gate", min_execution_us=execution_us) as s:
        x, expected = references[ts.MOBILENET]
        ref = next(iter(expected.values()))
        stub = s.stub(pb)
        futures = [stub.ModelInfer.future(infer_request(pb, "mobilenet", "input", x)) for _ in range(8)]
        wait_inflight(s, "mobilenet", 8)
        s.proc.send_signal(ts.signal.SIGTERM)
        s.wait_for(r".*shutting down \(SIGTERM\)", 120)
        assert not any(f.done() for f in futures), "a held call was answered"
        s.open_gate()
        outcomes = []
        for f in futures:
            try:
                outcomes.append(np.array_equal(output_array(f.result(timeout=120)), ref))
            except grpc.RpcError as e:
                outcomes.append(e.code())
        assert s.stop() == 0, s.output()
        assert outcomes == [True] * 8, outcomes


def test_batching_refused_for_a_model_without_batch_dim_1(tmp_path):
    """dynamic_batching with batch_size != 1 stops the server at start naming the file."""
    repo = ts.make_repo(tmp_path / "repo", {
        "mnist": (ts.MNIST, {"batch_size": 2, "dynamic_batching": {"max_batch_size": 4}})})
    proc = subprocess.run([str(ts.SERVE), "--model-repository", str(repo), "--http-port", "0", "--grpc-port", "0"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "config.json" in proc.stderr and "dynamic_batching" in proc.stderr, proc.stderr


def test_batching_refused_for_a_fixed_batch_of_2(tmp_path):
    """A model whose input has a fixed dim 0 of 2 cannot take batch-1 requests: dynamic_batching
    stops the server at start with an error naming the model and the input."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "twos", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (tmp_path / "repo" / "twos" / "1").mkdir(parents=True)
    onnx.save(model, str(tmp_path / "repo" / "twos" / "1" / "model.onnx"))
    (tmp_path / "repo" / "twos" / "config.json").write_text(json.dumps({"dynamic_batching": {"max_batch_size": 4}}))
    proc = subprocess.run([str(ts.SERVE), "--model-repository", str(tmp_path / "repo"), "--http-port", "0",
                           "--grpc-port", "0"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "model 'twos'" in proc.stderr and "'x'" in proc.stderr and "dim 0 of 2" in proc.stderr, proc.stderr
