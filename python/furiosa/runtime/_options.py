"""Checks and normalizes the keyword arguments of create_runner / create_queue / session.create
into the form the native layer takes (names only, known keys only, right types)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _native
from .errors import InvalidArgument

# The keys of compiler_config (FuriosaAI SDK names); compiler/compiler.h CompilerOptions.
COMPILER_CONFIG_KEYS = ("without_quantize", "normalized_pixel_outputs", "permute_input",
                        "input_shapes", "remove_lower", "remove_unlower")


def model_path(model: Any) -> str:
    """The model file as a str path; a model must be a path (str or os.PathLike)."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    raise InvalidArgument(f"model: expected a file path (str or os.PathLike), got {type(model).__name__}")


def _int_option(name: str, value: Any, default: int, minimum: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgument(f"{name}: expected an integer >= {minimum}, got {value!r}")
    return value


def session_args(model: Any, device: Optional[str], worker_num: Optional[int],
                 batch_size: Optional[int], compiler_config: Optional[Mapping],
                 backend: Optional[str]) -> Dict[str, Any]:
    """Keyword arguments of _native.Runner / _native.Queue (without the queue sizes)."""
    path = model_path(model)
    if device is not None and not isinstance(device, str):
        raise InvalidArgument(f"device: expected a device spec string, got {device!r}")
    if backend is not None and not isinstance(backend, str):
        raise InvalidArgument(f"backend: expected a backend name, got {backend!r}")
    batch = _int_option("batch_size", batch_size, 1, 1)
    return {
        "path": path,
        "device": device or "",
        "worker_num": _int_option("worker_num", worker_num, 2, 1),
        "batch_size": batch,
        "compiler_config": compiler_config_of(compiler_config, lambda: _native.describe_model(path, batch)),
        "backend": backend or "",
    }


def queue_sizes(input_queue_size: Optional[int], output_queue_size: Optional[int]) -> Tuple[int, int]:
    """The queue bounds (defaults 64 and 64, as QueueOptions)."""
    return (_int_option("input_queue_size", input_queue_size, 64, 1),
            _int_option("output_queue_size", output_queue_size, 64, 1))


def compiler_config_of(config: Optional[Mapping],
                       describe: Callable[[], Tuple[List[tuple], List[tuple]]]) -> Dict[str, Any]:
    """compiler_config in the native form: tensor names instead of indices, every key known and
    of the right type. The SDK's forms are accepted:

    * ``without_quantize``: a list of input names or indices, or
      ``{"parameters": [{"input_min": .., "input_max": .., "permute": [..]}, ...]}`` (one entry
      per input in order; a ``permute`` there is the input's permute_input);
    * ``normalized_pixel_outputs``: a list of output names or indices;
    * ``permute_input``: ``{input name: perm}`` or a list of perms, one per input in order;
    * ``input_shapes``: ``{input name: shape}``, pinning the input's symbolic dims (ONNX
      Runtime's free-dimension overrides; names only: describing a model with free dims needs
      them pinned first);
    * ``remove_lower`` / ``remove_unlower``: bool.

    ``describe`` gives the model's (inputs, outputs) descriptions; it is called only when an index
    must be resolved. Raises InvalidArgument naming the key for anything else.
    """
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise InvalidArgument(f"compiler_config: expected a dict, got {type(config).__name__}")
    described: List[Tuple[List[tuple], List[tuple]]] = []

    def names(which: int) -> List[str]:
        if not described:
            described.append(describe())
        return [d[0] for d in described[0][which]]

    def resolve(key: str, item: Any, which: int) -> str:
        if isinstance(item, str):
            return item
        if isinstance(item, int) and not isinstance(item, bool):
            listed = names(which)
            if 0 <= item < len(listed):
                return listed[item]
            raise InvalidArgument(f"compiler_config.{key}: index {item} is out of range "
                                  f"(the model has {len(listed)})")
        raise InvalidArgument(f"compiler_config.{key}: expected names or indices, got {item!r}")

    out: Dict[str, Any] = {}
    permute: Dict[str, List[int]] = {}
    for key, value in config.items():
        if key not in COMPILER_CONFIG_KEYS:
            raise InvalidArgument(f"compiler_config: unknown key {key!r} "
                                  f"(known: {', '.join(COMPILER_CONFIG_KEYS)})")
        if key in ("remove_lower", "remove_unlower"):
            if not isinstance(value, bool):
                raise InvalidArgument(f"compiler_config.{key}: expected a bool, got {value!r}")
            out[key] = value
        elif key == "without_quantize":
            if isinstance(value, Mapping):
                params = value.get("parameters")
                if not isinstance(params, Sequence) or set(value) - {"parameters"}:
                    raise InvalidArgument("compiler_config.without_quantize: expected "
                                          "{'parameters': [...]} or a list of inputs")
                inputs = names(0)
                if len(params) > len(inputs):
                    raise InvalidArgument(f"compiler_config.without_quantize: {len(params)} parameters "
                                          f"for {len(inputs)} input(s)")
                out[key] = inputs[:len(params)]
                for name, p in zip(inputs, params):
                    if not isinstance(p, Mapping):
                        raise InvalidArgument(f"compiler_config.without_quantize: parameters of "
                                              f"{name!r}: expected a dict, got {p!r}")
                    if "permute" in p:
                        permute[name] = [int(a) for a in p["permute"]]
            elif isinstance(value, Sequence) and not isinstance(value, str):
                out[key] = [resolve(key, v, 0) for v in value]
            else:
                raise InvalidArgument(f"compiler_config.{key}: expected a list, got {value!r}")
        elif key == "normalized_pixel_outputs":
            if not isinstance(value, Sequence) or isinstance(value, str):
                raise InvalidArgument(f"compiler_config.{key}: expected a list, got {value!r}")
            out[key] = [resolve(key, v, 1) for v in value]
        elif key == "input_shapes":
            if not isinstance(value, Mapping):
                raise InvalidArgument(f"compiler_config.{key}: expected {{input name: shape}}, got {value!r}")
            shapes: Dict[str, List[int]] = {}
            for name, shape in value.items():
                if (not isinstance(name, str) or isinstance(shape, str) or not isinstance(shape, Sequence)
                        or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape)):
                    raise InvalidArgument(f"compiler_config.{key}: expected {{input name: [dims]}}, "
                                          f"got {name!r}: {shape!r}")
                shapes[name] = [int(d) for d in shape]
            out[key] = shapes
        elif key == "permute_input":
            if isinstance(value, Mapping):
                for name, perm in value.items():
                    permute[resolve(key, name, 0)] = [int(a) for a in perm]
            elif isinstance(value, Sequence) and not isinstance(value, str):
                for name, perm in zip(names(0), value):
                    permute[name] = [int(a) for a in perm]
            else:
                raise InvalidArgument(f"compiler_config.{key}: expected a dict or a list, got {value!r}")
    if permute:
        out["permute_input"] = permute
    return out
