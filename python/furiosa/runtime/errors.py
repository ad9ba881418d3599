"""Exceptions of furiosa.runtime, one class per error code of the C++ runtime.

Every error the runtime raises is a :class:`FuriosaRuntimeError` whose class is named after the
runtime's ``ErrorCode`` (``InvalidInput``, ``DeviceBusy``, ``QueueWaitTimeout``, ...; see
core/include/furiosa/core/error.h). ``str(error)`` is the runtime's one-line message,
``"<Code>: <message>"``; the objects it is about are attributes (``tensor``, ``node``,
``device_file``, ``file``; empty strings when they do not apply).
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Dict, Type


class FuriosaRuntimeError(Exception):
    """Base class of every error of the runtime.

    Attributes:
        code: the runtime's error code name, e.g. ``"InvalidInput"``.
        message: the message without the ``"<Code>: "`` prefix.
        device_file, node, tensor, file: what the error is about ("" when not applicable).
    """

    code = "Internal"

    def __init__(self, message: str, *, device_file: str = "", node: str = "", tensor: str = "",
                 file: str = ""):
        super().__init__(f"{self.code}: {message}")
        self.message = message
        self.device_file = device_file
        self.node = node
        self.tensor = tensor
        self.file = file

    def __reduce__(self):
        # Rebuilt from the message alone (not from args, which carry the "<Code>: " prefix: that
        # would double it) plus the attributes, so an error crossing a process boundary
        # (multiprocessing, Dask) reads the same on the other side.
        return (type(self), (self.message,), {"device_file": self.device_file, "node": self.node,
                                              "tensor": self.tensor, "file": self.file})


def _define(name: str, *bases: type, doc: str) -> Type[FuriosaRuntimeError]:
    return type(name, (FuriosaRuntimeError, *bases), {"code": name, "__doc__": doc,
                                                      "__module__": __name__})


# The runtime's error codes (ErrorCode in core/include/furiosa/core/error.h). Input and argument
# errors are also ValueErrors and a queue timeout is also a TimeoutError, so generic Python
# handlers catch them too.
InvalidInput = _define("InvalidInput", ValueError,
                       doc="Wrong input count, name, shape or dtype; names the tensor.")
InvalidArgument = _define("InvalidArgument", ValueError,
                          doc="A bad option value (device spec, batch size, compiler_config).")
ModelLoadFailed = _define("ModelLoadFailed", doc="The model file is missing, truncated or unparseable.")
IncompatibleModel = _define("IncompatibleModel", doc="A valid model that violates a compiler assumption.")
UnsupportedOperator = _define("UnsupportedOperator", doc="A node that neither the NPU nor the host can run.")
CompilationFailed = _define("CompilationFailed", doc="An internal compiler failure on a supported graph.")
DeviceNotFound = _define("DeviceNotFound", doc="No device matches the device spec.")
DeviceBusy = _define("DeviceBusy", doc="The device's PEs are held by another session.")
DeviceFault = _define("DeviceFault", doc="A device-side failure (DMA error, execution error, invalid program).")
DeviceTimeout = _define("DeviceTimeout", TimeoutError,
                        doc="An execution did not finish within the watchdog's limit; the device was reset.")
QueueWaitTimeout = _define("QueueWaitTimeout", TimeoutError, doc="A wait on a queue ran out of time.")
SessionClosed = _define("SessionClosed", doc="The runner or queue was closed before the request ran.")
SessionTerminated = _define("SessionTerminated",
                            doc="The submitter is closed and every result was received.")
Cancelled = _define("Cancelled", concurrent.futures.CancelledError,
                    doc="The request was cancelled (RunFuture.cancel) before it completed.")
IoError = _define("IoError", doc="Writing an output or trace file failed.")
Internal = _define("Internal", doc="A broken invariant inside the runtime (a bug).")

_classes: Dict[str, Type[FuriosaRuntimeError]] = {
    cls.code: cls
    for cls in (InvalidInput, InvalidArgument, ModelLoadFailed, IncompatibleModel,
                UnsupportedOperator, CompilationFailed, DeviceNotFound, DeviceBusy, DeviceFault,
                DeviceTimeout, QueueWaitTimeout, SessionClosed, SessionTerminated, Cancelled, IoError,
                Internal)
}
_lock = threading.Lock()


def error_class(code: str) -> Type[FuriosaRuntimeError]:
    """The exception class of a runtime error code name; a code this module does not list yet
    (a newer runtime) gets a FuriosaRuntimeError subclass of that name, created once."""
    with _lock:
        cls = _classes.get(code)
        if cls is None:
            cls = _classes[code] = _define(code, doc=f"Runtime error {code}.")
        return cls


__all__ = ["FuriosaRuntimeError", "error_class", *sorted(_classes)]
