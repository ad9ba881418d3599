"""furiosa-serve's /metrics as a real Prometheus sees it: `promtool check metrics` on the text after
some inferences, then a `prometheus` server (Debian's package) scraping furiosa-serve every second,
queried over its HTTP API for furiosa_serve_requests_total, which must equal the requests sent.
Everything on loopback, free ports, tmp storage; waits are bounded (against hanging, not as speed
claims), and both servers are killed when the test ends, pass or fail. Run by ctest
(tests/CMakeLists.txt) with FURIOSA_SERVE and FURIOSA_SHARED_MODELS_DIR set."""

import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest
import requests

from serve_process import ServeProcess, env_path

MNIST = "onnx-zoo/mnist-12-int8"
REQUESTS = 25
TIME_BOUND = 120.0  # seconds for Prometheus to start and scrape: a bound against hanging


def tool(name):
    path = shutil.which(name) or (f"/usr/bin/{name}" if pathlib.Path(f"/usr/bin/{name}").exists() else None)
    if not path:
        pytest.fail(f"{name} not found (Debian package prometheus, see .ci/install-deps)")
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def test_metrics_pass_promtool_and_are_scraped_by_prometheus(tmp_path):
    shared = env_path("FURIOSA_SHARED_MODELS_DIR")
    serve = env_path("FURIOSA_SERVE")
    promtool, prometheus = tool("promtool"), tool("prometheus")
    model = shared / MNIST / "mnist-12-int8.onnx"
    if not model.exists():
        pytest.fail(f"{model} is missing (../shared/models, see its MANIFEST.md)")

    repo = tmp_path / "repo"
    (repo / "mnist" / "1").mkdir(parents=True)
    (repo / "mnist" / "1" / "model.onnx").symlink_to(model)
    (repo / "mnist" / "config.json").write_text(json.dumps({"device": "npu0pe0", "worker_num": 2}))
    procs = []
    with ServeProcess([serve, "--model-repository", repo, "--host", "127.0.0.1", "--http-port", "0",
                       "--grpc-port", "0"]) as server:
        url, serve_port = server.url, server.port
        t0 = time.monotonic()
        try:
            # Inferences: real inputs (the model's test_data_set_k), all must succeed.
            import onnx
            from onnx import numpy_helper
            for k in range(REQUESTS):
                t = onnx.TensorProto()
                t.ParseFromString((shared / MNIST / f"test_data_set_{k % 10}" / "input_0.pb").read_bytes())
                x = numpy_helper.to_array(t)
                r = requests.post(url + "/v2/models/mnist/infer", timeout=10, json={"inputs": [
                    {"name": "Input3", "datatype": "FP32", "shape": list(x.shape), "data": x.flatten().tolist()}]})
                assert r.status_code == 200, r.text
                assert len(r.json()["outputs"][0]["data"]) == 10

            # promtool: the exposition text must be valid and follow Prometheus' naming conventions.
            text = requests.get(url + "/metrics", timeout=10).text
            assert f'furiosa_serve_requests_total{{model="mnist",outcome="success"}} {REQUESTS}' in text, text
            check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True,
                                   timeout=20)
            print("promtool check metrics:", check.returncode, check.stdout + check.stderr)
            assert check.returncode == 0, f"promtool check metrics failed:\n{check.stdout}{check.stderr}"

            # A real Prometheus scraping furiosa-serve every second.
            prom_port = free_port()
            config = tmp_path / "prometheus.yml"
            config.write_text(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: furiosa-serve\n    metrics_path: /metrics\n"
                f"    static_configs:\n      - targets: ['127.0.0.1:{serve_port}']\n")
            log = open(tmp_path / "prometheus.log", "w")
            prom = subprocess.Popen([prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                     f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
                                    stdout=log, stderr=subprocess.STDOUT)
            procs.append(prom)
            api = f"http://127.0.0.1:{prom_port}/api/v1/query"
            series = None
            while time.monotonic() - t0 < TIME_BOUND:
                assert prom.poll() is None, "prometheus exited: " + (tmp_path / "prometheus.log").read_text()
                try:
                    r = requests.get(api, params={"query": 'furiosa_serve_requests_total{job="furiosa-serve"}'}, timeout=2)
                except requests.ConnectionError:
                    time.sleep(0.2)
                    continue
                if r.status_code == 503:  # Prometheus answers 503 until its storage is ready
                    time.sleep(0.2)
                    continue
                body = r.json()
                assert body["status"] == "success", body
                if body["data"]["result"]:
                    series = body["data"]["result"]
                    break
                time.sleep(0.25)
            assert series, (f"no furiosa_serve_requests_total in Prometheus within {TIME_BOUND} s: "
                            + (tmp_path / "prometheus.log").read_text())
            by_outcome = {s["metric"]["outcome"]: float(s["value"][1]) for s in series if s["metric"]["model"] == "mnist"}
            print(f"Prometheus: furiosa_serve_requests_total{{model=\"mnist\"}} = {by_outcome}, "
                  f"{time.monotonic() - t0:.1f} s after the server was up")
            assert by_outcome.get("success") == REQUESTS, by_outcome
            assert by_outcome.get("failure", 0) == 0 and by_outcome.get("rejected", 0) == 0, by_outcome
            up = requests.get(api, params={"query": 'up{job="furiosa-serve"}'}, timeout=2).json()["data"]["result"]
            assert [float(s["value"][1]) for s in up] == [1.0], up
            # The histogram made it through too: one observation per request.
            count = requests.get(api, params={"query": 'furiosa_serve_request_duration_seconds_count{model="mnist"}'},
                                 timeout=2).json()["data"]["result"]
            assert [float(s["value"][1]) for s in count] == [REQUESTS], count
        finally:
            for p in procs:
                stop(p)
        # furiosa-serve's own exit status: 0 after SIGTERM, its graceful shutdown.
        code = server.stop()
        assert code == 0, f"furiosa-serve exited with {code}: " + server.output()
