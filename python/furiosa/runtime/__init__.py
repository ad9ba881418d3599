"""furiosa.runtime: run models on FuriosaAI Warboy NPUs (or the simulator) from Python.

The API follows FuriosaAI's SDK::

    from furiosa.runtime import create_runner
    with create_runner("mnist.tflite", device="warboy(2)*1") as runner:
        outputs = runner.run([image])          # list of numpy arrays

    submitter, receiver = create_queue("mnist.tflite", worker_num=4)
    submitter.submit([image], context=0)
    context, outputs = receiver.recv()

The work is done by the C++ runtime (the GIL is released while it runs); see docs/python.md.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native
from ._options import queue_sizes, session_args
from .errors import (Cancelled, FuriosaRuntimeError, InvalidArgument, InvalidInput,
                     QueueWaitTimeout, SessionClosed, SessionTerminated)
from .tensor import DataType, TensorDesc

__version__ = "0.1.0"

Inputs = Union[np.ndarray, Sequence[np.ndarray], Mapping[str, np.ndarray]]


class Model:
    """The inputs and outputs of a compiled model (TensorDesc each, in model order)."""

    def __init__(self, inputs: List[tuple], outputs: List[tuple]):
        self._inputs = [TensorDesc(i, *d) for i, d in enumerate(inputs)]
        self._outputs = [TensorDesc(i, *d) for i, d in enumerate(outputs)]

    def inputs(self) -> List[TensorDesc]:
        """Descriptions of the inputs."""
        return list(self._inputs)

    def outputs(self) -> List[TensorDesc]:
        """Descriptions of the outputs."""
        return list(self._outputs)

    def input(self, index: int) -> TensorDesc:
        """Description of input ``index``."""
        return self._inputs[index]

    def output(self, index: int) -> TensorDesc:
        """Description of output ``index``."""
        return self._outputs[index]

    @property
    def input_num(self) -> int:
        return len(self._inputs)

    @property
    def output_num(self) -> int:
        return len(self._outputs)

    def summary(self) -> str:
        """One line per input and output."""
        lines = ["Inputs:"] + [f"{{{d.index}: {d}}}" for d in self._inputs]
        lines += ["Outputs:"] + [f"{{{d.index}: {d}}}" for d in self._outputs]
        return "\n".join(lines)

    def print_summary(self) -> None:
        print(self.summary())


class RunFuture:
    """The pending result of Runner.run_async: ``result()`` blocks (the GIL released),
    ``await future`` waits in the event loop's executor. The outputs are a list of arrays; a
    failed run raises its FuriosaRuntimeError from result()/await (``Cancelled`` after a
    successful ``cancel()``)."""

    def __init__(self, pending: "_native.PendingRun"):
        self._pending = pending
        self._lock = threading.Lock()
        self._outcome: Optional[Tuple[bool, Any]] = None

    def done(self) -> bool:
        """True once the run has completed (successfully or not)."""
        return self._outcome is not None or self._pending.done()

    def cancel(self) -> bool:
        """Cancels the run (the C++ InferRequest::cancel): one still waiting for the runtime's
        workers is withdrawn at once, one already running stops at its next stage boundary (a
        device execution in progress is never aborted). True when the run's result is (or
        will be) the ``Cancelled`` error, False when it completed (or completes) on its own.
        Never waits for the run."""
        return self._pending.cancel()

    def result(self, timeout: Optional[float] = None) -> List[np.ndarray]:
        """The outputs; waits at most ``timeout`` seconds (None: no bound), then raises
        QueueWaitTimeout. Raises the run's error when it failed."""
        if timeout is not None and not self._pending.wait(float(timeout)):
            raise QueueWaitTimeout(f"run_async: no result within {timeout} s")
        with self._lock:
            if self._outcome is None:
                try:
                    self._outcome = (True, self._pending.result())
                except FuriosaRuntimeError as e:
                    self._outcome = (False, e)
        ok, value = self._outcome
        if not ok:
            raise value
        return value

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        """The run's error, or None when it succeeded."""
        try:
            self.result(timeout)
        except QueueWaitTimeout:
            raise
        except FuriosaRuntimeError as e:
            return e
        return None

    def __await__(self):
        return asyncio.get_running_loop().run_in_executor(None, self.result).__await__()


class Runner:
    """A model compiled for and bound to a device (create_runner). ``run`` is thread-safe: calls
    from many Python threads share the device and the host workers."""

    def __init__(self, native: "_native.Runner"):
        self._native = native
        self.model = Model(native.inputs(), native.outputs())

    @property
    def device_name(self) -> str:
        """The device files held, e.g. "npu0pe0-1"."""
        return self._native.device_name()

    @property
    def backend(self) -> str:
        """The device backend and why it was chosen, e.g. "sim (no Warboy card found ...)"."""
        return self._native.backend()

    def run(self, inputs: Inputs) -> List[np.ndarray]:
        """Runs one inference. ``inputs``: one array (single-input models), a list in model
        order, or a dict by input name; each C-contiguous or not, of the input's dtype and shape.
        Returns the outputs as numpy arrays (no copy of the runtime's buffers). Raises
        InvalidInput naming the tensor for a wrong count/name/dtype/shape (nothing runs then),
        DeviceFault when the device fails, SessionClosed after close()."""
        return self._native.run(inputs)

    def run_async(self, inputs: Inputs) -> RunFuture:
        """Starts one inference and returns at once; the inputs are validated (and copied) now,
        so InvalidInput is raised here."""
        return RunFuture(self._native.run_async(inputs))

    def close(self) -> bool:
        """Waits for runs in flight and releases the device. Idempotent; returns True."""
        self._native.close()
        return True

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    async def __aenter__(self) -> "Runner":
        return self

    async def __aexit__(self, *exc) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.close)


def create_runner(model, *, device: Optional[str] = None, worker_num: Optional[int] = None,
                  batch_size: Optional[int] = None, compiler_config: Optional[Mapping] = None,
                  backend: Optional[str] = None) -> Runner:
    """Compiles ``model`` (.onnx, .tflite or an .enf program file) and opens the device.

    Args:
        model: path of the model file.
        device: device spec in the SDK's syntax ("warboy(2)*1", "warboy(1)*1", "npu:0:0",
            "npu0pe0-1", ...); None means FURIOSA_DEVICES, else NPU_DEVNAME, else "warboy(2)*1".
        worker_num: host workers (default 2).
        batch_size: batch bound to a symbolic dim 0 of the inputs (default 1).
        compiler_config: the SDK's compiler options (see _options.compiler_config_of).
        backend: "sim", "pcie" or None/"auto" (FURIOSA_BACKEND, else pcie when a card is present).

    Raises ModelLoadFailed, UnsupportedOperator, IncompatibleModel, InvalidArgument,
    DeviceNotFound, DeviceBusy.
    """
    return Runner(_native.Runner(**session_args(model, device, worker_num, batch_size,
                                                compiler_config, backend)))


class _Queue:
    """State shared by a Submitter and its Receiver: the native queue and the contexts of the
    requests in flight, by key (the runtime carries only the key)."""

    def __init__(self, native: "_native.Queue"):
        self.native = native
        self.model = Model(native.inputs(), native.outputs())
        self.keys = itertools.count()
        self.contexts: Dict[int, Any] = {}


class Submitter:
    """The submitting side of create_queue. Thread-safe."""

    def __init__(self, queue: _Queue):
        self._queue = queue
        self.model = queue.model

    def submit(self, inputs: Inputs, context: Any = None) -> None:
        """Queues one request; blocks while input_queue_size requests wait for a worker. Raises
        InvalidInput naming the tensor (nothing is queued) and SessionClosed after close()."""
        key = next(self._queue.keys)
        self._queue.contexts[key] = context
        try:
            self._queue.native.submit(inputs, key)
        except BaseException:
            self._queue.contexts.pop(key, None)
            raise

    def close(self) -> None:
        """No more submits; submitted requests still complete and can be received, after which
        the receiver ends (SessionTerminated / end of iteration). Idempotent."""
        self._queue.native.close_submitter()

    def __enter__(self) -> "Submitter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Receiver:
    """The receiving side of create_queue. Thread-safe. Iterating (``for context, outputs in
    receiver`` or ``async for ...``) receives until the submitter is closed and every result was
    received."""

    def __init__(self, queue: _Queue):
        self._queue = queue
        self.model = queue.model

    def recv(self, timeout: Optional[int] = None) -> Tuple[Any, List[np.ndarray]]:
        """The next result as (context, outputs), in completion order. ``timeout`` in
        milliseconds (None: no bound). Raises QueueWaitTimeout when nothing came in time,
        SessionTerminated when the submitter is closed and every result was received,
        SessionClosed after close(), and a failed request's own error (e.g. DeviceFault) with
        the request's context in its ``context`` attribute."""
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 0):
            raise InvalidArgument(f"recv: timeout must be milliseconds >= 0 or None, got {timeout!r}")
        key, outputs, error = self._queue.native.recv(-1 if timeout is None else timeout)
        context = self._queue.contexts.pop(key, None)
        if error is not None:
            error.context = context
            raise error
        return context, outputs

    def close(self) -> None:
        """Stops the session: results not received are dropped. Idempotent."""
        self._queue.native.close_receiver()
        self._queue.contexts.clear()

    def __iter__(self):
        return self

    def __next__(self) -> Tuple[Any, List[np.ndarray]]:
        try:
            return self.recv()
        except SessionTerminated:
            raise StopIteration from None

    def __aiter__(self):
        return self

    async def __anext__(self) -> Tuple[Any, List[np.ndarray]]:
        try:
            return await asyncio.get_running_loop().run_in_executor(None, self.recv)
        except SessionTerminated:
            raise StopAsyncIteration from None

    def __enter__(self) -> "Receiver":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class QueuePair(tuple):
    """(Submitter, Receiver), usable as ``with`` / ``async with`` (closing both at the end)."""

    def __enter__(self) -> "QueuePair":
        return self

    def __exit__(self, *exc) -> None:
        self[0].close()
        self[1].close()

    async def __aenter__(self) -> "QueuePair":
        return self

    async def __aexit__(self, *exc) -> None:
        self.__exit__(*exc)


def create_queue(model, *, device: Optional[str] = None, worker_num: Optional[int] = None,
                 batch_size: Optional[int] = None, compiler_config: Optional[Mapping] = None,
                 input_queue_size: Optional[int] = None, output_queue_size: Optional[int] = None,
                 backend: Optional[str] = None) -> QueuePair:
    """Compiles ``model``, opens the device and starts the workers (as create_runner) and returns
    ``(submitter, receiver)``. input_queue_size / output_queue_size bound the requests waiting
    for a worker and the results not yet received (default 64 each)."""
    args = session_args(model, device, worker_num, batch_size, compiler_config, backend)
    args["input_queue_size"], args["output_queue_size"] = queue_sizes(input_queue_size, output_queue_size)
    queue = _Queue(_native.Queue(**args))
    return QueuePair((Submitter(queue), Receiver(queue)))


__all__ = [
    "create_runner", "create_queue", "Runner", "RunFuture", "Submitter", "Receiver", "QueuePair",
    "Model", "TensorDesc", "DataType", "FuriosaRuntimeError", "InvalidInput", "SessionClosed",
    "SessionTerminated", "QueueWaitTimeout", "Cancelled",
]
