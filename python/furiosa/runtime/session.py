"""The SDK's older session API (``furiosa.runtime.session``), on the same runtime::

    from furiosa.runtime import session, tensor
    with session.create("mnist.tflite") as sess:
        outputs = sess.run(tensor.rand(sess.input(0)))
        print(outputs[0].numpy())

    submitter, queue = session.create_async("mnist.tflite", worker_num=2)
    submitter.submit(tensor.rand(submitter.input(0)), context=1)
    context, outputs = queue.recv()
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import Inputs, QueuePair, Receiver, Submitter, create_queue, create_runner
from .tensor import Tensor, TensorArray, TensorDesc


class Session:
    """A runner with the session API: ``input(i)``, ``run(...)`` returning a TensorArray."""

    def __init__(self, runner):
        self._runner = runner
        self.model = runner.model

    def input(self, index: int) -> TensorDesc:
        return self.model.input(index)

    def output(self, index: int) -> TensorDesc:
        return self.model.output(index)

    def inputs(self) -> List[TensorDesc]:
        return self.model.inputs()

    def outputs(self) -> List[TensorDesc]:
        return self.model.outputs()

    @property
    def input_num(self) -> int:
        return self.model.input_num

    @property
    def output_num(self) -> int:
        return self.model.output_num

    def summary(self) -> str:
        return self.model.summary()

    def print_summary(self) -> None:
        self.model.print_summary()

    def _wrap(self, arrays: List[np.ndarray]) -> TensorArray:
        return TensorArray(Tensor(d, a) for d, a in zip(self.model.outputs(), arrays))

    def run(self, inputs: Inputs) -> TensorArray:
        """Runs one inference (see Runner.run); the outputs as a TensorArray."""
        return self._wrap(self._runner.run(inputs))

    def run_with(self, outputs: Sequence[str], inputs: Mapping[str, np.ndarray]) -> TensorArray:
        """Runs with inputs by name and returns the named outputs, in the order asked."""
        arrays = self._runner.run(dict(inputs))
        by_name = {d.name: Tensor(d, a) for d, a in zip(self.model.outputs(), arrays)}
        missing = [n for n in outputs if n not in by_name]
        if missing:
            from .errors import InvalidInput
            raise InvalidInput(f"unknown output '{missing[0]}'", tensor=missing[0])
        return TensorArray(by_name[n] for n in outputs)

    def close(self) -> bool:
        return self._runner.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def create(model, device: Optional[str] = None, worker_num: Optional[int] = None,
           batch_size: Optional[int] = None, compiler_config: Optional[Mapping] = None) -> Session:
    """A Session over create_runner(model, ...) (same arguments and errors)."""
    return Session(create_runner(model, device=device, worker_num=worker_num, batch_size=batch_size,
                                 compiler_config=compiler_config))


class AsyncSession:
    """The submitting side of create_async: ``submit(inputs, context)``, ``input(i)``."""

    def __init__(self, submitter: Submitter):
        self._submitter = submitter
        self.model = submitter.model

    def input(self, index: int) -> TensorDesc:
        return self.model.input(index)

    def inputs(self) -> List[TensorDesc]:
        return self.model.inputs()

    def submit(self, inputs: Inputs, context: Any = None) -> None:
        self._submitter.submit(inputs, context)

    def close(self) -> None:
        self._submitter.close()

    def __enter__(self) -> "AsyncSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class CompletionQueue:
    """The receiving side of create_async: ``recv(timeout_ms)`` -> (context, TensorArray);
    iterable until the session is closed and drained."""

    def __init__(self, receiver: Receiver):
        self._receiver = receiver
        self.model = receiver.model

    def recv(self, timeout: Optional[int] = None) -> Tuple[Any, TensorArray]:
        context, arrays = self._receiver.recv(timeout)
        return context, TensorArray(Tensor(d, a) for d, a in zip(self.model.outputs(), arrays))

    def close(self) -> None:
        self._receiver.close()

    def __iter__(self):
        return self

    def __next__(self) -> Tuple[Any, TensorArray]:
        context, arrays = next(self._receiver)
        return context, TensorArray(Tensor(d, a) for d, a in zip(self.model.outputs(), arrays))

    def __enter__(self) -> "CompletionQueue":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def create_async(model, device: Optional[str] = None, worker_num: Optional[int] = None,
                 batch_size: Optional[int] = None, compiler_config: Optional[Mapping] = None,
                 input_queue_size: Optional[int] = None,
                 output_queue_size: Optional[int] = None) -> Tuple[AsyncSession, CompletionQueue]:
    """(AsyncSession, CompletionQueue) over create_queue(model, ...)."""
    submitter, receiver = create_queue(model, device=device, worker_num=worker_num,
                                       batch_size=batch_size, compiler_config=compiler_config,
                                       input_queue_size=input_queue_size,
                                       output_queue_size=output_queue_size)
    return AsyncSession(submitter), CompletionQueue(receiver)


__all__ = ["create", "create_async", "Session", "AsyncSession", "CompletionQueue", "QueuePair"]
