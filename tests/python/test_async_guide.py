"""The SDK's asynchronous examples: submit with contexts, receive every result."""

import asyncio

import numpy as np
import pytest

from furiosa.runtime import create_queue, errors, session, tensor


def test_create_async_example(mnist_tflite):
    # --- the guide's program (session.create_async, contexts, recv) ---
    submitter, queue = session.create_async(str(mnist_tflite), worker_num=2,
                                            input_queue_size=100, output_queue_size=100)
    input_tensor = submitter.input(0)
    for i in range(0, 5):
        submitter.submit(tensor.rand(input_tensor), context=i)
    received = []
    for _ in range(0, 5):
        context, outputs = queue.recv(100_000)
        received.append(context)
        assert outputs[0].numpy().shape == (1, 1, 1, 10)
    queue.close()
    submitter.close()
    # --- end ---
    assert sorted(received) == [0, 1, 2, 3, 4]


def test_queue_iteration_ends_when_drained(mnist_tflite):
    submitter, receiver = create_queue(mnist_tflite, worker_num=2)
    desc = submitter.model.input(0)
    images = [tensor.rand(desc) for _ in range(8)]
    for i, image in enumerate(images):
        submitter.submit(image, context=("image", i))
    submitter.close()
    got = {context: outputs for context, outputs in receiver}
    assert sorted(got) == [("image", i) for i in range(8)]
    with pytest.raises(errors.SessionTerminated):
        receiver.recv(1000)
    with pytest.raises(errors.SessionClosed):
        submitter.submit(images[0])


def test_async_for_and_await(mnist_tflite):
    async def main():
        async with create_queue(mnist_tflite) as (submitter, receiver):
            desc = submitter.model.input(0)
            for i in range(6):
                submitter.submit(tensor.rand(desc), context=i)
            submitter.close()
            return sorted([context async for context, _ in receiver])

    assert asyncio.run(main()) == list(range(6))


def test_recv_timeout(mnist_tflite):
    with create_queue(mnist_tflite) as (submitter, receiver):
        with pytest.raises(errors.QueueWaitTimeout):
            receiver.recv(10)
        with pytest.raises(TimeoutError):  # also a TimeoutError
            receiver.recv(0)


def test_10000_requests_from_4_threads(mnist_onnx):
    """Every context comes back exactly once."""
    import threading

    per_thread, threads = 2500, 4
    submitter, receiver = create_queue(mnist_onnx, worker_num=4, input_queue_size=64,
                                       output_queue_size=64)
    desc = submitter.model.input(0)
    rng = np.random.default_rng(7)
    images = [rng.random(desc.shape, dtype=np.float32) for _ in range(16)]

    def submit(t):
        for i in range(per_thread):
            submitter.submit(images[(t + i) % len(images)], context=(t, i))

    def submit_until_closed(t):
        try:
            submit(t)
        except errors.SessionClosed:  # only when the test failed and closed the queue
            pass

    workers = [threading.Thread(target=submit_until_closed, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    try:
        seen = {}
        for _ in range(per_thread * threads):
            context, outputs = receiver.recv(120_000)
            seen[context] = seen.get(context, 0) + 1
            assert outputs[0].shape == (1, 10)
        for w in workers:
            w.join()
        submitter.close()
        with pytest.raises(errors.SessionTerminated):
            receiver.recv(1000)
        assert len(seen) == per_thread * threads
        assert set(seen.values()) == {1}
    finally:
        # On a failure above, closing the receiver makes blocked submits raise, so the threads
        # end and the interpreter does not wait for them forever.
        receiver.close()
        submitter.close()
        for w in workers:
            w.join()
