"""furiosa-serve under hostile traffic (issue 30), over raw loopback sockets: a request nested
100,000 levels deep, malformed HTTP, oversized headers and bodies (chunked too), slow headers,
timeout_us at int64's maximum, and SIGTERM while requests are still being received. Every case
gets its answer (or, for a timeout, a closed connection) and the server keeps serving. Run by
ctest (tests/CMakeLists.txt) with FURIOSA_SERVE and FURIOSA_SHARED_MODELS_DIR set."""

import json
import os
import pathlib
import re
import signal
import socket
import time

import numpy as np
import pytest
import requests

from serve_process import ServeProcess, env_path


SHARED = env_path("FURIOSA_SHARED_MODELS_DIR")
SERVE = env_path("FURIOSA_SERVE")
MNIST = SHARED / "onnx-zoo/mnist-12-int8/mnist-12-int8.onnx"
MAX_BODY = 1 << 20


def make_repo(root):
    version = root / "mnist" / "1"
    version.mkdir(parents=True)
    (version / "model.onnx").symlink_to(MNIST)
    (root / "mnist" / "config.json").write_text(json.dumps({"device": "npu0pe0", "max_inflight": 64}))
    return root


def start(repo, *extra, **kw):
    """furiosa-serve on a free loopback port, with --host left at its default (loopback)."""
    return ServeProcess([SERVE, "--model-repository", repo, "--http-port", "0", "--grpc-port", "0",
                         "--max-body-bytes", MAX_BODY, *extra], **kw)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with start(make_repo(tmp_path_factory.mktemp("repo")), "--header-timeout", "1") as s:
        yield s
        assert s.stop() == 0, s.output()


def exchange(s, raw, timeout=60):
    """Sends `raw` on a new connection, then reads until the server closes it or a whole response
    with a Content-Length has arrived. Returns (status or None, headers text, body bytes)."""
    with socket.create_connection(("127.0.0.1", s.port), timeout=timeout) as c:
        try:
            c.sendall(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the answer may already be there: read it
        return read_response(c)


def read_response(c):
    data = b""
    while True:
        head_end = data.find(b"\r\n\r\n")
        if head_end >= 0:
            head = data[:head_end].decode("latin-1")
            m = re.search(r"(?im)^content-length:\s*(\d+)", head)
            if m and len(data) >= head_end + 4 + int(m.group(1)):
                status = int(head.split()[1])
                return status, head, data[head_end + 4:head_end + 4 + int(m.group(1))]
        try:
            chunk = c.recv(65536)
        except ConnectionResetError:
            pytest.fail(f"connection reset; received so far: {data[:200]!r}")
        if not chunk:
            if not data:
                return None, "", b""
            head = data.split(b"\r\n\r\n")[0].decode("latin-1")
            return int(head.split()[1]), head, data[len(head) + 4:]
        data += chunk


def post_infer(body, extra_headers=""):
    return (f"POST /v2/models/mnist/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra_headers}\r\n").encode() + body


def infer_json(data):
    return json.dumps({"inputs": [{"name": "Input3", "datatype": "FP32", "shape": [1, 1, 28, 28],
                                   "data": data}]}).encode()


def assert_alive(s):
    r = requests.post(s.url + "/v2/models/mnist/infer", data=infer_json([0.0] * 784), timeout=60)
    assert r.status_code == 200, r.text


def test_listens_on_loopback_by_default(server):
    assert re.search(r"(?m)^HTTP: 127\.0\.0\.1:\d+$", server.output()), server.output()


def test_nested_100k_levels_is_400_and_the_server_lives(server):
    body = b'{"inputs":[{"name":"Input3","datatype":"FP32","shape":[1,1,28,28],"data":' + \
        b"[" * 100_000 + b"1" + b"]" * 100_000 + b"}]}"
    status, _, answer = exchange(server, post_infer(body))
    assert status == 400 and "nested deeper than 64 levels" in json.loads(answer)["error"], answer
    assert_alive(server)


@pytest.mark.parametrize("raw,status,fragment", [
    (b"POST /v2/models/mnist/infer HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400, "malformed HTTP"),
    (b"POST /v2/models/mnist/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
     400, "malformed HTTP"),
    (b"POST /v2/models/mnist/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n",
     400, "malformed HTTP"),
    (b"POST /v2/models/mnist/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n"
     b"4\r\nabcd\r\n0\r\n\r\n", 400, "malformed HTTP"),
    (b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 431, "header fields larger than"),
    (b"GET /v2 HTTP/1.1\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(20_000)) + b"\r\n", 431,
     "header fields larger than"),
    (b"GARBAGE\r\n\r\n", 400, "malformed HTTP"),
    (b"POST /v2/models/mnist/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999999\r\n\r\n", 413,
     "larger than 1048576 bytes"),
], ids=["bad-content-length", "two-content-lengths", "bad-chunk-size", "te-and-cl", "huge-url", "20k-headers",
        "garbage", "content-length-over-limit"])
def test_malformed_http_gets_its_4xx(server, raw, status, fragment):
    got, _, body = exchange(server, raw)
    assert got == status, (got, body)
    assert fragment in json.loads(body)["error"], body
    assert_alive(server)


def test_chunked_body_over_the_limit_reads_413_not_a_broken_pipe(server):
    """4 MiB sent in 64 KiB chunks against a 1 MiB limit: the server answers 413 when the limit is
    passed and reads (discards) the rest, so the client can send it all and read the answer."""
    chunk = b"x" * 65536
    raw = b"POST /v2/models/mnist/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + \
        (b"10000\r\n" + chunk + b"\r\n") * 64 + b"0\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as c:
        c.sendall(raw)  # raises BrokenPipeError / ConnectionResetError if the server did not linger
        status, _, body = read_response(c)
    assert status == 413 and "larger than 1048576 bytes" in json.loads(body)["error"], body
    assert_alive(server)


def test_slow_header_is_cut_after_the_header_timeout(server):
    """Half a request line and then nothing: the connection is closed (--header-timeout 1); the
    60 s here is only a bound against hanging."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as c:
        c.sendall(b"GET /v2/hea")
        assert c.recv(1024) == b""
    assert_alive(server)


def test_timeout_us_at_int64_max_is_no_deadline(server):
    body = json.dumps({"inputs": [{"name": "Input3", "datatype": "FP32", "shape": [1, 1, 28, 28],
                                   "data": [0.0] * 784}],
                       "parameters": {"timeout_us": 2**63 - 1}}).encode()
    status, _, answer = exchange(server, post_infer(body))
    assert status == 200, answer


def gauge(s, name):
    m = re.search(r"(?m)^%s (\S+)$" % name, requests.get(s.url + "/metrics", timeout=60).text)
    return int(float(m.group(1))) if m else 0


def receiving(s):
    return gauge(s, "furiosa_serve_http_requests_receiving")


def test_bodies_held_across_connections_are_capped(tmp_path):
    """--max-buffered-bytes 1.5 MiB: while one client holds a 1 MiB body half sent (the server's
    gauge shows its bytes reserved), a second 1 MiB request is answered 503 before its body is
    read; once the first completes (200), the second is accepted."""
    with start(make_repo(tmp_path / "repo"), "--max-buffered-bytes", 3 << 19) as s:
        body = infer_json([0.0] * 784)
        body += b" " * (MAX_BODY - len(body))  # JSON allows trailing whitespace
        raw = post_infer(body)
        with socket.create_connection(("127.0.0.1", s.port), timeout=60) as a:
            a.sendall(raw[:len(raw) - len(body) // 2])
            deadline = time.monotonic() + 120  # a bound against hanging
            while gauge(s, "furiosa_serve_http_buffered_bytes") < MAX_BODY:
                assert time.monotonic() < deadline, "the first body was never counted"
                time.sleep(0.01)
            status, _, answer = exchange(s, raw)
            assert status == 503 and "--max-buffered-bytes" in json.loads(answer)["error"], answer
            a.sendall(raw[len(raw) - len(body) // 2:])
            status, _, answer = read_response(a)
            assert status == 200, answer
        assert exchange(s, raw)[0] == 200
        assert gauge(s, "furiosa_serve_http_buffered_bytes") == 0
        assert s.stop() == 0, s.output()


def test_sigterm_answers_requests_still_being_received(tmp_path):
    """16 clients have sent their headers and half their bodies when SIGTERM comes (the server's
    own gauge shows all 16 being received: no race on timing); they then send the rest. Each
    gets a whole HTTP answer -- 503 with a JSON body, as the server is draining -- and no reset;
    an idle connection is closed cleanly, a new one refused, and the server exits 0."""
    with start(make_repo(tmp_path / "repo")) as s:
        body = infer_json([0.0] * 784)
        half = len(body) // 2
        idle = socket.create_connection(("127.0.0.1", s.port), timeout=60)
        clients = []
        try:
            for _ in range(16):
                c = socket.create_connection(("127.0.0.1", s.port), timeout=60)
                clients.append(c)
                c.sendall(post_infer(body)[:-(len(body) - half)])
            deadline = time.monotonic() + 120  # a bound against hanging
            while receiving(s) < 16:
                assert time.monotonic() < deadline, f"{receiving(s)} of 16 requests seen being received"
                time.sleep(0.01)
            s.proc.send_signal(signal.SIGTERM)
            s.wait_for(r"shutting down \(SIGTERM\)", 120)
            for c in clients:
                c.sendall(body[half:])
            answers = [read_response(c) for c in clients]
            assert [a[0] for a in answers] == [503] * 16, answers
            assert all("shutting down" in json.loads(a[2])["error"] for a in answers), answers
            assert idle.recv(1024) == b""
            assert s.proc.wait(timeout=120) == 0, s.output()
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", s.port), timeout=60)
        finally:
            idle.close()
            for c in clients:
                c.close()
