#!/usr/bin/env python3
"""serve-bench: QPS and latency percentiles of furiosa-serve (HTTP, binary tensor data) against
direct Runner calls (the Python package, same process as the clients) on the same model and
machine. A benchmark, not a test: it prints figures.

    PYTHONPATH=build/python /usr/bin/python3 tools/serve-bench/serve_bench.py \
        --serve build/tools/furiosa-serve --model ../shared/models/onnx-zoo/mnist-12-int8/mnist-12-int8.onnx \
        [-c 1,8,32] [--batching 8,1000] [--no-runner] [--csv out.csv] [--json out.json]

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


def report(name, clients, elapsed, latencies, cpu=None, groups=None):
    """One printed line and one result row (a dict, for --csv / --json)."""
    p = percentiles(latencies)
    extra = f", server CPU {cpu * 1e6 / len(latencies):.0f} us/request" if cpu is not None else ""
    if groups:
        extra += ", groups " + " ".join(f"{size}:{n}" for size, n in sorted(groups.items()))
    print(f"{name:<8} c={clients:<3} {len(latencies)} requests in {elapsed:.2f} s: "
          f"{len(latencies) / elapsed:8.1f} QPS, p50 {p[50]:.2f} ms, p90 {p[90]:.2f} ms, p99 {p[99]:.2f} ms{extra}")
    return {"path": name, "clients": clients, "requests": len(latencies), "seconds": round(elapsed, 4),
            "qps": round(len(latencies) / elapsed, 2), "p50_ms": round(p[50], 3), "p90_ms": round(p[90], 3),
            "p99_ms": round(p[99], 3),
            "server_cpu_us_per_request": round(cpu * 1e6 / len(latencies), 1) if cpu is not None else None,
            "groups": {str(k): v for k, v in sorted((groups or {}).items())}}


def batch_buckets(url):
    """furiosa_serve_batch_size's cumulative bucket counts of model m: {upper bound: count}."""
    text = requests.get(url + "/metrics").text
    out = {}
    for m in re.finditer(r'furiosa_serve_batch_size_bucket\{([^}]*)\} (\S+)', text):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if labels.get("model") == "m" and "le" in labels:
            out[float(labels["le"].replace("+Inf", "inf"))] = float(m.group(2))
    return out


def group_sizes(before, after):
    """Executions per group-size bucket between two batch_buckets() readings: {"<=4": n, ...}."""
    out, prev = {}, 0.0
    for bound in sorted(after):
        cumulative = after[bound] - before.get(bound, 0.0)
        if cumulative - prev > 0:
            out["<=" + ("inf" if bound == float("inf") else f"{bound:g}")] = int(cumulative - prev)
        prev = cumulative
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--serve", required=True, help="path of furiosa-serve")
    ap.add_argument("--model", required=True, help="model file (.onnx, .tflite, .enf)")
    ap.add_argument("--device", default="warboy(2)*1")
    ap.add_argument("--workers", type=int, default=2, help="worker_num of both")
    ap.add_argument("-n", "--requests", type=int, default=2000, help="requests per concurrency level")
    ap.add_argument("-c", "--clients", default="8",
                    help="concurrent client threads; a comma list sweeps them (perf_analyzer's "
                         "--concurrency-range), e.g. 1,8,32")
    ap.add_argument("--batching", metavar="MAX[,DELAY_US]",
                    help="serve with dynamic_batching (max_batch_size, max_queue_delay_us; default delay 0)")
    ap.add_argument("--no-runner", action="store_true", help="skip the direct Runner comparison")
    ap.add_argument("--csv", help="also write the result rows to this CSV file")
    ap.add_argument("--json", help="also write the result rows (and the setup) to this JSON file")
    args = ap.parse_args()
    levels = [int(c) for c in str(args.clients).split(",") if c.strip()]
    rows = []

    model = pathlib.Path(args.model).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        version = pathlib.Path(tmp) / "m" / "1"
        version.mkdir(parents=True)
        (version / f"model{model.suffix}").symlink_to(model)
        config = {"device": args.device, "worker_num": args.workers, "max_inflight": max(64, *levels)}
        if args.batching:
            size, _, delay = args.batching.partition(",")
            config["dynamic_batching"] = {"max_batch_size": int(size), "max_queue_delay_us": int(delay or 0)}
        (pathlib.Path(tmp) / "m" / "config.json").write_text(json.dumps(config))
        proc = subprocess.Popen([args.serve, "--model-repository", tmp, "--host", "127.0.0.1", "--http-port", "0",
                                 "--grpc-port", "0"], stdout=subprocess.PIPE, text=True)
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
        dtype = {"FP32": np.float32, "UINT8": np.uint8, "INT8": np.int8, "INT32": np.int32,
                 "INT64": np.int64}[inp["datatype"]]
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

        print(f"model {model.name}, device {args.device}, worker_num {args.workers}"
              + (f", dynamic batching {args.batching}" if args.batching else ""))
        for clients in levels:
            drive(min(50, args.requests), clients, http_call)  # warm-up
            buckets = batch_buckets(url)
            cpu0 = cpu_seconds(proc.pid)
            elapsed, latencies = drive(args.requests, clients, http_call)
            # The server's own CPU time per request: on a machine shared with other work (and
            # with the Python clients) a steadier figure of the server's cost than its QPS.
            server_cpu = cpu_seconds(proc.pid) - cpu0
            groups = group_sizes(buckets, batch_buckets(url)) if args.batching else None
            rows.append(report("serve", clients, elapsed, latencies, server_cpu, groups))
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)

    if not args.no_runner:
        with create_runner(model, device=args.device, worker_num=args.workers) as runner:
            x = tensor.rand(runner.model.input(0))
            for clients in levels:
                drive(min(50, args.requests), clients, lambda: runner.run(x))
                rows.append(report("runner", clients, *drive(args.requests, clients, lambda: runner.run(x))))
    if args.csv:
        import csv
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            for row in rows:
                w.writerow({**row, "groups": " ".join(f"{k}:{v}" for k, v in row["groups"].items())})
    if args.json:
        setup = {"model": str(model), "device": args.device, "worker_num": args.workers,
                 "batching": args.batching, "cpu": cpu_model()}
        pathlib.Path(args.json).write_text(json.dumps({"setup": setup, "results": rows}, indent=2) + "\n")


def cpu_model():
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


if __name__ == "__main__":
    main()
