"""Pictures of a trace, re-exported by ``furiosa.runtime.profiler``: a timeline, a roofline and
the slowest operators. Each takes a trace file path (Chrome trace JSON or CSV record table) or a
``profile``, writes ``file`` (PNG, SVG or any format matplotlib knows by the extension) and
returns the matplotlib Figure, so a notebook can show or change it. matplotlib (Debian
``python3-matplotlib``) is imported only when a function is called; figures are made with
``matplotlib.figure.Figure`` directly, so no pyplot state or GUI backend is touched.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from ._traces import analyze_trace, read_trace

# The Warboy roofs of the timing model (docs/timing.md, "Parameters"): 64 INT8 TOPS per chip from
# two PEs of 32 TOPS (FuriosaAI's Warboy product page); 66 GB/s of LPDDR4X per card (published),
# of which a device of P PEs is modelled with a P / 2 share; SRAM 128 bytes per cycle per PE at
# 2.0 GHz (the model's assumption: Warboy's SRAM bandwidth is not published).
WARBOY_TOPS_PER_PE = 32e12
WARBOY_DRAM_BYTES_PER_S_PER_CARD = 66e9
WARBOY_PES_PER_CARD = 2
WARBOY_SRAM_BYTES_PER_S_PER_PE = 128 * 2.0e9

# Colours of the timeline's stages (host steps, device phases); anything else is grey.
_STAGE_COLOURS = {
    "Quantize": "#4e79a7", "Lower": "#59a14f", "Enqueue": "#edc948", "Unlower": "#76b7b2",
    "Dequantize": "#b07aa1", "Load": "#f28e2b", "Execution": "#e15759", "Store": "#ff9da7",
}
_OTHER_COLOUR = "#9c9c9c"


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _save(fig, file: Any) -> None:
    fig.savefig(os.fspath(file) if isinstance(file, os.PathLike) else file)


def plot_timeline(trace: Any, file: Any, title: Optional[str] = None):
    """One row per host worker thread and per NPU device (its first PE), time in ms from the
    first span: host steps (Quantize, Lower, Enqueue, host operators, Unlower, Dequantize) and
    device phases (Load, Execution, Store) as bars coloured by stage, each Inference as a thin
    bar under its thread's row, and each request's Enqueue -> Execution flow as an arrow.
    Kernels are left out (plot_top and plot_roofline show them)."""

    df = read_trace(trace)
    if df.empty:
        raise ValueError("plot_timeline: the trace has no spans")
    host = df[(df["cat"] == "Runtime") & df["thread.id"].notna()]
    device = df[(df["cat"] == "NPU") & df["instruction_index"].isna() & df["pe_index"].notna()]
    shown = host[host["name"].isin(["Inference", *_STAGE_COLOURS]) | host["operator_index"].notna()]
    origin = int(min(shown["start"].min() if not shown.empty else df["start"].min(),
                     device["start"].min() if not device.empty else df["start"].min()))
    tracks = [("host", int(t)) for t in sorted(host["thread.id"].unique())]
    tracks += [("npu", int(p)) for p in sorted(device["pe_index"].unique())]
    row_of = {track: i for i, track in enumerate(tracks)}

    fig = _figure(12, 1.0 + 0.6 * len(tracks))
    ax = fig.add_subplot()
    used = set()

    def bar(row: int, span, height: float = 0.6, offset: float = -0.3, colour=None, label=None):
        start = (int(span["start"]) - origin) / 1e6
        width = max((int(span["end"]) - int(span["start"])) / 1e6, 1e-6)
        colour = colour or _STAGE_COLOURS.get(span["name"], _OTHER_COLOUR)
        label = label or (span["name"] if span["name"] in _STAGE_COLOURS else "host operator")
        ax.broken_barh([(start, width)], (row + offset, height), facecolors=colour,
                       label=None if label in used else label)
        used.add(label)

    for _, span in host.iterrows():
        row = row_of[("host", int(span["thread.id"]))]
        if span["name"] == "Inference":
            bar(row, span, height=0.08, offset=0.32, colour="#333333", label="Inference")
        elif not _isna(span["operator_index"]) or span["name"] in _STAGE_COLOURS:
            bar(row, span)
    for _, span in device.iterrows():
        if span["name"] in ("Load", "Execution", "Store"):
            bar(row_of[("npu", int(span["pe_index"]))], span)

    # Flows: per trace (request), its Enqueue spans and Execution spans in time order, paired.
    for trace_id, spans in df.groupby("trace_id"):
        enqueues = spans[spans["name"] == "Enqueue"].sort_values("start")
        executions = spans[(spans["name"] == "Execution") & spans["pe_index"].notna()] \
            .sort_values("start")
        for (_, e), (_, x) in zip(enqueues.iterrows(), executions.iterrows()):
            if _isna(e["thread.id"]):
                continue
            ax.annotate("", xy=((int(x["start"]) - origin) / 1e6,
                                row_of[("npu", int(x["pe_index"]))]),
                        xytext=((int(e["start"]) - origin) / 1e6,
                                row_of[("host", int(e["thread.id"]))]),
                        arrowprops={"arrowstyle": "->", "color": "#555555", "lw": 0.6})

    ax.set_yticks(range(len(tracks)))
    ax.set_yticklabels([f"host thread {t}" if kind == "host" else f"NPU PE {t}"
                        for kind, t in tracks])
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_title(title or f"Timeline: {int((df['name'] == 'Inference').sum())} inferences")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    _save(fig, file)
    return fig


def plot_roofline(trace: Any, file: Any, pes: int = 2, title: Optional[str] = None):
    """Each NPU kernel (analyze_trace, one point per kernel of a program) at its arithmetic
    intensity (FLOPs per byte of its inputs, outputs and weights, which the kernel streams
    through SRAM) and achieved FLOP/s, under the roofs of a Warboy device of ``pes`` PEs as the
    timing model has them (2, the default, for a fused PE such as the runtime's default device
    ``warboy(2)*1``; 1 for ``warboy(1)*N``; a trace does not record it): peak compute ``pes`` x 32 TOPS with SRAM
    bandwidth ``pes`` x 256 GB/s (solid), and DRAM bandwidth ``pes`` / 2 x 66 GB/s (dashed; it
    binds kernels whose weights or activations stream from DRAM, whose DRAM bytes analyze_trace
    lists). Log-log axes; points coloured by kernel type. Kernels without MACs (data
    movement) are left out."""
    import numpy as np


    if pes not in (1, 2):
        raise ValueError(f"plot_roofline: pes must be 1 or 2, got {pes}")
    rows = analyze_trace(trace, top=0)
    rows = rows[(rows["flops"] > 0) & (rows["bytes"] > 0) & (rows["flops_per_s"] > 0)]
    if rows.empty:
        raise ValueError("plot_roofline: no NPU kernel with MACs and time in the trace")
    peak = pes * WARBOY_TOPS_PER_PE
    sram = pes * WARBOY_SRAM_BYTES_PER_S_PER_PE
    dram = WARBOY_DRAM_BYTES_PER_S_PER_CARD * pes / WARBOY_PES_PER_CARD
    intensity = rows["flops"] / rows["bytes"]

    fig = _figure(8, 5.5)
    ax = fig.add_subplot()
    x = np.logspace(np.log10(min(intensity.min(), peak / sram) / 4),
                    np.log10(max(intensity.max(), peak / dram) * 4), 200)
    ax.plot(x, np.minimum(peak, sram * x), color="black", lw=1.2,
            label=f"roof: {peak / 1e12:.0f} TOPS, SRAM {sram / 1e9:.0f} GB/s")
    ax.plot(x, np.minimum(peak, dram * x), color="black", lw=1.0, ls="--",
            label=f"roof from DRAM: {dram / 1e9:.0f} GB/s")
    for name, group in rows.groupby("name"):
        ax.scatter(group["flops"] / group["bytes"], group["flops_per_s"], s=18, label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title(title or f"Roofline: {len(rows)} NPU operators, {pes} PE")
    ax.legend(loc="lower right", fontsize="small")
    _save(fig, file)
    return fig


def plot_top(trace: Any, file: Any, n: int = 10, title: Optional[str] = None):
    """The ``n`` NPU kernels with the most device self time (analyze_trace), as horizontal
    bars of their total time in microseconds, slowest on top, labelled with kernel, model node
    and position and their share of all kernel time."""

    rows = analyze_trace(trace, top=n)
    if rows.empty:
        raise ValueError("plot_top: no NPU kernel spans in the trace")
    labels = [f"{r.name} (op {r.operator_index}, #{r.instruction_index})"
              for r in rows.itertuples()]
    fig = _figure(9, 1.0 + 0.4 * len(rows))
    ax = fig.add_subplot()
    bars = ax.barh(range(len(rows)), rows["total_ns"] / 1e3, color="#4e79a7")
    ax.bar_label(bars, labels=[f"{s:.1%}" for s in rows["share"]], fontsize="small", padding=2)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    ax.set_xlabel("device self time (us)")
    ax.set_title(title or f"Top {len(rows)} NPU operators by device time")
    _save(fig, file)
    return fig


def _isna(value) -> bool:
    try:
        import pandas as pd

        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


__all__ = ["plot_timeline", "plot_roofline", "plot_top"]
