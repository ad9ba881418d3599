"""The operator analysis (furiosa-trace analyze, profiler.analyze_trace), the pandas reports and
the plots, on a real MobileNetV2 trace recorded through the Python API."""

import json
import pathlib
import subprocess

import numpy as np
import onnx
import pytest
from onnx import shape_inference

from furiosa.runtime import session, tensor
from furiosa.runtime.profiler import (RecordFormat, analyze_trace, plot_roofline, plot_timeline,
                                      plot_top, profile, read_trace)

RUNS = 2


@pytest.fixture(scope="module")
def mobilenet_trace(mobilenet_onnx, tmp_path_factory) -> pathlib.Path:
    """A Chrome trace of RUNS MobileNetV2 inferences (every span category)."""
    trace = tmp_path_factory.mktemp("analysis") / "mobilenet_trace.json"
    with open(trace, "w") as output:
        with profile(file=output):
            with session.create(str(mobilenet_onnx)) as sess:
                for _ in range(RUNS):
                    sess.run(tensor.rand(sess.input(0)))
    return trace


def furiosa_trace(furiosa_run: pathlib.Path, *args: str) -> str:
    binary = furiosa_run.parent / "furiosa-trace"
    done = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def conv_macs(model_path: pathlib.Path) -> int:
    """Multiply-accumulates of the model's QLinearConv nodes, from the ONNX graph alone:
    output elements x (input channels / group) x kernel height x kernel width. Shapes come from
    ONNX shape inference, and where it stops (com.microsoft's QLinearAdd) from the conv formula
    (ONNX Conv: floor((in + pads - dilation x (k - 1) - 1) / stride) + 1), elementwise nodes
    keeping their first input's shape."""
    model = shape_inference.infer_shapes(onnx.load(str(model_path)))  # a free batch dim is 1
    shapes = {}
    for v in list(model.graph.value_info) + list(model.graph.output) + list(model.graph.input):
        dims = [d.dim_value if d.HasField("dim_value") else 1 for d in v.type.tensor_type.shape.dim]
        if dims and all(d > 0 for d in dims):
            shapes[v.name] = dims
    weights = {t.name: list(t.dims) for t in model.graph.initializer}
    total = 0
    for node in model.graph.node:
        if node.op_type == "QLinearConv":
            w = weights[node.input[3]]  # [Cout, Cin / group, kh, kw]
            if node.output[0] not in shapes:
                attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
                x = shapes[node.input[0]]
                pads = attrs.get("pads", [0] * 4)
                strides = attrs.get("strides", [1, 1])
                dil = attrs.get("dilations", [1, 1])
                shapes[node.output[0]] = [x[0], w[0]] + [
                    (x[2 + i] + pads[i] + pads[2 + i] - dil[i] * (w[2 + i] - 1) - 1) // strides[i] + 1
                    for i in range(2)]
            total += int(np.prod(shapes[node.output[0]])) * w[1] * w[2] * w[3]
        elif node.output[0] not in shapes and node.input and node.input[0] in shapes:
            shapes[node.output[0]] = shapes[node.input[0]]
    assert total > 0
    return total


def test_guide_commands(mobilenet_trace, furiosa_run):
    # MegEngine's guide, translated: the 10 slowest operators.
    text = furiosa_trace(furiosa_run, "analyze", str(mobilenet_trace), "-t", "10")
    lines = text.splitlines()
    for column in ("rank", "operator", "calls", "sum us", "cum ms", "GFLOP/c", "GFLOP/s", "MB/call",
                   "GB/s", "bound", "in_shapes", "out_shapes"):
        assert column in lines[0], column
    assert len(lines) == 11
    assert "LowLevel" in lines[1] and f" {RUNS} " in lines[1]
    assert "[1,16,112,112]" in text  # a kernel's input shape

    # The operator types with the most time in total.
    by_type = json.loads(furiosa_trace(furiosa_run, "analyze", str(mobilenet_trace), "-t", "10",
                                       "--aggregate-by", "type", "--aggregate", "sum",
                                       "--format", "json"))
    assert by_type[0]["name"] == "LowLevelConv2d"
    assert [r["time_ns"] for r in by_type] == sorted((r["time_ns"] for r in by_type), reverse=True)
    assert all(r["operator_index"] == -1 and r["in_shapes"] == "" for r in by_type)
    assert sum(r["share"] for r in by_type) == pytest.approx(1.0)  # every kernel type is there

    # Operators ordered by memory, those of at least 2 us per call.
    memory = json.loads(furiosa_trace(furiosa_run, "analyze", str(mobilenet_trace), "-t", "0",
                                      "--order-by", "memory", "--min-time", "2e-6",
                                      "--format", "json"))
    assert memory and all(r["mean_ns"] >= 2000 for r in memory)
    assert [r["bytes"] for r in memory] == sorted((r["bytes"] for r in memory), reverse=True)

    # The convolutions by FLOP/s, as CSV.
    csv = furiosa_trace(furiosa_run, "analyze", str(mobilenet_trace), "-t", "5", "--type",
                        "Conv2d", "--order-by", "flops", "--format", "csv").splitlines()
    assert csv[0].startswith("rank,name,operator_index,instruction_index,pe_index,calls,time_ns")
    assert len(csv) == 6 and all(",LowLevelConv2d," in line for line in csv[1:])


def test_convolution_flops_are_twice_the_models_macs(mobilenet_trace, mobilenet_onnx):
    rows = analyze_trace(mobilenet_trace, top=0)
    convs = rows[rows["name"].isin(["LowLevelConv2d", "LowLevelDepthwiseConv2d"])]
    assert (convs["calls"] == RUNS).all()
    assert int((convs["flops"] * convs["calls"]).sum()) == 2 * RUNS * conv_macs(mobilenet_onnx)
    # The same analysis over each call, and filtered by PE.
    calls = analyze_trace(mobilenet_trace, top=0, aggregate_by="none", type="DepthwiseConv2d",
                          pe=0)
    assert len(calls) == RUNS * len(rows[rows["name"] == "LowLevelDepthwiseConv2d"])
    assert analyze_trace(mobilenet_trace, pe=1).empty  # nothing ran on PE 1
    with pytest.raises(Exception, match="unknown order_by 'speed'"):
        analyze_trace(mobilenet_trace, order_by="speed")


def test_analysis_of_a_profile_equals_its_trace(mobilenet_onnx):
    with profile(format=RecordFormat.PandasDataFrame) as profiler:
        with session.create(str(mobilenet_onnx)) as sess:
            sess.run(tensor.rand(sess.input(0)))
    rows = profiler.analyze(top=3, order_by="cumulative")
    assert len(rows) == 3 and list(rows["rank"]) == [1, 2, 3]
    assert (rows["total_ns"].diff().dropna() <= 0).all()


def test_print_reports_are_dataframes(mnist_tflite, capsys):
    with profile(format=RecordFormat.PandasDataFrame) as profiler:
        with session.create(str(mnist_tflite)) as sess:
            for _ in range(2):
                sess.run(tensor.rand(sess.input(0)))
    profiler.print_npu_operators()
    lines = capsys.readouterr().out.splitlines()
    # pandas prints the columns, then the index name on its own line, as the guide shows.
    assert lines[0].split() == ["average", "elapsed(ns)", "count"]
    assert lines[1].strip() == "name"
    assert lines[2].split()[0].startswith("LowLevel") and int(lines[2].split()[-1]) % 2 == 0
    profiler.print_npu_executions()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["trace_id", "span_id", "pe_index", "execution_index", "NPU",
                                "Total", "NPU", "Run", "NPU", "IoWait"]
    assert lines[1].split()[0] == "0" and len(lines) == 3  # index column, one row per execution
    profiler.print_inferences()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["trace_id", "span_id", "thread.id", "dur"] and len(lines) == 3
    profiler.print_external_operators()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["trace_id", "span_id", "thread.id", "name", "operator_index", "dur"]
    assert any(" Lower " in line for line in lines[1:])  # the uint8 model needs no Quantize


@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_plots(mobilenet_trace, tmp_path, suffix):
    signature = b"\x89PNG" if suffix == "png" else b"<?xml"

    top = plot_top(mobilenet_trace, tmp_path / f"top.{suffix}", n=5)
    assert (tmp_path / f"top.{suffix}").read_bytes().startswith(signature)
    ax = top.axes[0]
    assert ax.get_xlabel() == "device self time (us)"
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == 5 and labels[0].startswith("LowLevelConv2d (op ")
    widths = [bar.get_width() for bar in ax.patches]
    assert widths == sorted(widths, reverse=True)

    roof = plot_roofline(mobilenet_trace, tmp_path / f"roofline.{suffix}")
    assert (tmp_path / f"roofline.{suffix}").read_bytes().startswith(signature)
    ax = roof.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_xlabel() == "arithmetic intensity (FLOP/byte)"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    # The default device, warboy(2)*1, is a fused PE: the default roofs are those of 2 PEs.
    assert legend[0] == "roof: 64 TOPS, SRAM 512 GB/s" and "LowLevelConv2d" in legend
    macs_kernels = analyze_trace(mobilenet_trace, top=0)
    macs_kernels = macs_kernels[macs_kernels["flops"] > 0]
    points = np.concatenate([c.get_offsets() for c in ax.collections])
    assert len(points) == len(macs_kernels)
    # The timing model never beats its own roofs: every kernel under min(peak, SRAM x intensity).
    assert (points[:, 1] <= np.minimum(64e12, 512e9 * points[:, 0]) * 1.001).all()

    timeline = plot_timeline(mobilenet_trace, tmp_path / f"timeline.{suffix}")
    assert (tmp_path / f"timeline.{suffix}").read_bytes().startswith(signature)
    ax = timeline.axes[0]
    tracks = [t.get_text() for t in ax.get_yticklabels()]
    assert "NPU PE 0" in tracks and any(t.startswith("host thread ") for t in tracks)
    assert ax.get_title() == f"Timeline: {RUNS} inferences"
    arrows = [c for c in ax.get_children() if type(c).__name__ == "Annotation"]
    assert len(arrows) == RUNS  # one Enqueue -> Execution flow per inference
    spans = read_trace(mobilenet_trace)
    assert (spans["name"] == "Execution").sum() == RUNS
