"""furiosa-serve's security options (docs/serving.md "Security"): TLS for HTTP and gRPC
(--tls-cert/--tls-key, a self-signed certificate made at test time by openssl in a temporary
folder removed pass or fail), mutual TLS (--tls-client-ca: a test CA, a client certificate it
signed and one of another CA, made the same way), the bearer token (--auth-token-file; health
probes stay open), and their start-up refusals, each one line naming the flag or file. Run by
ctest (server_test_serve_security) like test_serve.py."""

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile

import grpc
import numpy as np
import pytest
import requests

import test_serve as ts
from test_serve import MNIST, make_repo
from test_serve_grpc import infer_request, output_array, pb  # noqa: F401 (fixture)

TOKEN = "t0ken-Of-the-test"


@pytest.fixture(scope="module")
def secrets():
    """{"cert", "key", "token", "dir"}: a self-signed certificate for localhost and 127.0.0.1
    with its key, and a token file (with a trailing newline, which is stripped)."""
    folder = tempfile.mkdtemp(prefix="furiosa-serve-tls-")
    try:
        cert, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
                        "-days", "1", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                        "-keyout", key, "-out", cert], check=True, capture_output=True, timeout=120)
        token = os.path.join(folder, "token")
        with open(token, "w") as f:
            f.write(TOKEN + "\n")
        yield {"cert": cert, "key": key, "token": token, "dir": folder}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=120)


def _make_ca(folder, name):
    """A CA certificate and key (EC P-256) named `name` in `folder`: (cert, key) paths."""
    cert, key = os.path.join(folder, f"{name}.pem"), os.path.join(folder, f"{name}.key")
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-subj", f"/CN={name}", "-days", "1", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-keyout", key, "-out", cert)
    return cert, key


def _make_client(folder, name, ca):
    """A client certificate (extendedKeyUsage clientAuth) signed by `ca` (cert, key): (cert, key)."""
    cert, key, csr = (os.path.join(folder, f"{name}.{ext}") for ext in ("pem", "key", "csr"))
    ext = os.path.join(folder, f"{name}.ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-subj", f"/CN={name}", "-keyout", key, "-out", csr)
    _openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial", "-days", "1",
             "-extfile", ext, "-out", cert)
    return cert, key


@pytest.fixture(scope="module")
def client_certs():
    """{"ca": the client CA's certificate, "client": (cert, key) it signed, "rogue": (cert, key)
    signed by another CA}, in a temporary folder removed pass or fail."""
    folder = tempfile.mkdtemp(prefix="furiosa-serve-mtls-")
    try:
        ca = _make_ca(folder, "client-ca")
        other = _make_ca(folder, "other-ca")
        yield {"ca": ca[0], "client": _make_client(folder, "client", ca),
               "rogue": _make_client(folder, "rogue", other)}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def mnist_reference(tmp_path_factory):
    """(input, output) of furiosa-run for mnist-12-int8's test_data_set_0."""
    data = ts.SHARED / MNIST / "test_data_set_0"
    out_dir = tmp_path_factory.mktemp("ref")
    subprocess.run([str(ts.RUN), str(ts.model_file(MNIST)), "--input", f"Input3={data / 'input_0.pb'}",
                    "--output-dir", str(out_dir)], check=True, capture_output=True)
    (out,) = [np.load(p) for p in out_dir.glob("*.npy")]
    return ts.read_pb(data / "input_0.pb"), out


class SecureServer(ts.ServeProcess):
    """furiosa-serve over TLS with a bearer token, HTTP and gRPC on free loopback ports."""

    def __init__(self, repo, secrets):
        super().__init__([ts.SERVE, "--model-repository", repo, "--host", "127.0.0.1", "--http-port", "0",
                          "--grpc-port", "0", "--tls-cert", secrets["cert"], "--tls-key", secrets["key"],
                          "--auth-token-file", secrets["token"]])
        try:
            self.grpc_port = int(self.wait_for(r"gRPC: 127\.0\.0\.1:(\d+) \(TLS\)", 60).group(1))
        except BaseException:
            self.kill()
            raise
        self.url = f"https://localhost:{self.port}"


@pytest.fixture(scope="module")
def server(secrets, tmp_path_factory):
    repo = make_repo(tmp_path_factory.mktemp("repo"), {"mnist": (MNIST, {"device": "npu0pe0"})})
    with SecureServer(repo, secrets) as s:
        yield s
        assert s.stop() == 0, s.output()


def bearer(token=TOKEN):
    return {"Authorization": f"Bearer {token}"}


def json_infer(s, secrets, x, headers):
    body = {"inputs": [{"name": "Input3", "datatype": "FP32", "shape": list(x.shape),
                        "data": x.flatten().tolist()}]}
    return requests.post(s.url + "/v2/models/mnist/infer", json=body, headers=headers, verify=secrets["cert"],
                         timeout=300)


def test_https_infer_needs_the_token(server, secrets, mnist_reference):
    """Over HTTPS (the client checks the certificate): health open, everything else 401 with a
    JSON error and WWW-Authenticate: Bearer without the token or with a wrong one, 200 with it;
    the answer equals furiosa-run's."""
    s, cert = server, secrets["cert"]
    assert "HTTP: 127.0.0.1:" in s.output() and "(TLS)" in s.output()
    for path in ("/v2/health/live", "/v2/health/ready"):
        assert requests.get(s.url + path, verify=cert).status_code == 200
    x, expected = mnist_reference
    for headers in ({}, bearer("wrong"), bearer(TOKEN + "x"), {"Authorization": TOKEN}):
        r = json_infer(s, secrets, x, headers)
        assert r.status_code == 401, (headers, r.text)
        assert r.headers["WWW-Authenticate"] == "Bearer"
        assert "bearer token" in r.json()["error"]
        assert TOKEN not in r.text
    for path in ("/v2", "/v2/models/mnist", "/v2/models/mnist/ready", "/metrics", "/v2/models/stats"):
        assert requests.get(s.url + path, verify=cert).status_code == 401, path
        assert requests.get(s.url + path, verify=cert, headers=bearer()).status_code == 200, path
    r = requests.post(s.url + "/v2/repository/index", json={}, verify=cert)
    assert r.status_code == 401
    r = json_infer(s, secrets, x, bearer())
    assert r.status_code == 200, r.text
    (o,) = r.json()["outputs"]
    assert np.array_equal(np.array(o["data"], dtype=np.float32).reshape(o["shape"]), expected)
    # The scheme is case-insensitive (RFC 7235), the token is not.
    assert json_infer(s, secrets, x, {"Authorization": f"bearer {TOKEN}"}).status_code == 200
    assert json_infer(s, secrets, x, bearer(TOKEN.upper())).status_code == 401
    metrics = requests.get(s.url + "/metrics", verify=cert, headers=bearer()).text
    assert 'furiosa_serve_http_refused_total{reason="unauthorized"}' in metrics
    assert TOKEN not in s.output()  # never logged


def test_plain_http_to_the_tls_port_fails_cleanly(server, secrets):
    """A plain HTTP request to the TLS port gets no HTTP answer (the handshake fails and the
    connection is closed, counted as tls_handshake) and the server serves HTTPS afterwards."""
    s, cert = server, secrets["cert"]
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", s.port), timeout=60) as c:
            c.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            try:
                while True:
                    chunk = c.recv(4096)
                    if not chunk:
                        break
                    got += chunk
            except ConnectionResetError:
                pass
            assert not got.startswith(b"HTTP/"), got
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.get(f"http://127.0.0.1:{s.port}/v2/health/live", timeout=60)
    assert requests.get(s.url + "/v2/health/ready", verify=cert).status_code == 200
    metrics = requests.get(s.url + "/metrics", verify=cert, headers=bearer()).text
    (line,) = [l for l in metrics.splitlines() if l.startswith('furiosa_serve_http_refused_total{reason="tls_handshake"}')]
    assert float(line.split()[-1]) >= 6, line
    assert s.proc.poll() is None


def test_grpc_over_tls_needs_the_token(server, secrets, pb, mnist_reference):  # noqa: F811
    """gRPC over TLS (grpc.ssl_channel_credentials with the test's certificate): ServerLive and
    ServerReady open, other calls UNAUTHENTICATED without the metadata "authorization: Bearer
    TOKEN" or with a wrong one, OK with it (ModelInfer equal to furiosa-run); a plaintext channel
    to the TLS port fails without an answer."""
    s = server
    msgs, Stub = pb
    with open(secrets["cert"], "rb") as f:
        creds = grpc.ssl_channel_credentials(root_certificates=f.read())
    with grpc.secure_channel(f"localhost:{s.grpc_port}", creds) as channel:
        stub = Stub(channel)
        assert stub.ServerLive(msgs.ServerLiveRequest(), timeout=60).live
        assert stub.ServerReady(msgs.ServerReadyRequest(), timeout=60).ready
        for metadata in (None, [("authorization", "Bearer wrong")], [("authorization", TOKEN)]):
            with pytest.raises(grpc.RpcError) as e:
                stub.ModelMetadata(msgs.ModelMetadataRequest(name="mnist"), metadata=metadata, timeout=60)
            assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED, metadata
            assert TOKEN not in e.value.details()
        ok = [("authorization", f"Bearer {TOKEN}")]
        assert stub.ModelMetadata(msgs.ModelMetadataRequest(name="mnist"), metadata=ok, timeout=60).name == "mnist"
        assert stub.ModelReady(msgs.ModelReadyRequest(name="mnist"), metadata=ok, timeout=60).ready
        x, expected = mnist_reference
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelInfer(infer_request(pb, "mnist", "Input3", x), timeout=300)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        resp = stub.ModelInfer(infer_request(pb, "mnist", "Input3", x), metadata=ok, timeout=300)
        assert np.array_equal(output_array(resp), expected)
        with pytest.raises(grpc.RpcError) as e:
            stub.RepositoryModelUnload(msgs.RepositoryModelUnloadRequest(model_name="mnist"), timeout=60)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}") as plain:
        with pytest.raises(grpc.RpcError) as e:
            Stub(plain).ServerLive(msgs.ServerLiveRequest(), timeout=10)
        assert e.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    assert requests.get(s.url + "/v2/health/live", verify=secrets["cert"]).status_code == 200


def test_security_flags_refused_at_start(secrets, tmp_path):
    """Half a TLS pair, a certificate or key file that cannot be read or is not PEM, a key that
    is not the certificate's, an empty or missing token file: one line naming the flag or the
    file, before any model is loaded."""
    repo = make_repo(tmp_path / "repo", {"mnist": (MNIST, {"device": "npu0pe0"})})
    locks = tmp_path / "locks"
    locks.mkdir(mode=0o700)
    env = dict(os.environ, FURIOSA_SIM_LOCK_DIR=str(locks))
    junk = tmp_path / "junk.pem"
    junk.write_text("not PEM\n")
    empty = tmp_path / "empty-token"
    empty.write_text("\n")
    other_key = tmp_path / "other-key.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
                    "-out", str(other_key)], check=True, capture_output=True, timeout=120)
    cert, key = secrets["cert"], secrets["key"]
    base = [str(ts.SERVE), "--model-repository", str(repo), "--http-port", "0", "--grpc-port", "0"]
    for extra, words in (
        (["--tls-cert", cert], ["--tls-cert needs --tls-key"]),
        (["--tls-key", key], ["--tls-key needs --tls-cert"]),
        (["--tls-cert", str(junk), "--tls-key", key], ["--tls-cert", str(junk)]),
        (["--tls-cert", cert, "--tls-key", str(junk)], ["--tls-key", str(junk)]),
        (["--tls-cert", str(tmp_path / "none.pem"), "--tls-key", key], ["--tls-cert", "none.pem"]),
        (["--tls-cert", cert, "--tls-key", str(other_key)], ["--tls-key", str(other_key), "not the private key"]),
        (["--auth-token-file", str(empty)], ["--auth-token-file", str(empty), "no token"]),
        (["--auth-token-file", str(tmp_path / "none")], ["--auth-token-file", "none"]),
    ):
        p = subprocess.run(base + extra, capture_output=True, text=True, timeout=120, env=env)
        assert p.returncode != 0 and "HTTP:" not in p.stdout, (extra, p.stdout, p.stderr)
        assert "model mnist" not in p.stdout, (extra, p.stdout)  # refused before loading
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and all(w in lines[0] for w in words), (extra, p.stderr)


def test_mutual_tls_requires_a_client_certificate(secrets, client_certs, pb, mnist_reference, tmp_path):  # noqa: F811
    """--tls-client-ca: HTTPS and gRPC with a client certificate the CA signed are served (200,
    inference equal to furiosa-run); without one, or with one of another CA, the handshake
    fails for every path, health probes included (no HTTP answer, gRPC UNAVAILABLE), counted as
    tls_handshake, and the server goes on serving."""
    repo = make_repo(tmp_path / "repo", {"mnist": (MNIST, {"device": "npu0pe0"})})
    msgs, Stub = pb
    server_cert = secrets["cert"]
    client, rogue = client_certs["client"], client_certs["rogue"]
    with ts.ServeProcess([ts.SERVE, "--model-repository", repo, "--host", "127.0.0.1", "--http-port", "0",
                          "--grpc-port", "0", "--tls-cert", server_cert, "--tls-key", secrets["key"],
                          "--tls-client-ca", client_certs["ca"]]) as s:
        grpc_port = int(s.wait_for(r"gRPC: 127\.0\.0\.1:(\d+) \(mutual TLS\)", 60).group(1))
        assert f"HTTP: 127.0.0.1:{s.port} (mutual TLS)" in s.output()
        url = f"https://localhost:{s.port}"
        x, expected = mnist_reference
        for path in ("/v2/health/live", "/v2/health/ready", "/v2/models/mnist"):
            assert requests.get(url + path, verify=server_cert, cert=client, timeout=60).status_code == 200, path
            for cert in (None, rogue):
                with pytest.raises(requests.exceptions.ConnectionError):
                    requests.get(url + path, verify=server_cert, cert=cert, timeout=60)
        body = {"inputs": [{"name": "Input3", "datatype": "FP32", "shape": list(x.shape),
                            "data": x.flatten().tolist()}]}
        r = requests.post(url + "/v2/models/mnist/infer", json=body, verify=server_cert, cert=client, timeout=300)
        assert r.status_code == 200, r.text
        (o,) = r.json()["outputs"]
        assert np.array_equal(np.array(o["data"], dtype=np.float32).reshape(o["shape"]), expected)
        metrics = requests.get(url + "/metrics", verify=server_cert, cert=client, timeout=60).text
        (line,) = [l for l in metrics.splitlines()
                   if l.startswith('furiosa_serve_http_refused_total{reason="tls_handshake"}')]
        assert float(line.split()[-1]) == 6, line

        with open(server_cert, "rb") as f:
            root = f.read()

        def credentials(pair):
            if pair is None:
                return grpc.ssl_channel_credentials(root_certificates=root)
            with open(pair[0], "rb") as c, open(pair[1], "rb") as k:
                return grpc.ssl_channel_credentials(root_certificates=root, certificate_chain=c.read(),
                                                    private_key=k.read())

        with grpc.secure_channel(f"localhost:{grpc_port}", credentials(client)) as channel:
            stub = Stub(channel)
            assert stub.ServerLive(msgs.ServerLiveRequest(), timeout=60).live
            resp = stub.ModelInfer(infer_request(pb, "mnist", "Input3", x), timeout=300)
            assert np.array_equal(output_array(resp), expected)
        for pair in (None, rogue):
            with grpc.secure_channel(f"localhost:{grpc_port}", credentials(pair)) as channel:
                with pytest.raises(grpc.RpcError) as e:
                    Stub(channel).ServerLive(msgs.ServerLiveRequest(), timeout=30)
                assert e.value.code() == grpc.StatusCode.UNAVAILABLE, (pair, e.value)
        assert requests.get(url + "/v2/health/ready", verify=server_cert, cert=client, timeout=60).status_code == 200
        assert s.stop() == 0, s.output()


def test_client_ca_refused_at_start(secrets, client_certs, tmp_path):
    """--tls-client-ca without --tls-cert/--tls-key, naming a missing file, a file that is not
    PEM or a PEM file holding only a key: one line naming the flag and the file, before any
    model is loaded."""
    repo = make_repo(tmp_path / "repo", {"mnist": (MNIST, {"device": "npu0pe0"})})
    locks = tmp_path / "locks"
    locks.mkdir(mode=0o700)
    env = dict(os.environ, FURIOSA_SIM_LOCK_DIR=str(locks))
    junk = tmp_path / "junk-ca.pem"
    junk.write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    tls = ["--tls-cert", secrets["cert"], "--tls-key", secrets["key"]]
    base = [str(ts.SERVE), "--model-repository", str(repo), "--http-port", "0", "--grpc-port", "0"]
    for extra, words in (
        (["--tls-client-ca", client_certs["ca"]], ["--tls-client-ca needs --tls-cert and --tls-key"]),
        (tls + ["--tls-client-ca", str(tmp_path / "none.pem")], ["--tls-client-ca", "none.pem", "cannot read"]),
        (tls + ["--tls-client-ca", str(junk)], ["--tls-client-ca", str(junk), "no valid PEM certificate"]),
        (tls + ["--tls-client-ca", secrets["key"]], ["--tls-client-ca", secrets["key"], "no valid PEM certificate"]),
    ):
        p = subprocess.run(base + extra, capture_output=True, text=True, timeout=120, env=env)
        assert p.returncode != 0 and "HTTP:" not in p.stdout, (extra, p.stdout, p.stderr)
        assert "model mnist" not in p.stdout, (extra, p.stdout)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and all(w in lines[0] for w in words), (extra, p.stderr)


def _tls_client(port, cert):
    """A TLS connection to the server that reports a TCP close without close_notify as an error
    (suppress_ragged_eofs=False: SSLEOFError "EOF occurred in violation of protocol")."""
    ctx = ssl.create_default_context(cafile=cert)
    # Python 3.10+ sets this by default, which reads an EOF without close_notify as a clean one.
    ctx.options &= ~ssl.OP_IGNORE_UNEXPECTED_EOF
    raw = socket.create_connection(("127.0.0.1", port), timeout=60)
    return ctx.wrap_socket(raw, server_hostname="localhost", suppress_ragged_eofs=False)


def _read_to_close_notify(c):
    """Everything the server sends until its close_notify (recv gives b""); a close without
    one raises ssl.SSLEOFError."""
    got = b""
    while True:
        chunk = c.recv(65536)
        if not chunk:
            return got
        got += chunk


def _read_response(c):
    """One keep-alive response (headers and a Content-Length body)."""
    got = b""
    while b"\r\n\r\n" not in got:
        got += c.recv(65536)
    head, _, body = got.partition(b"\r\n\r\n")
    length = int(next(l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")))
    while len(body) < length:
        body += c.recv(65536)
    return head


def test_tls_close_notify_on_every_close(secrets, tmp_path):
    """The HTTPS server ends each connection with a TLS shutdown (close_notify) before closing
    the socket: after "Connection: close", after an error answer (400, lingering close), on the
    idle timeout and at shutdown (SIGTERM) with a keep-alive connection idle; each time the client
    reads to a clean close_notify (no SSLEOFError) and its own unwrap() completes. After a 413
    the client's upload still completes (a one-way TLS shutdown, then the lingering close). A
    client that never answers the close_notify has the socket closed anyway (kTlsCloseTimeout)."""
    repo = make_repo(tmp_path / "repo", {"mnist": (MNIST, {"device": "npu0pe0"})})
    cert = secrets["cert"]
    live = b"GET /v2/health/live HTTP/1.1\r\nHost: localhost\r\n"

    def serve(*extra):
        return ts.ServeProcess([ts.SERVE, "--model-repository", repo, "--host", "127.0.0.1", "--http-port", "0",
                                "--grpc-port", "0", "--tls-cert", cert, "--tls-key", secrets["key"], *extra])

    with serve("--idle-timeout", "1") as s:
        # The idle timeout (1 s) after a keep-alive request.
        with _tls_client(s.port, cert) as c:
            c.sendall(live + b"\r\n")
            assert _read_response(c).startswith(b"HTTP/1.1 200")
            assert _read_to_close_notify(c) == b""
            c.unwrap()
        assert s.stop() == 0, s.output()

    with serve("--max-body-bytes", "1048576") as s:  # idle timeout 60 s: each close is the server's own
        # 413 while the client still uploads 4 MiB: the server answers as soon as it has read the
        # headers, and the upload still completes (the server reads and discards it below TLS
        # after its close_notify); then the client reads the 413 and a clean close. One thread
        # does both, in that order: OpenSSL's SSL objects must not be read and written from two
        # threads at once (a second thread reading while this one wrote failed now and then with
        # SSLEOFError, or crashed the interpreter).
        with _tls_client(s.port, cert) as c:
            body = b"x" * (4 << 20)
            c.sendall(b"POST /v2/models/mnist/infer HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n"
                      % len(body))
            for i in range(0, len(body), 65536):
                c.sendall(body[i:i + 65536])
            assert _read_to_close_notify(c).startswith(b"HTTP/1.1 413")
        # Connection: close, then a malformed request (400 and the lingering close).
        for request, status in ((live + b"Connection: close\r\n\r\n", b"HTTP/1.1 200"),
                                (b"NOT HTTP AT ALL\r\n\r\n", b"HTTP/1.1 400")):
            with _tls_client(s.port, cert) as c:
                c.sendall(request)
                assert _read_to_close_notify(c).startswith(status)
                c.unwrap()
        # A client that never sends its close_notify: the server closes the socket anyway.
        with _tls_client(s.port, cert) as c:
            c.sendall(live + b"Connection: close\r\n\r\n")
            assert _read_to_close_notify(c).startswith(b"HTTP/1.1 200")
            with socket.socket(fileno=os.dup(c.fileno())) as tcp:
                tcp.settimeout(60)  # a bound against hanging; the server's is 5 s
                assert tcp.recv(1) == b""  # its FIN, nothing else
        # Shutdown with a keep-alive connection idle: closed with close_notify, then exit 0.
        with _tls_client(s.port, cert) as c:
            c.sendall(live + b"\r\n")
            assert _read_response(c).startswith(b"HTTP/1.1 200")
            s.proc.send_signal(signal.SIGTERM)
            assert _read_to_close_notify(c) == b""
            c.unwrap()
        assert s.stop() == 0, s.output()
