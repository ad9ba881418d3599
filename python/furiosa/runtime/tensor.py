"""Tensor descriptions and helpers, as in FuriosaAI's SDK (``furiosa.runtime.tensor``).

Tensors themselves are numpy arrays: inputs are given as ``numpy.ndarray`` and outputs come back
as ``numpy.ndarray`` (dense, C order). ``TensorDesc`` describes a model input or output.
"""

from __future__ import annotations

import enum
from typing import Sequence, Tuple

import numpy as np


class DataType(enum.Enum):
    """Element type of a tensor. ``.numpy`` is the numpy dtype."""

    FLOAT32 = "float32"
    UINT8 = "uint8"
    INT8 = "int8"
    INT32 = "int32"
    INT64 = "int64"

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype of this element type."""
        return np.dtype(self.value)

    @property
    def numpy_dtype(self) -> np.dtype:
        """Same as ``numpy`` (the SDK's older name)."""
        return self.numpy

    def __str__(self) -> str:
        return self.value


class TensorDesc:
    """A model input or output: name, shape, element type, axis naming and size.

    Attributes:
        name: the tensor's name in the model.
        shape: dims, outermost first (tuple of int), at the session's batch size.
        dtype: the element type (DataType; ``dtype.numpy`` is the numpy dtype).
        format: axis naming: "NCHW", "NHWC" (TFLite image tensors), "NC", "C" or "".
        size: bytes of a dense tensor of this description.
    """

    __slots__ = ("index", "name", "dtype", "shape", "format", "size")

    def __init__(self, index: int, name: str, dtype: str, shape: Sequence[int], format: str,
                 size: int):
        self.index = index
        self.name = name
        self.dtype = DataType(dtype)
        self.shape: Tuple[int, ...] = tuple(int(d) for d in shape)
        self.format = format
        self.size = int(size)

    @property
    def numpy_dtype(self) -> np.dtype:
        """The numpy dtype of the elements."""
        return self.dtype.numpy

    @property
    def ndim(self) -> int:
        """Number of dims."""
        return len(self.shape)

    @property
    def length(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    def dim(self, i: int) -> int:
        """The i-th dim."""
        return self.shape[i]

    def __repr__(self) -> str:
        return (f"TensorDesc(name={self.name!r}, shape={self.shape}, dtype={self.dtype}, "
                f"format={self.format!r}, size={self.size})")


def zeros(desc: TensorDesc) -> np.ndarray:
    """A zero-filled array matching ``desc``."""
    return np.zeros(desc.shape, dtype=desc.numpy_dtype)


def rand(desc: TensorDesc) -> np.ndarray:
    """A random array matching ``desc``: uniform in [0, 1) for floats, over the whole range of
    the type for integers (as the SDK's ``tensor.rand``)."""
    dtype = desc.numpy_dtype
    if np.issubdtype(dtype, np.floating):
        return np.random.random_sample(desc.shape).astype(dtype)
    info = np.iinfo(dtype)
    return np.random.randint(info.min, int(info.max) + 1, size=desc.shape, dtype=dtype)


class Tensor:
    """An output of the legacy ``session`` API: ``numpy()`` gives the array."""

    __slots__ = ("desc", "_array")

    def __init__(self, desc: TensorDesc, array: np.ndarray):
        self.desc = desc
        self._array = array

    def numpy(self) -> np.ndarray:
        """The tensor's values (no copy)."""
        return self._array

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._array.shape

    @property
    def dtype(self) -> DataType:
        return self.desc.dtype

    def __repr__(self) -> str:
        return f"Tensor(name={self.desc.name!r}, shape={self.shape}, dtype={self.dtype})"


class TensorArray(list):
    """The outputs of a legacy ``Session.run``: a list of Tensor; ``numpy()`` gives the arrays."""

    def numpy(self):
        """The outputs as a list of numpy arrays."""
        return [t.numpy() for t in self]


__all__ = ["DataType", "TensorDesc", "Tensor", "TensorArray", "zeros", "rand"]
