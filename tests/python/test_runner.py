"""create_runner: outputs bit for bit equal to the C++ runner's (furiosa-run), input checks."""

import asyncio
import os
import subprocess

import numpy as np
import pytest

from conftest import read_pb
from furiosa.runtime import create_runner, errors, tensor
from furiosa.runtime.errors import FuriosaRuntimeError


def cpp_outputs(furiosa_run, model, inputs, tmp_path):
    """The outputs furiosa-run (the C++ Runner) writes for the given .pb inputs."""
    out_dir = tmp_path / "cpp-outputs"
    cmd = [str(furiosa_run), str(model), "--output-dir", str(out_dir)]
    for name, pb in inputs.items():
        cmd += ["--input", f"{name}={pb}"]
    # The timeout only turns a hang into a failure (subprocess.run kills the child then).
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600)
    return out_dir


@pytest.mark.parametrize("relative", ["onnx-zoo/mnist-12-int8", "onnx-zoo/mobilenetv2-12-int8"])
def test_outputs_equal_cpp_runner(relative, shared_models, furiosa_run, tmp_path):
    folder = shared_models / relative
    model = folder / (folder.name + ".onnx")
    data = folder / "test_data_set_0"
    with create_runner(model) as runner:
        desc = runner.model.input(0)
        x = read_pb(data / "input_0.pb")
        assert x.shape == desc.shape and x.dtype == desc.numpy_dtype
        outputs = runner.run([x])
        out_dir = cpp_outputs(furiosa_run, model, {desc.name: data / "input_0.pb"}, tmp_path)
        for d, y in zip(runner.model.outputs(), outputs):
            expected = np.load(out_dir / f"{d.name}.npy")
            assert y.dtype == expected.dtype and y.shape == expected.shape
            assert np.array_equal(y, expected), f"{d.name} differs from furiosa-run's"
        # The stored reference agrees too (classification: same argmax).
        reference = read_pb(data / "output_0.pb")
        assert np.argmax(outputs[0]) == np.argmax(reference)
        # A non-contiguous view of the same values gives the same outputs.
        strided = np.asfortranarray(x)
        assert np.array_equal(runner.run(strided)[0], outputs[0])
        # by name, and asynchronously
        assert np.array_equal(runner.run({desc.name: x})[0], outputs[0])
        assert np.array_equal(runner.run_async(x).result(timeout=60)[0], outputs[0])

        async def awaited():
            return await runner.run_async([x])

        assert np.array_equal(asyncio.run(awaited())[0], outputs[0])


def test_model_description(mnist_tflite, mobilenet_onnx):
    with create_runner(mnist_tflite, device="warboy(1)*1") as runner:
        d = runner.model.input(0)
        assert (d.name, d.shape, d.numpy_dtype, d.format, d.size) == \
            ("input", (1, 28, 28, 1), np.dtype(np.uint8), "NHWC", 784)
        assert d.dtype.numpy == np.uint8
        assert runner.model.input_num == 1 and runner.model.output_num == 1
        assert runner.device_name == "npu0pe0"
    with create_runner(mobilenet_onnx, batch_size=2) as runner:
        assert runner.model.input(0).shape == (2, 3, 224, 224)
        assert runner.model.input(0).format == "NCHW"


def test_wrong_inputs_raise_invalid_input_naming_the_tensor(mnist_onnx):
    with create_runner(mnist_onnx) as runner:
        desc = runner.model.input(0)
        good = np.zeros(desc.shape, dtype=desc.numpy_dtype)
        cases = [
            np.zeros(desc.shape, dtype=np.float64),   # dtype without a runtime counterpart
            np.zeros(desc.shape, dtype=np.uint8),     # another runtime dtype
            np.zeros((1, 1, 28, 27), dtype=np.float32),  # shape
            np.zeros((2, 1, 28, 28), dtype=np.float32),  # batch
        ]
        for bad in cases:
            with pytest.raises(errors.InvalidInput) as info:
                runner.run(bad)
            assert info.value.tensor == desc.name
            assert desc.name in str(info.value)
            assert isinstance(info.value, ValueError)
        with pytest.raises(errors.InvalidInput):
            runner.run([good, good])
        with pytest.raises(errors.InvalidInput) as info:
            runner.run({"no_such_input": good})
        assert info.value.tensor == "no_such_input"
        with pytest.raises(errors.InvalidInput):
            runner.run([[0, 1, 2]])
        assert runner.run(good)  # the runner still works
    with pytest.raises(errors.SessionClosed):
        runner.run(good)


def test_load_errors(tmp_path, mnist_onnx):
    with pytest.raises(errors.ModelLoadFailed) as info:
        create_runner(tmp_path / "missing.onnx")
    assert info.value.file.endswith("missing.onnx")
    with pytest.raises(errors.InvalidArgument):
        create_runner(mnist_onnx, compiler_config={"INVALID_COMPILER_CONFIG_NAME": True})
    with pytest.raises(errors.InvalidArgument):
        create_runner(mnist_onnx, compiler_config={"remove_lower": 1})
    with pytest.raises(errors.InvalidArgument):
        create_runner(mnist_onnx, device="warboy(7)*1")
    with pytest.raises(errors.InvalidArgument):
        create_runner(mnist_onnx, worker_num=0)
    assert issubclass(errors.DeviceBusy, FuriosaRuntimeError)


def test_errors_survive_pickling(tmp_path):
    """An error crossing a process boundary (multiprocessing, Dask) keeps its class, one
    "<Code>: " prefix and its attributes: pickling rebuilt it from args, doubling the prefix."""
    import pickle
    with pytest.raises(errors.ModelLoadFailed) as info:
        create_runner(tmp_path / "missing.onnx")
    again = pickle.loads(pickle.dumps(info.value))
    assert type(again) is errors.ModelLoadFailed
    assert str(again) == str(info.value) and str(again).startswith("ModelLoadFailed: ")
    assert not str(again).startswith("ModelLoadFailed: ModelLoadFailed")
    assert again.message == info.value.message and again.file == info.value.file


def test_device_busy(mnist_onnx):
    with create_runner(mnist_onnx, device="npu0pe0"):
        with pytest.raises(errors.DeviceBusy) as info:
            create_runner(mnist_onnx, device="npu0pe0")
        assert "npu0pe0" in str(info.value)
    with create_runner(mnist_onnx, device="npu0pe0"):
        pass  # released by the first close


def test_compiler_config_sdk_forms(mnist_onnx, mnist_tflite):
    """The SDK's without_quantize form (parameters per input, by position) takes the input
    already quantized: mnist-12-int8's float input becomes its QuantizeLinear's 8-bit type."""
    with create_runner(mnist_onnx) as runner:
        assert runner.model.input(0).numpy_dtype == np.float32
    config = {"without_quantize": {"parameters": [{"input_min": 0.0, "input_max": 1.0}]}}
    with create_runner(mnist_onnx, compiler_config=config) as runner:
        desc = runner.model.input(0)
        assert desc.numpy_dtype in (np.uint8, np.int8)
        assert runner.run(tensor.rand(desc))[0].shape == (1, 10)
    with create_runner(mnist_onnx, compiler_config={"without_quantize": [0]}) as runner:
        assert runner.model.input(0).numpy_dtype in (np.uint8, np.int8)
    with pytest.raises(errors.InvalidArgument):
        create_runner(mnist_onnx, compiler_config={"without_quantize": [3]})
    # input_shapes pins free dims by input name; the model's own fixed shape is accepted, another
    # one refused naming the input.
    name = "Input3"
    with create_runner(mnist_onnx, compiler_config={"input_shapes": {name: [1, 1, 28, 28]}}) as runner:
        assert runner.model.input(0).shape == (1, 1, 28, 28)
    with pytest.raises(errors.IncompatibleModel, match="input_shapes: input 'Input3' cannot take shape"):
        create_runner(mnist_onnx, compiler_config={"input_shapes": {name: [1, 1, 28, 29]}})
    with pytest.raises(errors.InvalidArgument):
        create_runner(mnist_onnx, compiler_config={"input_shapes": [[1, 1, 28, 28]]})
    # remove_unlower keeps NHWC TFLite outputs as they are when there is nothing to unlower.
    with create_runner(mnist_tflite, compiler_config={"remove_unlower": False}) as runner:
        assert runner.model.output(0).shape == (1, 1, 1, 10)


def test_profiler_output_path_traces_python_programs(mnist_tflite, tmp_path):
    trace = tmp_path / "env-trace.json"
    env = dict(os.environ, FURIOSA_PROFILER_OUTPUT_PATH=str(trace))
    program = ("import sys\n"
               "from furiosa.runtime import create_runner, tensor\n"
               "with create_runner(sys.argv[1]) as r:\n"
               "    for _ in range(3): r.run(tensor.rand(r.model.input(0)))\n")
    subprocess.run([os.environ.get("FURIOSA_PYTHON", "python3"), "-c", program, str(mnist_tflite)],
                   env=env, check=True, timeout=600)  # the child is killed on timeout
    import json
    names = [e["name"] for e in json.loads(trace.read_text())["traceEvents"] if e.get("ph") == "X"]
    assert names.count("Inference") == 3


def test_run_async_cancel(mnist_onnx):
    """RunFuture.cancel (InferRequest::cancel): True exactly when result() raises Cancelled (also
    a concurrent.futures.CancelledError); a completed run is not cancelled. Which of a burst of
    runs the cancels catch depends on timing; the agreement does not."""
    import concurrent.futures

    with create_runner(mnist_onnx, worker_num=1) as runner:
        x = tensor.rand(runner.model.input(0))
        first = runner.run_async(x)
        expected = first.result(timeout=120)
        assert first.cancel() is False
        assert np.array_equal(first.result()[0], expected[0])
        futures = [runner.run_async(x) for _ in range(32)]
        answers = [f.cancel() for f in futures]
        for f, cancelled in zip(futures, answers):
            if cancelled:
                with pytest.raises(errors.Cancelled) as info:
                    f.result(timeout=120)
                assert isinstance(info.value, concurrent.futures.CancelledError)
                assert f.cancel() is True
            else:
                assert np.array_equal(f.result(timeout=120)[0], expected[0])
                assert f.cancel() is False
