"""The profiler guide's example programs (FuriosaAI SDK docs, "Performance profiling"), with only
the model path changed, and what they must produce."""

import json

from furiosa.runtime import session, tensor
from furiosa.runtime.profiler import RecordFormat, profile


def test_chrome_trace_example(mnist_tflite, tmp_path, capsys):
    trace = tmp_path / "mnist_trace.json"
    # --- the guide's program ---
    with open(trace, "w") as output:
        with profile(file=output) as profiler:
            with session.create(str(mnist_tflite)) as sess:
                input_shape = sess.input(0)

                with profiler.record("warm up") as record:
                    for _ in range(0, 2):
                        sess.run(tensor.rand(input_shape))

                with profiler.record("trace") as record:
                    for _ in range(0, 2):
                        sess.run(tensor.rand(input_shape))
    # --- end ---
    events = json.loads(trace.read_text())["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X"]
    names = [e["name"] for e in spans]
    assert names.count("warm up") == 1 and names.count("trace") == 1
    assert names.count("Inference") == 4
    assert any(e.get("cat") == "NPU" for e in spans), "no NPU spans in the trace"

    # The report functions print the reports (DataFrames, as the guide shows them).
    profiler.print_summary()
    profiler.print_inferences()
    profiler.print_npu_executions()
    profiler.print_npu_operators()
    profiler.print_external_operators()
    out = capsys.readouterr().out
    assert "Inference counts" in out and ": 4" in out
    assert "NPU Total" in out and "NPU Run" in out and "NPU IoWait" in out


def test_pause_resume_example(mnist_tflite, tmp_path):
    trace = tmp_path / "trace.json"
    with open(trace, "w") as output:
        with profile(file=output) as profiler:
            with session.create(str(mnist_tflite)) as sess:
                input_shape = sess.input(0)
                profiler.pause()
                for _ in range(0, 3):
                    sess.run(tensor.rand(input_shape))
                profiler.resume()
                with profiler.record("trace"):
                    for _ in range(0, 2):
                        sess.run(tensor.rand(input_shape))
    names = [e["name"] for e in json.loads(trace.read_text())["traceEvents"] if e.get("ph") == "X"]
    assert names.count("Inference") == 2  # the three paused runs are not recorded


def test_pandas_dataframe_example(mnist_tflite, capsys):
    # --- the guide's program ---
    with profile(format=RecordFormat.PandasDataFrame) as profiler:
        with session.create(str(mnist_tflite)) as sess:
            input_shape = sess.input(0)

            with profiler.record("warm up") as record:
                for _ in range(0, 2):
                    sess.run(tensor.rand(input_shape))

            with profiler.record("trace") as record:
                for _ in range(0, 2):
                    sess.run(tensor.rand(input_shape))

    df = profiler.get_pandas_dataframe()
    print(df[df["name"] == "trace"][["trace_id", "name", "thread.id", "dur"]])
    # --- end ---
    out = capsys.readouterr().out
    assert "trace_id" in out and "thread.id" in out and "dur" in out

    assert list(df.columns) == ["trace_id", "parent_span_id", "span_id", "start", "end", "cat",
                                "name", "thread.id", "dram_base", "pe_index", "execution_index",
                                "instruction_index", "operator_index", "dur"]
    trace_row = df[df["name"] == "trace"]
    assert len(trace_row) == 1
    assert len(trace_row.iloc[0]["trace_id"]) == 32
    assert int(trace_row.iloc[0]["dur"]) == int(trace_row.iloc[0]["end"]) - int(trace_row.iloc[0]["start"])
    # The two inferences of the "trace" block hang under it.
    inferences = df[df["name"] == "Inference"]
    assert len(inferences) == 4
    under_trace = inferences[inferences["parent_span_id"] == trace_row.iloc[0]["span_id"]]
    assert len(under_trace) == 2
    npu = df[df["cat"] == "NPU"]
    assert len(npu) > 0 and npu["pe_index"].notna().all()
    assert (df["dur"] >= 0).all()
