"""furiosa-serve's model control and introspection (Triton's model repository and statistics
extensions, issue 30): the repository index, load/unload with --model-control-mode explicit (a
graceful unload, the device released for another model), none refusing them, version policies,
and statistics counting the requests sent. Over HTTP, plus gRPC's RepositoryModelLoad/Unload
(Triton's RepositoryIndex and ModelStatistics: test_serve_grpc_repository.py). Run by ctest
(tests/CMakeLists.txt) like test_serve.py."""

import json
import os
import shutil
import subprocess
import threading
import time

import grpc
import numpy as np
import pytest
import requests

import test_serve as ts
from test_serve import MNIST, Server, make_repo
from test_serve_grpc import pb, references  # noqa: F401 (fixtures)

def json_infer(url, model, x, version=None):
    path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
    body = {"inputs": [{"name": "Input3", "datatype": "FP32", "shape": list(x.shape),
                        "data": x.flatten().tolist()}]}
    return requests.post(url + path, json=body, timeout=300)


def output_of(r):
    (o,) = r.json()["outputs"]
    return np.array(o["data"], dtype=np.float32).reshape(o["shape"])


def index(s, **body):
    r = requests.post(s.url + "/v2/repository/index", json=body)
    assert r.status_code == 200, r.text
    return {(row["name"], row["version"]): (row["state"], row["reason"]) for row in r.json()}


def wait_until(what, predicate, timeout=300, interval=0.01):
    """Polls `predicate` every `interval` s until true (`timeout`: a bound against hanging, not a
    speed claim)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"not reached within {timeout} s: {what}")
        time.sleep(interval)


def explicit(repo, *load, **kw):
    args = ["--model-control-mode", "explicit"]
    for name in load:
        args += ["--load-model", name]
    return ServerWith(repo, args, **kw)


class ServerWith(Server):
    """furiosa-serve with extra command-line arguments."""

    def __init__(self, repo, extra, **kw):
        ts.ServeProcess.__init__(self, [ts.SERVE, "--model-repository", repo, "--host", "127.0.0.1",
                                        "--http-port", "0", "--grpc-port", "0", *extra], **kw)


def test_unload_load_round_trip_releases_the_device(references, tmp_path):  # noqa: F811
    """mnist holds the card's fused PE pair npu0pe0-1, digits asks for npu0pe0 (a different
    device file over the same core: DeviceBusy while mnist holds it, docs/serving.md "Model
    repository"); only mnist is loaded at start: the index shows mnist READY and digits
    UNAVAILABLE, and loading digits fails naming the busy device. Unloading mnist answers its
    requests 503 naming it and releases the PEs, so digits loads; loading mnist again (after
    digits is unloaded) answers correctly. The statistics count exactly the requests sent."""
    repo = make_repo(tmp_path / "repo", {
        "mnist": (MNIST, {"device": "npu0pe0-1"}),
        "digits": (ts.DIGITS, {"device": "npu0pe0"}),
    })
    x, expected = references[MNIST]
    ref = next(iter(expected.values()))
    with explicit(repo, "mnist") as s:
        assert index(s) == {("digits", "1"): ("UNAVAILABLE", "not loaded"), ("mnist", "1"): ("READY", "")}
        assert index(s, ready=True) == {("mnist", "1"): ("READY", "")}
        r = requests.post(s.url + "/v2/models/digits/infer", json={"inputs": []})
        assert r.status_code == 503 and "'digits'" in r.json()["error"], r.text
        r = requests.post(s.url + "/v2/repository/models/digits/load")
        assert r.status_code == 500 and "npu0pe0" in r.json()["error"], r.text
        state, reason = index(s)[("digits", "1")]
        assert state == "UNAVAILABLE" and "npu0pe0" in reason, reason

        for _ in range(3):
            r = json_infer(s.url, "mnist", x)
            assert r.status_code == 200 and np.array_equal(output_of(r), ref), r.text
        bad = requests.post(s.url + "/v2/models/mnist/infer", json={"inputs": [{"name": "nope"}]})
        assert bad.status_code == 400
        (st,) = requests.get(s.url + "/v2/models/mnist/stats").json()["model_stats"]
        assert st["name"] == "mnist" and st["version"] == "1"
        assert st["inference_count"] == 3 and st["execution_count"] == 3, st
        inf = st["inference_stats"]
        assert inf["success"]["count"] == 3 and inf["fail"]["count"] == 0, st  # 400s are not admitted
        assert inf["queue"]["count"] == 3 and inf["compute_infer"]["count"] == 3, st
        assert all(inf[k]["ns"] > 0 for k in ("success", "queue", "compute_infer")), st
        assert st["last_inference"] > 0

        r = requests.post(s.url + "/v2/repository/models/mnist/unload", json={})
        assert r.status_code == 200, r.text
        assert index(s)[("mnist", "1")] == ("UNAVAILABLE", "unloaded")
        r = json_infer(s.url, "mnist", x)
        assert r.status_code == 503 and "'mnist'" in r.json()["error"], r.text
        assert requests.get(s.url + "/v2/models/mnist/ready").status_code == 503
        assert requests.get(s.url + "/v2/models/stats").json()["model_stats"] == []

        # The PEs mnist held are free: digits loads on one of them and answers.
        r = requests.post(s.url + "/v2/repository/models/digits/load")
        assert r.status_code == 200, r.text
        (i,) = requests.get(s.url + "/v2/models/digits").json()["inputs"]
        r = requests.post(s.url + "/v2/models/digits/infer", json={"inputs": [{
            "name": i["name"], "datatype": i["datatype"], "shape": i["shape"],
            "data": [0] * int(np.prod(i["shape"]))}]})
        assert r.status_code == 200 and r.json()["outputs"][0]["shape"] == [1, 1, 1, 10], r.text
        r = requests.post(s.url + "/v2/repository/models/digits/unload")
        assert r.status_code == 200, r.text

        r = requests.post(s.url + "/v2/repository/models/mnist/load")
        assert r.status_code == 200, r.text
        assert index(s) == {("digits", "1"): ("UNAVAILABLE", "unloaded"), ("mnist", "1"): ("READY", "")}
        for _ in range(2):
            r = json_infer(s.url, "mnist", x)
            assert r.status_code == 200 and np.array_equal(output_of(r), ref), r.text
        (st,) = requests.get(s.url + "/v2/models/mnist/versions/1/stats").json()["model_stats"]
        assert st["inference_count"] == 2 and st["inference_stats"]["success"]["count"] == 2, st

        r = requests.post(s.url + "/v2/repository/models/no_such/load")
        assert r.status_code == 404 and "'no_such'" in r.json()["error"], r.text
        r = requests.post(s.url + "/v2/repository/models/no_such/unload")
        assert r.status_code == 404 and "'no_such'" in r.json()["error"], r.text
        assert s.stop() == 0, s.output()


def test_unload_answers_requests_already_admitted(references, tmp_path):  # noqa: F811
    """A request held in flight (the simulated card's gate is closed) when the unload arrives is
    answered 200 with the right outputs; while the unload waits for it the model is UNLOADING and a
    new request gets 503 naming the model; the unload answers once the held request is done."""
    repo = make_repo(tmp_path / "repo", {"mnist": (MNIST, {"device": "npu0pe0"})})
    x, expected = references[MNIST]
    ref = next(iter(expected.values()))
    with explicit(repo, "*", gate=tmp_path / "gate") as s:
        held, unload = [], []
        t1 = threading.Thread(target=lambda: held.append(json_infer(s.url, "mnist", x)))
        t1.start()
        wait_until("the held request admitted", lambda: ts.inflight(s, "mnist") == 1)
        t2 = threading.Thread(target=lambda: unload.append(
            requests.post(s.url + "/v2/repository/models/mnist/unload", timeout=300)))
        t2.start()
        wait_until("mnist UNLOADING", lambda: index(s)[("mnist", "1")][0] == "UNLOADING")
        r = json_infer(s.url, "mnist", x)
        assert r.status_code == 503 and "'mnist'" in r.json()["error"] and "unloading" in r.json()["error"]
        assert not held and not unload, "answered while the device was held"
        s.open_gate()
        t1.join()
        t2.join()
        assert held[0].status_code == 200 and np.array_equal(output_of(held[0]), ref), held[0].text
        assert unload[0].status_code == 200, unload[0].text
        assert index(s)[("mnist", "1")] == ("UNAVAILABLE", "unloaded")
        assert s.stop() == 0, s.output()


def test_model_control_none_refuses_load_and_unload(tmp_path):
    repo = make_repo(tmp_path / "repo", {"mnist": (MNIST, {"device": "npu0pe0"})})
    with Server(repo) as s:
        assert index(s) == {("mnist", "1"): ("READY", "")}
        for op in ("load", "unload"):
            r = requests.post(s.url + f"/v2/repository/models/mnist/{op}")
            assert r.status_code == 400, r.text
            error = r.json()["error"]
            assert "'mnist'" in error and "--model-control-mode" in error and "\n" not in error
        r = requests.post(s.url + "/v2/repository/index", data="[1]")
        assert r.status_code == 400
        assert s.stop() == 0, s.output()


def test_version_policy_all_serves_two_versions(references, tmp_path):  # noqa: F811
    """version_policy all: both versions served, each on a PE of its own (warboy(1)*1); an
    explicit version routes to it, no version to the highest; an unserved version is 404 naming
    model and version; statistics per version count the requests each got."""
    repo = make_repo(tmp_path / "repo", {"mnist": (MNIST, {"device": "warboy(1)*1",
                                                           "version_policy": {"all": {}}})})
    (repo / "mnist" / "2").mkdir()
    (repo / "mnist" / "2" / "model.onnx").symlink_to(ts.model_file(MNIST))
    x, expected = references[MNIST]
    ref = next(iter(expected.values()))
    with Server(repo) as s:
        assert index(s) == {("mnist", "1"): ("READY", ""), ("mnist", "2"): ("READY", "")}
        meta = requests.get(s.url + "/v2/models/mnist").json()
        assert meta["versions"] == ["1", "2"], meta
        sent = {"1": 2, "2": 1}
        for version, n in sent.items():
            for _ in range(n):
                r = json_infer(s.url, "mnist", x, version)
                assert r.status_code == 200 and r.json()["model_version"] == version, r.text
                assert np.array_equal(output_of(r), ref)
        r = json_infer(s.url, "mnist", x)
        assert r.status_code == 200 and r.json()["model_version"] == "2", r.text
        sent["2"] += 1
        r = json_infer(s.url, "mnist", x, "3")
        assert r.status_code == 404 and "'mnist'" in r.json()["error"] and "'3'" in r.json()["error"], r.text
        stats = requests.get(s.url + "/v2/models/mnist/stats").json()["model_stats"]
        assert {st["version"]: st["inference_count"] for st in stats} == sent, stats
        assert {st["version"]: st["inference_stats"]["success"]["count"] for st in stats} == sent
        assert s.stop() == 0, s.output()


def test_version_policy_specific_and_latest(tmp_path):
    """specific [1] serves version 1 of three; latest 2 serves 2 and 3 (explicit loads of one
    model at a time, since each version takes a PE of the card's two)."""
    repo = make_repo(tmp_path / "repo", {"mnist": (MNIST, {"device": "warboy(1)*1",
                                                           "version_policy": {"specific": {"versions": [1]}}})})
    for v in ("2", "3"):
        (repo / "mnist" / v).mkdir()
        (repo / "mnist" / v / "model.onnx").symlink_to(ts.model_file(MNIST))
    with explicit(repo, "mnist") as s:
        assert index(s) == {("mnist", "1"): ("READY", "")}
        assert requests.get(s.url + "/v2/models/mnist/versions/3").status_code == 404
        (repo / "mnist" / "config.json").write_text(
            '{"device": "warboy(1)*1", "version_policy": {"latest": {"num_versions": 2}}}')
        r = requests.post(s.url + "/v2/repository/models/mnist/load")  # a reload re-reads config.json
        assert r.status_code == 200, r.text
        assert index(s) == {("mnist", "2"): ("READY", ""), ("mnist", "3"): ("READY", "")}
        assert requests.get(s.url + "/v2/models/mnist").json()["versions"] == ["2", "3"]
        (repo / "mnist" / "config.json").write_text('{"version_policy": {"specific": {"versions": [9]}}}')
        r = requests.post(s.url + "/v2/repository/models/mnist/load")
        error = r.json()["error"]
        assert r.status_code == 500 and "'mnist'" in error and "9" in error, r.text
        state, reason = index(s)[("mnist", "")]
        assert state == "UNAVAILABLE" and "9" in reason
        assert s.stop() == 0, s.output()


def test_grpc_repository_load_unload(pb, references, tmp_path):  # noqa: F811
    messages, _ = pb
    repo = make_repo(tmp_path / "repo", {"mnist": (MNIST, {"device": "npu0pe0"})})
    with explicit(repo) as s:
        m = s.wait_for(r"gRPC: 127\.0\.0\.1:(\d+)", 60)
        with grpc.insecure_channel(f"127.0.0.1:{m.group(1)}") as channel:
            stub = pb[1](channel)
            ready = stub.ModelReady(messages.ModelReadyRequest(name="mnist"))
            assert not ready.ready
            r = stub.RepositoryModelLoad(messages.RepositoryModelLoadRequest(model_name="mnist"))
            assert r.model_name == "mnist" and r.isLoaded
            assert stub.ModelReady(messages.ModelReadyRequest(name="mnist")).ready
            assert index(s) == {("mnist", "1"): ("READY", "")}
            r = stub.RepositoryModelUnload(messages.RepositoryModelUnloadRequest(model_name="mnist"))
            assert r.model_name == "mnist" and r.isUnloaded
            with pytest.raises(grpc.RpcError) as e:
                stub.ModelMetadata(messages.ModelMetadataRequest(name="mnist"))
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE and "'mnist'" in e.value.details()
            with pytest.raises(grpc.RpcError) as e:
                stub.RepositoryModelLoad(messages.RepositoryModelLoadRequest(model_name="nosuch"))
            assert e.value.code() == grpc.StatusCode.NOT_FOUND and "'nosuch'" in e.value.details()
        assert s.stop() == 0, s.output()


def test_command_line_refuses_unknown_or_misplaced_load_model(tmp_path):
    """--load-model naming no model of the repository stops the start with one line naming it;
    --load-model without --model-control-mode explicit is refused (poll loads every model), and
    --repository-poll-secs without poll."""
    repo = make_repo(tmp_path / "repo", {"mnist": (MNIST, {"device": "npu0pe0"})})
    locks = tmp_path / "locks"  # the simulator's own, should a start get that far
    locks.mkdir(mode=0o700)
    env = dict(os.environ, FURIOSA_SIM_LOCK_DIR=str(locks))
    base = [str(ts.SERVE), "--model-repository", str(repo), "--http-port", "0", "--grpc-port", "0"]
    for extra, words in (
        (["--model-control-mode", "explicit", "--load-model", "nosuch"], ["--load-model", "'nosuch'"]),
        (["--load-model", "mnist"], ["--load-model", "explicit"]),
        (["--model-control-mode", "poll", "--load-model", "mnist"], ["--load-model", "explicit"]),
        (["--repository-poll-secs", "5"], ["--repository-poll-secs", "poll"]),
    ):
        p = subprocess.run(base + extra, capture_output=True, text=True, timeout=120, env=env)
        assert p.returncode != 0 and "HTTP:" not in p.stdout, (extra, p.stdout, p.stderr)
        assert all(w in p.stderr for w in words), (extra, p.stderr)


def test_poll_follows_the_repository(tmp_path):
    """--model-control-mode poll: every model is loaded at start; a model folder added becomes
    READY, one whose config.json changes is reloaded with it, one removed is unloaded and leaves
    the index (404), each seen by the poll thread (--repository-poll-secs 1; the test waits on
    the index, up to 60 s, never for a fixed time). Explicit load/unload are refused 400 as
    Triton refuses them when polling."""
    repo = make_repo(tmp_path / "repo", {"mnist": (MNIST, {"device": "npu0pe0"})})
    with ServerWith(repo, ["--model-control-mode", "poll", "--repository-poll-secs", "1"]) as s:
        assert index(s) == {("mnist", "1"): ("READY", "")}
        r = requests.post(s.url + "/v2/repository/models/mnist/unload")
        assert r.status_code == 400 and "polling" in r.json()["error"], r.text
        r = requests.post(s.url + "/v2/repository/models/mnist/load")
        assert r.status_code == 400 and "polling" in r.json()["error"], r.text

        # Built aside, then renamed in: the poll never sees half a folder.
        make_repo(tmp_path / "staging", {"digits": (ts.DIGITS, {"device": "npu0pe1"})})
        (tmp_path / "staging" / "digits").rename(repo / "digits")
        wait_until("digits READY", lambda: index(s).get(("digits", "1")) == ("READY", ""), timeout=60, interval=0.1)
        assert requests.get(s.url + "/v2/models/digits/ready").status_code == 200

        def max_inflight():
            r = requests.get(s.url + "/v2/models/digits/config")
            return r.json().get("max_inflight") if r.status_code == 200 else None
        assert max_inflight() == 64
        (repo / "digits" / "config.json").write_text(json.dumps({"device": "npu0pe1", "max_inflight": 5}))
        wait_until("digits reloaded with max_inflight 5", lambda: max_inflight() == 5, timeout=60, interval=0.1)
        assert index(s)[("digits", "1")] == ("READY", "")

        shutil.rmtree(repo / "mnist")
        wait_until("mnist gone from the index", lambda: ("mnist", "1") not in index(s), timeout=60, interval=0.1)
        assert requests.get(s.url + "/v2/models/mnist").status_code == 404
        assert "model mnist unloaded" in s.output()
        assert s.stop() == 0, s.output()
