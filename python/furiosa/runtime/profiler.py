"""The profiler, as FuriosaAI's ``furiosa.runtime.profiler``::

    from furiosa.runtime.profiler import profile, RecordFormat

    with open("trace.json", "w") as output:
        with profile(file=output) as profiler:           # Chrome trace written at the end
            with profiler.record("warm up"):
                runner.run(inputs)

    with profile(format=RecordFormat.PandasDataFrame) as profiler:
        ...
    df = profiler.get_pandas_dataframe()
    profiler.print_summary()

While a ``profile`` block is open, every inference of every runner and queue of this process that
was given no profiler of its own records into it (the C++ ProfileScope). Spans are those of the
C++ profiler (docs/profiler.md); the DataFrame has the record table's columns.
"""

from __future__ import annotations

import enum
import io
import os
import sys
import tempfile
from typing import Any, Optional

from . import _native
from ._plots import plot_roofline, plot_timeline, plot_top
from ._traces import _COLUMN_DTYPES, _trace_file, analyze_trace, read_trace
from .errors import InvalidArgument


class RecordFormat(enum.IntEnum):
    """What a profile produces: a Chrome trace written to ``file``, or a pandas DataFrame."""

    ChromeTrace = 0
    PandasDataFrame = 1


class Resource(enum.Flag):
    """What to record (accepted for the SDK's signature; host and NPU spans are both recorded)."""

    CPU = enum.auto()
    NPU = enum.auto()
    ALL = CPU | NPU


class _Record:
    """A ``profiler.record(label)`` block: spans started inside on this thread nest under it."""

    def __init__(self, native: "_native.Record"):
        self._native = native

    def __enter__(self) -> "_Record":
        self._native.enter()
        return self

    def __exit__(self, *exc) -> None:
        self._native.exit()


class profile:
    """A profiling scope (context manager).

    Args:
        resource: accepted for the SDK's signature (everything is recorded).
        format: RecordFormat.ChromeTrace (the default) writes a Chrome trace to ``file`` when the
            block ends; RecordFormat.PandasDataFrame keeps the spans for get_pandas_dataframe().
        file: a text file object or a path for the Chrome trace; default sys.stdout, as the SDK.
    """

    def __init__(self, resource: Resource = Resource.ALL,
                 format: RecordFormat = RecordFormat.ChromeTrace, file: Any = None):
        if not isinstance(format, RecordFormat):
            raise InvalidArgument(f"profile: format must be a RecordFormat, got {format!r}")
        self.resource = resource
        self.format = format
        self.file = file
        self._native = _native.Profiler()
        self._df = None

    def __enter__(self) -> "profile":
        self._native.enter()
        return self

    def __exit__(self, *exc) -> None:
        self._native.exit()
        if self.format == RecordFormat.ChromeTrace:
            self._write_chrome_trace()

    def _write_chrome_trace(self) -> None:
        target = self.file if self.file is not None else sys.stdout
        if isinstance(target, (str, os.PathLike)):
            self._native.write_chrome_trace(os.fspath(target))
            return
        # A file object: the C++ profiler writes a file, whose text goes to the object.
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.json")
            self._native.write_chrome_trace(path)
            with open(path, encoding="utf-8") as f:
                target.write(f.read())
        if hasattr(target, "flush"):
            target.flush()

    def record(self, name: str = "", warm_up: bool = False) -> _Record:
        """A record block labelled ``name``: a span that is the parent of the inferences started
        inside it on this thread. With ``warm_up=True`` nothing inside is recorded."""
        if warm_up:
            return _Paused(self)
        return _Record(self._native.record(name))

    def pause(self) -> None:
        """Stops recording until resume(); idempotent."""
        self._native.pause()

    def resume(self) -> None:
        """Resumes recording; idempotent."""
        self._native.resume()

    def get_pandas_dataframe(self):
        """The spans recorded so far as a pandas DataFrame, one row per span, with the columns
        trace_id, parent_span_id, span_id, start, end, cat, name, thread.id, dram_base, pe_index,
        execution_index, instruction_index, operator_index, dur (times in ns since the epoch)."""
        import pandas as pd  # imported here: only this method needs pandas

        return pd.read_csv(io.StringIO(self._native.record_table_csv()), dtype=_COLUMN_DTYPES,
                           keep_default_na=False, na_values={c: [""] for c, t in _COLUMN_DTYPES.items()
                                                             if t == "Int64"})

    def get_pandas_dataframe_with_filter(self, column: str, value: Any):
        """The rows whose ``column`` equals ``value``."""
        df = self.get_pandas_dataframe()
        return df[df[column] == value]

    def get_cpu_pandas_dataframe(self):
        """The host (cat Runtime) rows."""
        return self.get_pandas_dataframe_with_filter("cat", "Runtime")

    def get_npu_pandas_dataframe(self):
        """The device (cat NPU) rows."""
        return self.get_pandas_dataframe_with_filter("cat", "NPU")

    def _print(self, report: str) -> None:
        print(self._native.report(report), end="")

    def _print_table(self, report: str, index: Optional[str] = None) -> None:
        """Prints report ``report`` as a pandas DataFrame, as FuriosaAI's profiler prints it; the
        C++ text report when pandas is missing or there is no row."""
        try:
            import pandas as pd
        except ImportError:
            self._print(report)
            return
        df = pd.DataFrame(self._native.report_columns(report))
        if df.empty:
            self._print(report)
            return
        print((df.set_index(index) if index else df).to_string())

    def print_summary(self) -> None:
        """Inference count and latency percentiles (the SDK's summary)."""
        self._print("summary")

    def print_inferences(self) -> None:
        """A DataFrame with one row per inference: trace_id, span_id, thread.id, dur (ns)."""
        self._print_table("inferences")

    def print_npu_executions(self) -> None:
        """A DataFrame with one row per NPU execution: trace_id, span_id, pe_index,
        execution_index, NPU Total, NPU Run, NPU IoWait (ns)."""
        self._print_table("npu-executions")

    def print_npu_inference(self) -> None:
        """Same as print_npu_executions (the SDK's older name)."""
        self.print_npu_executions()

    def print_npu_operators(self) -> None:
        """A DataFrame indexed by NPU operator name: average elapsed(ns) and count, slowest
        first."""
        self._print_table("npu-operators", index="name")

    def print_external_operators(self) -> None:
        """A DataFrame with one row per host (external) operator execution: trace_id, span_id,
        thread.id, name, operator_index, dur (ns)."""
        self._print_table("external-operators")

    def analyze(self, **options):
        """analyze_trace() over the spans recorded so far (same options)."""
        with _trace_file(self) as path:
            return analyze_trace(path, **options)


class _Paused:
    """record(..., warm_up=True): recording paused for the block, then restored."""

    def __init__(self, owner: profile):
        self._owner = owner

    def __enter__(self) -> "_Paused":
        self._owner.pause()
        return self

    def __exit__(self, *exc) -> None:
        self._owner.resume()



__all__ = ["profile", "RecordFormat", "Resource", "read_trace", "analyze_trace", "plot_timeline",
           "plot_roofline", "plot_top"]
