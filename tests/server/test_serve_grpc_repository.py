"""furiosa-serve's Triton extensions over gRPC (issue 30): RepositoryIndex and ModelStatistics
(the REST index's and statistics' figures, bearer token required), and load parameters: a
"config" parameter replacing config.json for one load, over gRPC (Triton's field numbers) and
REST; a bad or unknown parameter refused with the model still serving. Stubs are generated at
test time from server/proto/grpc_predict_v2.proto (the published KServe proto has none of these
RPCs), under another file name so they never clash with test_serve_grpc.py's KServe stubs. Run by
ctest (server_test_serve_grpc_repository) like test_serve.py."""

import importlib
import json
import pathlib
import re
import shutil
import subprocess
import sys
import threading

import grpc  # Debian python3-grpcio (.ci/install-deps): when missing the tests fail, never skip
import numpy as np
import pytest
import requests

import test_serve as ts
from test_serve import MNIST, make_repo
from test_serve_model_control import ServerWith, wait_until

SERVER_PROTO = pathlib.Path(__file__).resolve().parents[2] / "server" / "proto" / "grpc_predict_v2.proto"
TOKEN = "t0ken-for-tests"
AUTH = [("authorization", f"Bearer {TOKEN}")]


@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    """(messages module, stub class) generated from furiosa-serve's own proto."""
    out = tmp_path_factory.mktemp("stubs")
    shutil.copy(SERVER_PROTO, out / "furiosa_serve_v2.proto")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{out}", f"--python_out={out}",
                    f"--grpc_python_out={out}", str(out / "furiosa_serve_v2.proto")], check=True)
    sys.path.insert(0, str(out))
    try:
        messages = importlib.import_module("furiosa_serve_v2_pb2")
        services = importlib.import_module("furiosa_serve_v2_pb2_grpc")
    finally:
        sys.path.remove(str(out))
    return messages, services.GRPCInferenceServiceStub


class Served(ServerWith):
    """furiosa-serve, --model-control-mode explicit with `load` loaded, a bearer token, and a
    gRPC channel (closed by stop(); the process group is killed on failure by the with block)."""

    def __init__(self, repo, token_file, *load, **kw):
        extra = ["--model-control-mode", "explicit", "--auth-token-file", str(token_file)]
        for name in load:
            extra += ["--load-model", name]
        super().__init__(repo, extra, **kw)
        try:
            m = self.wait_for(r"gRPC: 127\.0\.0\.1:(\d+)", 60)
        except BaseException:
            self.kill()
            raise
        self.channel = grpc.insecure_channel(f"127.0.0.1:{m.group(1)}")

    def stop(self, timeout=120):
        self.channel.close()
        return super().stop(timeout)

    def get(self, path):
        return requests.get(self.url + path, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=300)

    def post(self, path, **kw):
        return requests.post(self.url + path, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=300, **kw)


@pytest.fixture
def token_file(tmp_path):
    f = tmp_path / "token"
    f.write_text(TOKEN + "\n")
    return f


def rpc_error(call, *args, **kw):
    with pytest.raises(grpc.RpcError) as e:
        call(*args, **kw)
    return e.value


def infer(messages, stub, x):
    request = messages.ModelInferRequest(model_name="mnist", inputs=[messages.ModelInferRequest.InferInputTensor(
        name="Input3", datatype="FP32", shape=list(x.shape),
        contents=messages.InferTensorContents(fp32_contents=x.flatten().tolist()))])
    return stub.ModelInfer(request, metadata=AUTH)


def rest_index(s, **body):
    r = s.post("/v2/repository/index", json=body)
    assert r.status_code == 200, r.text
    return {(row["name"], row["version"]): (row["state"], row["reason"]) for row in r.json()}


def test_grpc_repository_index_and_statistics(pb, tmp_path, token_file):
    """RepositoryIndex lists the REST index's rows (states and reasons; ready=True only READY);
    ModelStatistics after N inferences reports inference_count == success.count == N, as GET
    .../stats does; an unknown model or version is NOT_FOUND naming it, one not loaded
    UNAVAILABLE; both RPCs need the bearer token."""
    messages, Stub = pb
    repo = make_repo(tmp_path / "repo", {"mnist": (MNIST, {"device": "npu0pe0"}),
                                         "spare": (MNIST, {"device": "npu0pe1"})})
    x = np.random.default_rng(7).random((1, 1, 28, 28), dtype=np.float32)
    with Served(repo, token_file, "mnist") as s:
        stub = Stub(s.channel)
        for call, request in ((stub.RepositoryIndex, messages.RepositoryIndexRequest()),
                              (stub.ModelStatistics, messages.ModelStatisticsRequest(name="mnist"))):
            for metadata in (None, [("authorization", "Bearer wrong")]):
                e = rpc_error(call, request, metadata=metadata)
                assert e.code() == grpc.StatusCode.UNAUTHENTICATED, e

        rows = stub.RepositoryIndex(messages.RepositoryIndexRequest(), metadata=AUTH).models
        got = {(m.name, m.version): (m.state, m.reason) for m in rows}
        assert got == {("mnist", "1"): ("READY", ""), ("spare", "1"): ("UNAVAILABLE", "not loaded")}
        assert got == rest_index(s)
        rows = stub.RepositoryIndex(messages.RepositoryIndexRequest(ready=True), metadata=AUTH).models
        assert [(m.name, m.version, m.state) for m in rows] == [("mnist", "1", "READY")]

        n = 5
        for _ in range(n):
            assert infer(messages, stub, x).model_name == "mnist"
        (st,) = stub.ModelStatistics(messages.ModelStatisticsRequest(name="mnist"), metadata=AUTH).model_stats
        assert (st.name, st.version) == ("mnist", "1")
        assert st.inference_count == n and st.execution_count == n, st
        inf = st.inference_stats
        assert inf.success.count == n and inf.fail.count == 0, st
        assert inf.queue.count == n and inf.compute_infer.count == n, st
        assert inf.success.ns > 0 and inf.compute_infer.ns > 0 and st.last_inference > 0, st
        (rest,) = s.get("/v2/models/mnist/stats").json()["model_stats"]
        assert rest["inference_count"] == n and rest["inference_stats"]["success"] == {
            "count": inf.success.count, "ns": inf.success.ns}
        assert rest["last_inference"] == st.last_inference
        every = stub.ModelStatistics(messages.ModelStatisticsRequest(), metadata=AUTH).model_stats
        assert [(m.name, m.inference_count) for m in every] == [("mnist", n)]
        (one,) = stub.ModelStatistics(messages.ModelStatisticsRequest(name="mnist", version="1"),
                                      metadata=AUTH).model_stats
        assert one.inference_count == n

        for request, code, words in (
            (messages.ModelStatisticsRequest(name="nosuch"), grpc.StatusCode.NOT_FOUND, ["'nosuch'"]),
            (messages.ModelStatisticsRequest(name="mnist", version="7"), grpc.StatusCode.NOT_FOUND,
             ["'mnist'", "'7'"]),
            (messages.ModelStatisticsRequest(name="spare"), grpc.StatusCode.UNAVAILABLE, ["'spare'"]),
        ):
            e = rpc_error(stub.ModelStatistics, request, metadata=AUTH)
            assert e.code() == code and all(w in e.details() for w in words), (request, e)
        assert s.stop() == 0, s.output()


def test_load_config_parameter_over_grpc_and_rest(pb, tmp_path, token_file):
    """A "config" load parameter replaces config.json for that load (GET .../config shows it);
    a bad one, an unknown name and a "file:" parameter are refused (INVALID_ARGUMENT / 400, one
    line naming what is wrong) and the loaded model keeps serving unchanged; a load without
    parameters reads config.json again. The gRPC load names the model in Triton's field 2."""
    messages, Stub = pb
    repo = make_repo(tmp_path / "repo", {"mnist": (MNIST, {"device": "npu0pe0"})})
    x = np.random.default_rng(8).random((1, 1, 28, 28), dtype=np.float32)

    def config(s):
        r = s.get("/v2/models/mnist/config")
        assert r.status_code == 200, r.text
        c = r.json()
        return c["worker_num"], c["max_inflight"]

    def param(text):
        return messages.ModelRepositoryParameter(string_param=text)

    with Served(repo, token_file, "mnist") as s:
        stub = Stub(s.channel)
        assert config(s) == (2, 64)
        load = messages.RepositoryModelLoadRequest(triton_model_name="mnist", parameters={
            "config": param(json.dumps({"device": "npu0pe0", "worker_num": 1, "max_inflight": 5}))})
        r = stub.RepositoryModelLoad(load, metadata=AUTH)
        assert r.model_name == "mnist" and r.isLoaded
        assert config(s) == (1, 5)
        assert infer(messages, stub, x).model_name == "mnist"

        for parameters, words in (
            ({"config": param('{"max_inflight": "many"}')}, ["'config'", "max_inflight"]),
            ({"config": param('{"max_inflight": 3')}, ["'config'", "not a JSON object"]),
            ({"config": messages.ModelRepositoryParameter(int64_param=3)}, ["'config'", "string"]),
            ({"colour": param("blue")}, ["'colour'"]),
            ({"file:1/model.onnx": messages.ModelRepositoryParameter(bytes_param=b"\0")},
             ["'file:1/model.onnx'", "not supported"]),
        ):
            e = rpc_error(stub.RepositoryModelLoad,
                          messages.RepositoryModelLoadRequest(model_name="mnist", parameters=parameters),
                          metadata=AUTH)
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, (parameters, e)
            assert all(w in e.details() for w in words) and "\n" not in e.details(), (parameters, e.details())
        assert config(s) == (1, 5)
        assert infer(messages, stub, x).model_name == "mnist"
        assert rest_index(s) == {("mnist", "1"): ("READY", "")}

        # REST: {"parameters": {"config": "<json>"}}.
        r = s.post("/v2/repository/models/mnist/load",
                   json={"parameters": {"config": json.dumps({"device": "npu0pe0", "max_inflight": 6})}})
        assert r.status_code == 200, r.text
        assert config(s) == (2, 6)
        for body, words in (
            ({"parameters": {"config": '{"worker_num": 0}'}}, ["'config'", "worker_num"]),
            ({"parameters": {"colour": "blue"}}, ["'colour'"]),
            ({"parameters": {"file:1/model.onnx": "AAAA"}}, ["not supported"]),
            ({"params": {}}, ['"params"']),
        ):
            r = s.post("/v2/repository/models/mnist/load", json=body)
            assert r.status_code == 400, (body, r.text)
            error = r.json()["error"]
            assert all(w in error for w in words) and "\n" not in error, (body, error)
        assert config(s) == (2, 6)
        r = s.post("/v2/models/mnist/infer", json={"inputs": [{
            "name": "Input3", "datatype": "FP32", "shape": [1, 1, 28, 28], "data": x.flatten().tolist()}]})
        assert r.status_code == 200, r.text

        r = s.post("/v2/repository/models/mnist/load")  # no parameters: config.json again
        assert r.status_code == 200, r.text
        assert config(s) == (2, 64)
        assert s.stop() == 0, s.output()


def test_unload_parameters_over_grpc_and_rest(pb, tmp_path, token_file):
    """Triton's unload parameter unload_dependents (a bool) is accepted and unloads as a plain
    unload does; another name or a wrong type is refused (INVALID_ARGUMENT / 400, one line naming
    the parameter) and the model stays loaded, serving. gRPC names the model in Triton's field 2."""
    messages, Stub = pb
    repo = make_repo(tmp_path / "repo", {"mnist": (MNIST, {"device": "npu0pe0"})})
    x = np.random.default_rng(9).random((1, 1, 28, 28), dtype=np.float32)
    P = messages.ModelRepositoryParameter

    with Served(repo, token_file, "mnist") as s:
        stub = Stub(s.channel)
        for parameters, words in (
            ({"unload_dependents": P(string_param="true")}, ["'unload_dependents'", "true or false"]),
            ({"unload_dependents": P(int64_param=1)}, ["'unload_dependents'", "true or false"]),
            ({"config": P(string_param="{}")}, ["unknown unload parameter 'config'"]),
            ({"bad\nname": P(bool_param=True)}, ["unknown unload parameter 'bad"]),
        ):
            e = rpc_error(stub.RepositoryModelUnload,
                          messages.RepositoryModelUnloadRequest(triton_model_name="mnist", parameters=parameters),
                          metadata=AUTH)
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, (parameters, e)
            assert all(w in e.details() for w in words) and "\n" not in e.details(), (parameters, e.details())
        for body, words in (
            ({"parameters": {"unload_dependents": "yes"}}, ["'unload_dependents'", "true or false"]),
            ({"parameters": {"unload_dependents": None}}, ["'unload_dependents'"]),
            ({"parameters": {"colour": True}}, ["unknown unload parameter 'colour'"]),
            ({"parameters": {"\u00e9\u001b[31m": True}}, ["unknown unload parameter"]),
            ({"params": {}}, ['"params"', "unload request"]),
        ):
            r = s.post("/v2/repository/models/mnist/unload", json=body)
            assert r.status_code == 400, (body, r.text)
            error = r.json()["error"]
            assert all(w in error for w in words) and "\n" not in error and "\x1b" not in error, (body, error)
        assert rest_index(s) == {("mnist", "1"): ("READY", "")}
        assert infer(messages, stub, x).model_name == "mnist"

        # Accepted: gRPC with unload_dependents true, REST with false (Triton's client sends it).
        r = stub.RepositoryModelUnload(messages.RepositoryModelUnloadRequest(
            triton_model_name="mnist", parameters={"unload_dependents": P(bool_param=True)}), metadata=AUTH)
        assert r.isUnloaded and r.model_name == "mnist"
        assert rest_index(s) == {("mnist", "1"): ("UNAVAILABLE", "unloaded")}
        r = s.post("/v2/repository/models/mnist/load")
        assert r.status_code == 200, r.text
        r = s.post("/v2/repository/models/mnist/unload", json={"parameters": {"unload_dependents": False}})
        assert r.status_code == 200, r.text
        assert rest_index(s) == {("mnist", "1"): ("UNAVAILABLE", "unloaded")}
        assert s.stop() == 0, s.output()


def test_batch_stats_per_batch_size(pb, tmp_path, token_file):
    """batch_stats (REST and gRPC ModelStatistics) has one entry per batch size executed, the
    counts summing to execution_count. Without batching, 3 requests: one entry, size 1, count 3.
    With dynamic batching (max_batch_size 4, one slot) and the simulated card's gate closed: one
    request is submitted alone (the batch_size histogram shows it) and held at the gate; four more
    wait in the batcher while the slot is busy (the inflight gauge shows 5); opening the gate
    runs them as one group of 4. Nothing depends on timing."""
    messages, Stub = pb
    repo = make_repo(tmp_path / "repo", {
        "mnist": (MNIST, {"device": "npu0pe0"}),
        "batched": (MNIST, {"device": "npu0pe1", "worker_num": 1,
                            "dynamic_batching": {"max_batch_size": 4, "max_queue_delay_us": 0}}),
    })
    x = np.random.default_rng(10).random((1, 1, 28, 28), dtype=np.float32)
    body = {"inputs": [{"name": "Input3", "datatype": "FP32", "shape": [1, 1, 28, 28],
                        "data": x.flatten().tolist()}]}
    gate = tmp_path / "gate"

    def metric(s, name):
        m = re.search(r'^%s\{model="batched"\} (\S+)$' % re.escape(name), s.get("/metrics").text, re.M)
        return float(m.group(1)) if m else 0.0

    def rest_stats(s, model):
        (st,) = s.get(f"/v2/models/{model}/stats").json()["model_stats"]
        return st

    with Served(repo, token_file, "mnist", "batched", gate=gate) as s:
        stub = Stub(s.channel)
        answers = []

        def send():
            answers.append(s.post("/v2/models/batched/infer", json=body).status_code)

        threads = [threading.Thread(target=send)]
        threads[0].start()
        wait_until("the first request submitted alone",
                   lambda: metric(s, "furiosa_serve_batch_size_count") == 1, timeout=120)
        threads += [threading.Thread(target=send) for _ in range(4)]
        for t in threads[1:]:
            t.start()
        wait_until("five requests in flight",
                   lambda: metric(s, "furiosa_serve_inflight_requests") == 5, timeout=120)
        s.open_gate()
        for t in threads:
            t.join(timeout=300)
        assert answers == [200] * 5

        for _ in range(3):
            r = s.post("/v2/models/mnist/infer", json=body)
            assert r.status_code == 200, r.text

        zero = {"count": 0, "ns": 0}
        for model, sizes, executions in (("mnist", {1: 3}, 3), ("batched", {1: 1, 4: 1}, 2)):
            st = rest_stats(s, model)
            assert st["execution_count"] == executions, st
            batches = st["batch_stats"]
            assert {b["batch_size"]: b["compute_infer"]["count"] for b in batches} == sizes, st
            assert [b["batch_size"] for b in batches] == sorted(sizes), st
            assert sum(b["compute_infer"]["count"] for b in batches) == st["execution_count"]
            assert sum(b["compute_infer"]["ns"] for b in batches) == st["inference_stats"]["compute_infer"]["ns"]
            assert sum(b["batch_size"] * b["compute_infer"]["count"] for b in batches) == st["inference_count"]
            for b in batches:
                assert b["compute_infer"]["ns"] > 0 and b["compute_input"] == zero and b["compute_output"] == zero, b
            (g,) = stub.ModelStatistics(messages.ModelStatisticsRequest(name=model), metadata=AUTH).model_stats
            assert [(b.batch_size, b.compute_infer.count, b.compute_infer.ns, b.compute_input.count,
                     b.compute_output.ns) for b in g.batch_stats] == [
                (b["batch_size"], b["compute_infer"]["count"], b["compute_infer"]["ns"], 0, 0) for b in batches]
        assert s.stop() == 0, s.output()
