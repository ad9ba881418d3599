"""Shared fixtures of the Python tests (run by ctest through pytest; see tests/CMakeLists.txt).

The models come from ../shared/models (FURIOSA_SHARED_MODELS_DIR); a missing folder fails the
tests with its path rather than skipping them. FURIOSA_RUN is the furiosa-run binary of the same
build, used as the C++ reference.
"""

import os
import pathlib

import numpy as np
import pytest


def _env_path(name: str) -> pathlib.Path:
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set (run the Python tests through ctest)")
    path = pathlib.Path(value)
    if not path.exists():
        pytest.fail(f"{name}={path} does not exist")
    return path


@pytest.fixture(scope="session")
def shared_models() -> pathlib.Path:
    return _env_path("FURIOSA_SHARED_MODELS_DIR")


@pytest.fixture(scope="session")
def furiosa_run() -> pathlib.Path:
    return _env_path("FURIOSA_RUN")


def model_file(shared_models: pathlib.Path, relative: str) -> pathlib.Path:
    path = shared_models / relative
    if not path.exists():
        pytest.fail(f"model {path} is missing (../shared/models, see its MANIFEST.md)")
    return path


@pytest.fixture(scope="session")
def mnist_tflite(shared_models) -> pathlib.Path:
    """The SDK's MNIST TFLite model, as in the profiler guide's examples."""
    return model_file(shared_models, "furiosa-sdk/MNISTnet_uint8_quant_without_softmax/"
                                     "MNISTnet_uint8_quant_without_softmax.tflite")


@pytest.fixture(scope="session")
def mnist_onnx(shared_models) -> pathlib.Path:
    return model_file(shared_models, "onnx-zoo/mnist-12-int8/mnist-12-int8.onnx")


@pytest.fixture(scope="session")
def mobilenet_onnx(shared_models) -> pathlib.Path:
    return model_file(shared_models, "onnx-zoo/mobilenetv2-12-int8/mobilenetv2-12-int8.onnx")


def read_pb(path: pathlib.Path) -> np.ndarray:
    """An ONNX TensorProto file as a numpy array (Debian's python3-onnx)."""
    import onnx
    from onnx import numpy_helper

    tensor = onnx.TensorProto()
    tensor.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(tensor)
