"""Trace files as pandas DataFrames, re-exported by ``furiosa.runtime.profiler``: the spans of a
trace (``read_trace``) and its operator analysis (``analyze_trace``). A trace is a file path
(Chrome trace JSON or CSV record table, as the profiler and furiosa-trace write them) or a
``profile``, whose spans are written to a temporary Chrome trace first. pandas is imported only
when a function is called. Kept apart from profiler.py so that _plots.py, which reads traces,
and profiler.py, which re-exports the plots, import in one direction.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from typing import Any, Optional

from . import _native
from .errors import InvalidArgument

# Columns of the record table (profiler/include/furiosa/profiler/record_table.h) and their pandas
# dtypes: ids and names as strings, times as int64 ns since the Unix epoch, optional indices as
# nullable Int64.
_COLUMN_DTYPES = {
    "trace_id": "string", "parent_span_id": "string", "span_id": "string",
    "start": "int64", "end": "int64", "cat": "string", "name": "string",
    "thread.id": "Int64", "dram_base": "Int64", "pe_index": "Int64", "execution_index": "Int64",
    "instruction_index": "Int64", "operator_index": "Int64", "dur": "int64",
}


@contextlib.contextmanager
def _trace_file(trace: Any):
    """The path of a trace file: ``trace`` itself (a path), or a profile's spans written as a
    Chrome trace into a temporary directory removed afterwards."""
    if hasattr(trace, "_native"):  # a profile (profiler.py imports this module, not the reverse)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.json")
            trace._native.write_chrome_trace(path)
            yield path
        return
    if not isinstance(trace, (str, os.PathLike)):
        raise InvalidArgument(f"expected a trace file path or a profile, got {type(trace).__name__}")
    yield os.fspath(trace)


def read_trace(trace: Any):
    """The spans of a trace file (Chrome trace JSON or CSV record table, as the profiler and
    furiosa-trace write them) or of a profile, as the DataFrame of get_pandas_dataframe()."""
    import pandas as pd

    with _trace_file(trace) as path:
        text = _native.trace_record_table_csv(path)
    return pd.read_csv(io.StringIO(text), dtype=_COLUMN_DTYPES, keep_default_na=False,
                       na_values={c: [""] for c, t in _COLUMN_DTYPES.items() if t == "Int64"})


def analyze_trace(trace: Any, top: int = 10, order_by: str = "time", aggregate_by: str = "name",
                  aggregate: str = "sum", min_time: float = 0.0, type: Optional[str] = None,
                  pe: Optional[int] = None):
    """The operator analysis of ``furiosa-trace analyze`` (MegEngine's profile_analyze) as a
    pandas DataFrame, one row per NPU kernel (aggregate_by="name"), kernel call ("none") or
    kernel type ("type"), ranked by order_by ("time", "cumulative", "flops", "memory",
    "bandwidth"), time reduced by aggregate ("sum", "mean", "max", "min", "count"), rows with a
    mean time per call under min_time seconds left out, only kernels of ``type``
    ("LowLevelConv2d" or "Conv2d") and on PE ``pe`` when given, ``top`` rows (0: all).

    Columns (docs/profiler.md): rank, name, operator_index, instruction_index, pe_index, calls,
    time_ns, total_ns, mean_ns, min_ns, max_ns, share, cumulative_ns, cumulative_share, flops,
    flops_per_s, bytes, bytes_per_s, dram_bytes, spill_bytes, bound, in_shapes, out_shapes
    (flops, bytes, dram_bytes and spill_bytes per call). ``trace`` is a trace file path or a
    profile. Raises InvalidArgument for an unknown option value.
    """
    import pandas as pd

    with _trace_file(trace) as path:
        text = _native.analyze_trace(path, top, order_by, aggregate_by, aggregate, float(min_time),
                                     type or "", -1 if pe is None else int(pe))
    return pd.read_csv(io.StringIO(text), dtype={"bound": "string", "in_shapes": "string",
                                                 "out_shapes": "string", "name": "string"},
                       keep_default_na=False)
