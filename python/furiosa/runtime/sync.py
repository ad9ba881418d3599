"""``furiosa.runtime.sync``: the SDK's module of blocking runners and queues (the same objects as
furiosa.runtime, whose calls block and release the GIL)."""

from . import Receiver, Runner, Submitter, create_queue, create_runner

__all__ = ["create_runner", "create_queue", "Runner", "Submitter", "Receiver"]
