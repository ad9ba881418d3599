#!/usr/bin/env python3
"""Convolutions side by side: the simulator's time per kernel (`sim-bench --per-kernel N`
output, one compute thread) against ONNX Runtime's per node (ort_layers.js output), then totals
per kind of convolution (1x1, KxK, depthwise) with the time each kind would take at the
machine's vpdpbusd peak. Each kernel is paired with the first node not yet paired, in ONNX
Runtime's graph order, that has the same input and output shapes (the two graphs order their
detection heads differently).

Usage: layer_table.py SIM_BENCH.txt ORT_LAYERS.jsonl [--peak GMAC_PER_S] [--rows]

Convolutions only (LowLevelConv2d and LowLevelDepthwiseConv2d against QLinearConv): the other
kernels do not map one to one. Exits 1 naming the first kernel that has no node to pair with.
"""
import argparse
import json
import re
import sys

KERNEL = re.compile(r"\s+#(\d+)\s+(LowLevelConv2d|LowLevelDepthwiseConv2d)\s+([\d.]+) us\s+"
                    r"([\d.]+) GOPS\s+\[([\d, ]+)\] -> \[([\d, ]+)\].*?w\[([\d, ]+)\]")


def ours(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = KERNEL.match(line)
            if not m:
                continue
            nchw = [[int(x) for x in m.group(g).split(",")] for g in (5, 6)]
            w = [int(x) for x in m.group(7).split(",")]
            us = float(m.group(3))
            kind = ("depthwise" if m.group(2) == "LowLevelDepthwiseConv2d" else
                    "1x1" if w[2] == w[3] == 1 else f"{w[2]}x{w[3]}")
            rows.append({"index": int(m.group(1)), "kind": kind, "us": us,
                         "mac": float(m.group(4)) / 2 * us * 1e3, "out": nchw[1], "w": w,
                         "key": [[d[0], d[2], d[3], d[1]] for d in nchw]})
    return sorted(rows, key=lambda r: r["index"])


def ort(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r.get("op") == "QLinearConv":
                rows.append(r)
    return sorted(rows, key=lambda r: r["index"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sim_bench")
    ap.add_argument("ort_layers")
    ap.add_argument("--peak", type=float, default=0.0,
                    help="GMAC/s of one thread (sim-bench's machine peak line)")
    ap.add_argument("--rows", action="store_true", help="print every pair, not only totals")
    a = ap.parse_args()
    sim, ref = ours(a.sim_bench), ort(a.ort_layers)
    if len(sim) != len(ref):
        sys.exit(f"error: {a.sim_bench} lists {len(sim)} convolutions, {a.ort_layers} {len(ref)} "
                 "(run sim-bench with --per-kernel at least the kernel count)")
    free = [[next(iter(r["input"][0].values())), next(iter(r["output"][0].values())), r]
            for r in ref]
    totals = {}
    for s in sim:
        i = next((i for i, f in enumerate(free) if f[:2] == s["key"]), None)
        if i is None:
            sys.exit(f"error: kernel #{s['index']} ({s['key'][0]} -> {s['key'][1]}, NHWC) has no "
                     f"QLinearConv of the same shapes in {a.ort_layers}")
        r = free.pop(i)[2]
        t = totals.setdefault(s["kind"], [0, 0.0, 0.0, 0.0])
        t[0] += 1
        t[1] += s["us"]
        t[2] += r["median_us"]
        t[3] += s["mac"]
        if a.rows:
            print(f"#{s['index']:<4} {s['kind']:<9} out {s['out']} w {s['w']}: "
                  f"{s['us']:8.1f} us  ORT {r['median_us']:8.1f} us  {s['us'] / r['median_us']:.2f}x")
    print(f"{'kind':<10} {'n':>3} {'ours us':>9} {'ORT us':>9} {'ratio':>6} {'MMAC':>8} "
          f"{'at peak us':>10}")
    for kind, (n, us, ort_us, mac) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        at_peak = f"{mac / (a.peak * 1e3):10.0f}" if a.peak > 0 else f"{'-':>10}"
        print(f"{kind:<10} {n:>3} {us:9.0f} {ort_us:9.0f} {us / ort_us:6.2f} {mac / 1e6:8.2f} "
              f"{at_peak}")


if __name__ == "__main__":
    main()
