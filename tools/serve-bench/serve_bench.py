#!/usr/bin/env python3
"""serve-bench: QPS and latency percentiles of furiosa-serve (HTTP, binary tensor data) against
direct Runner calls (the Python package, same process as the clients) on the same model and
machine. A benchmark, not a test: it prints figures.

    PYTHONPATH=build/python /usr/bin/python3 tools/serve-bench/serve_bench.py \
        --serve build/tools/furiosa-serve --model ../shared/models/onnx-zoo/mnist-12-int8/mnist-12-int8.onnx

It starts furiosa-serve on a free loopback port over a one-model repository, runs the same number
of requests from the same number of client threads through HTTP, then (after the server stopped
and released the device) through create_runner(...).run, and prints both, with the server's own
CPU time per request (user + system, from /proc).
"""

import argparse
import json
import os
import pathlib
import re
import signal
import subprocess
import tempfile
import threading
import time

import numpy as np
import requests

from furiosa.runtime import create_runner, tensor


def percentiles(latencies):
    ms = np.array(latencies) * 1e3
    return {p: float(np.percentile(ms, p)) for p in (50, 90, 99)}


def drive(requests_total, clients, call):
    latencies, lock = [], threading.Lock()

    def worker(k):
        for _ in range(k, requests_total, clients):
            t0 = time.perf_counter()
            call()
            dt = time.perf_counter() - t0
            with lock:
                latencies.append(dt)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, latencies


def cpu_seconds(pid):
    """User + system CPU time of process `pid` so far (Linux /proc), in seconds."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def report(name, elapsed, latencies, cpu=None):
    p = percentiles(latencies)
    extra = f", server CPU {cpu * 1e6 / len(latencies):.0f} us/request" if cpu is not None else ""
    print(f"{name:<8} {len(latencies)} requests in {elapsed:.2f} s: {len(latencies) / elapsed:8.1f} QPS, "
          f"p50 {p[50]:.2f} ms, p90 {p[90]:.2f} ms, p99 {p[99]:.2f} ms{extra}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--serve", required=True, help="path of furiosa-serve")
    ap.add_argument("--model", required=True, help="model file (.onnx, .tflite, .enf)")
    ap.add_argument("--device", default="warboy(2)*1")
    ap.add_argument("--workers", type=int, default=2, help="worker_num of both")
    ap.add_argument("-n", "--requests", type=int, default=2000)
    ap.add_argument("-c", "--clients", type=int, default=8, help="concurrent client threads")
    ap.add_argument("--batching", metavar="MAX[,DELAY_US]",
                    help="serve with dynamic_batching (max_batch_size, max_queue_delay_us; default delay 0)")
    ap.add_argument("--no-runner", action="store_true", help="skip the direct Runner comparison")
    args = ap.parse_args()

    model = pathlib.Path(args.model).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        version = pathlib.Path(tmp) / "m" / "1"
        version.mkdir(parents=True)
        (version / f"model{model.suffix}").symlink_to(model)
        config = {"device": args.device, "worker_num": args.workers, "max_inflight": max(64, args.clients)}
        if args.batching:
            size, _, delay = args.batching.partition(",")
            config["dynamic_batching"] = {"max_batch_size": int(size), "max_queue_delay_us": int(delay or 0)}
        (pathlib.Path(tmp) / "m" / "config.json").write_text(json.dumps(config))
        proc = subprocess.Popen([args.serve, "--model-repository", tmp, "--host", "127.0.0.1", "--http-port", "0", "--grpc-port", "0"],
                                stdout=subprocess.PIPE, text=True)
        url = None
        for line in proc.stdout:
            m = re.match(r"HTTP: 127\.0\.0\.1:(\d+)", line)
            if m:
                url = f"http://127.0.0.1:{m.group(1)}"
                break
        if url is None:
            raise SystemExit("furiosa-serve did not start")
        meta = requests.get(url + "/v2/models/m").json()
        inp = meta["inputs"][0]
        dtype = {"FP32": np.float32, "UINT8": np.uint8, "INT8": np.int8, "INT32": np.int32, "INT64": np.int64}[inp["datatype"]]
        x = (np.random.default_rng(0).random(inp["shape"]) * (1 if dtype == np.float32 else 255)).astype(dtype)
        header = json.dumps({"inputs": [{"name": inp["name"], "datatype": inp["datatype"], "shape": inp["shape"],
                                         "parameters": {"binary_data_size": x.nbytes}}],
                             "parameters": {"binary_data_output": True}}).encode()
        body = header + x.tobytes()
        sessions = threading.local()

        def http_call():
            s = getattr(sessions, "s", None) or requests.Session()
            sessions.s = s
            r = s.post(url + "/v2/models/m/infer", data=body,
                       headers={"Inference-Header-Content-Length": str(len(header))})
            r.raise_for_status()

        drive(min(50, args.requests), args.clients, http_call)  # warm-up
        cpu0 = cpu_seconds(proc.pid)
        http = drive(args.requests, args.clients, http_call)
        # The server's own CPU time per request: on a machine shared with other work (and with
        # the Python clients) a steadier figure of the server's cost than its QPS.
        server_cpu = cpu_seconds(proc.pid) - cpu0
        if args.batching:
            metrics = requests.get(url + "/metrics").text
            count = re.search(r'furiosa_serve_batch_size_count\{model="m"\} (\S+)', metrics)
            total = re.search(r'furiosa_serve_batch_size_sum\{model="m"\} (\S+)', metrics)
            if count and total and float(count.group(1)) > 0:
                print(f"batching {args.batching}: mean group {float(total.group(1)) / float(count.group(1)):.2f} "
                      f"requests over {float(count.group(1)):.0f} executions (warm-up included)")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)

    print(f"model {model.name}, device {args.device}, worker_num {args.workers}, {args.clients} clients"
          + (f", dynamic batching {args.batching}" if args.batching else ""))
    report("serve", *http, server_cpu)
    if args.no_runner:
        return
    with create_runner(model, device=args.device, worker_num=args.workers) as runner:
        x = tensor.rand(runner.model.input(0))
        drive(min(50, args.requests), args.clients, lambda: runner.run(x))
        direct = drive(args.requests, args.clients, lambda: runner.run(x))
    report("runner", *direct)


if __name__ == "__main__":
    main()
