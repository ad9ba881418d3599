"""deploy/: the container image recipe, the Kubernetes and KServe manifests, checked against the
real furiosa-serve (no docker or kubectl needed): every manifest parses with the expected kind and
apiVersion, every flag they pass exists in `furiosa-serve --help`, the probe and health-check paths
answer 200 on a running server, the Dockerfile's HEALTHCHECK command passes against it, and the
KServe runtime's container command, with {{.Name}} and /mnt/models filled in as KServe does,
serves the model under the InferenceService's name. Run by ctest (tests/CMakeLists.txt) with
FURIOSA_SERVE and FURIOSA_SHARED_MODELS_DIR set."""

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
import requests
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "server"))
from serve_process import ServeProcess, env_path  # noqa: E402
DEPLOY = ROOT / "deploy"
MNIST = "onnx-zoo/mnist-12-int8/mnist-12-int8.onnx"


SERVE = env_path("FURIOSA_SERVE")
SHARED = env_path("FURIOSA_SHARED_MODELS_DIR")


def load(relative):
    docs = [d for d in yaml.safe_load_all((DEPLOY / relative).read_text()) if d is not None]
    assert docs, f"{relative}: no YAML document"
    return docs


@pytest.fixture(scope="module")
def manifests():
    out = {}
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")) + sorted((DEPLOY / "kserve").glob("*.yaml")):
        for doc in load(path.relative_to(DEPLOY)):
            assert isinstance(doc, dict) and "kind" in doc and "apiVersion" in doc, f"{path}: {doc!r}"
            key = doc["kind"]
            assert key not in out, f"two {key} manifests"
            out[key] = doc
    return out


@pytest.fixture(scope="module")
def serve_flags():
    help_text = subprocess.run([str(SERVE), "--help"], capture_output=True, text=True, timeout=30).stdout
    flags = set(re.findall(r"(--[a-z][a-z0-9-]*)", help_text))
    assert "--model-repository" in flags and "--http-port" in flags, help_text
    return flags


def flags_of(args):
    return {a.split("=", 1)[0] for a in args if a.startswith("--")}


def dockerfile():
    text = (DEPLOY / "Dockerfile").read_text()
    # Continuation lines joined, comments dropped: one instruction per entry.
    lines, current = [], ""
    for raw in text.splitlines():
        if raw.lstrip().startswith("#") and not current:
            continue
        current += raw.rstrip("\\").rstrip() + " " if raw.endswith("\\") else raw
        if not raw.endswith("\\"):
            if current.strip():
                lines.append(current.strip())
            current = ""
    return lines


def instruction(lines, name):
    return [line[len(name):].strip() for line in lines if line.upper().startswith(name + " ")]


# --- a real server over a one-model repository --------------------------------------------------

class Server(ServeProcess):
    """`command` (furiosa-serve or a deploy/ wrapper of it) as a ServeProcess
    (tests/server/serve_process.py): its own lock directory and process group, killed when the
    test ends, pass or fail."""

    def __init__(self, command, env=None):
        super().__init__(command, env=env, start_timeout=120)


def mnist_model():
    path = SHARED / MNIST
    if not path.exists():
        pytest.fail(f"{path} is missing (../shared/models, see its MANIFEST.md)")
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    (repo / "mnist" / "1").mkdir(parents=True)
    (repo / "mnist" / "1" / "model.onnx").symlink_to(mnist_model())
    (repo / "mnist" / "config.json").write_text(json.dumps({"device": "npu0pe0"}))
    with Server([str(SERVE), "--model-repository", str(repo), "--host", "127.0.0.1", "--http-port", "0",
                 "--grpc-port", "0"]) as s:
        yield s
        assert s.stop() == 0, s.output()


# --- Dockerfile ---------------------------------------------------------------------------------

def test_dockerfile_stages_and_ports():
    lines = dockerfile()
    froms = instruction(lines, "FROM")
    assert len(froms) == 2, froms
    assert froms[0].split()[0] == "debian:bookworm-slim" and froms[0].split()[-1] == "build", froms
    assert froms[1] == "debian:bookworm-slim", froms
    copies = instruction(lines, "COPY")
    assert any(c.startswith("--from=build ") for c in copies), copies
    exposed = {int(p) for e in instruction(lines, "EXPOSE") for p in e.split()}
    assert exposed == {8000, 8001}


def runtime_packages():
    """The packages the runtime stage (after the second FROM) installs with apt-get."""
    lines = dockerfile()
    second = [i for i, l in enumerate(lines) if l.upper().startswith("FROM ")][1]
    packages = set()
    for line in lines[second:]:
        for command in line.split("&&"):
            words = command.split()
            if "apt-get" in words and "install" in words:
                packages |= {w for w in words[words.index("install") + 1:] if not w.startswith("-")}
    return packages


def test_runtime_stage_has_the_libraries_furiosa_serve_loads():
    """Every shared library ldd lists for the tested furiosa-serve belongs to a Debian package the
    runtime stage installs (libc6 and the loader come with the base image)."""
    if not shutil.which("dpkg"):
        pytest.fail("dpkg not found: this check needs the Debian 12 machine the project is built on")
    ldd = subprocess.run(["ldd", str(SERVE)], capture_output=True, text=True, timeout=30, check=True).stdout
    libs = [m.group(1) for m in re.finditer(r"=> (/\S+)", ldd)]
    assert libs, ldd
    owners = {}
    for lib in libs:
        real = os.path.realpath(lib)
        found = None
        for candidate in (lib, real, "*/" + os.path.basename(lib), "*/" + os.path.basename(real)):
            r = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
            if r.returncode == 0:
                found = r.stdout.split(":", 1)[0].split(",")[0].strip()
                break
        assert found, f"no Debian package owns {lib}"
        owners[lib] = found
    installed = runtime_packages()
    missing = {lib: pkg for lib, pkg in owners.items() if pkg not in installed and pkg != "libc6"}
    assert not missing, f"runtime stage lacks {sorted(set(missing.values()))} for {sorted(missing)}"


def test_dockerfile_entrypoint_flags_exist(serve_flags):
    lines = dockerfile()
    (entry,) = instruction(lines, "ENTRYPOINT")
    (cmd,) = instruction(lines, "CMD")
    entry, cmd = json.loads(entry), json.loads(cmd)
    assert entry[:3] == ["furiosa-serve", "--model-repository", "/models"], entry
    used = flags_of(entry + cmd)
    assert used <= serve_flags, f"flags not in furiosa-serve --help: {used - serve_flags}"
    assert cmd[cmd.index("--http-port") + 1] == "8000"
    assert cmd[cmd.index("--grpc-port") + 1] == "8001"


def test_dockerfile_healthcheck_passes_against_server(server):
    lines = dockerfile()
    (check,) = instruction(lines, "HEALTHCHECK")
    command = json.loads(check[check.index("CMD") + 3:].strip())
    assert "/v2/health/ready" in " ".join(command)
    local = [c.replace("/8000", f"/{server.port}") for c in command]
    assert subprocess.run(local, timeout=10).returncode == 0
    # And it fails when nothing listens (a check that cannot fail checks nothing).
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    dead = [c.replace("/8000", f"/{closed}") for c in command]
    assert subprocess.run(dead, timeout=10, stderr=subprocess.DEVNULL).returncode != 0


def test_dockerignore_keeps_build_trees_out():
    patterns = [l.strip() for l in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
                if l.strip() and not l.startswith("#")]
    assert "build" in patterns and ".git" in patterns, patterns
    # Nothing the image build needs is excluded.
    assert not any(p in ("deploy", "tools", "server", "runtime", "CMakeLists.txt") for p in patterns)


# --- Kubernetes ---------------------------------------------------------------------------------

def test_kubernetes_kinds(manifests):
    assert manifests["Deployment"]["apiVersion"] == "apps/v1"
    assert manifests["Service"]["apiVersion"] == "v1"
    assert manifests["PersistentVolumeClaim"]["apiVersion"] == "v1"


def test_deployment_probes_ports_and_volume(manifests, serve_flags, server):
    dep = manifests["Deployment"]
    pod = dep["spec"]["template"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    (c,) = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"http": 8000, "grpc": 8001}
    args = c["args"]
    assert flags_of(args) <= serve_flags, f"flags not in furiosa-serve --help: {flags_of(args) - serve_flags}"
    assert int(args[args.index("--http-port") + 1]) == ports["http"]
    assert int(args[args.index("--grpc-port") + 1]) == ports["grpc"]
    for probe, path in (("readinessProbe", "/v2/health/ready"), ("livenessProbe", "/v2/health/live"),
                        ("startupProbe", "/v2/health/live")):
        get = c[probe]["httpGet"]
        assert get["path"] == path and ports.get(get["port"], get["port"]) == 8000, (probe, get)
        r = requests.get(server.url + get["path"], timeout=10)
        assert r.status_code == 200, (probe, r.status_code, r.text)
    ann = pod["metadata"]["annotations"]
    assert int(ann["prometheus.io/port"]) == 8000
    assert requests.get(server.url + ann["prometheus.io/path"], timeout=10).text.count("furiosa_serve_") > 0
    # The model repository: the image's ENTRYPOINT reads /models, which a volume provides.
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert "/models" in mounts and mounts["/models"] in volumes
    claim = volumes[mounts["/models"]]["persistentVolumeClaim"]["claimName"]
    assert claim == manifests["PersistentVolumeClaim"]["metadata"]["name"]
    env = {e["name"]: e["value"] for e in c.get("env", [])}
    assert "FURIOSA_DEVICES" in env


def test_service_routes_to_deployment(manifests):
    svc, dep = manifests["Service"], manifests["Deployment"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    ports = {p["name"]: (p["port"], p["targetPort"]) for p in svc["spec"]["ports"]}
    assert ports == {"http": (8000, "http"), "grpc": (8001, "grpc")}


# --- KServe -------------------------------------------------------------------------------------

def test_kserve_kinds_and_formats(manifests):
    rt, isvc = manifests["ServingRuntime"], manifests["InferenceService"]
    assert rt["apiVersion"] == "serving.kserve.io/v1alpha1"
    assert isvc["apiVersion"] == "serving.kserve.io/v1beta1"
    formats = {f["name"] for f in rt["spec"]["supportedModelFormats"]}
    assert formats == {"onnx", "tflite"}
    assert rt["spec"]["protocolVersions"] == ["v2", "grpc-v2"]
    model = isvc["spec"]["predictor"]["model"]
    assert model["runtime"] == rt["metadata"]["name"]
    assert model["modelFormat"]["name"] in formats
    assert model["protocolVersion"] == "v2"
    assert model["storageUri"].startswith("pvc://" + manifests["PersistentVolumeClaim"]["metadata"]["name"] + "/")
    (c,) = rt["spec"]["containers"]
    assert c["name"] == "kserve-container"
    assert "--model-name={{.Name}}" in c["args"] and "--model-dir=/mnt/models" in c["args"]
    port = int(next(a for a in c["args"] if a.startswith("--http-port=")).split("=", 1)[1])
    assert [p["containerPort"] for p in c["ports"]] == [port]
    assert int(rt["spec"]["annotations"]["prometheus.kserve.io/port"]) == port


def test_kserve_container_serves_model_under_isvc_name(manifests, serve_flags, tmp_path):
    """The ServingRuntime's command and args as KServe renders them for the InferenceService
    (its name for {{.Name}}, the storage initializer's /mnt/models holding model.onnx), run here
    with /mnt/models -> a tmp folder and the port -> 0 on loopback."""
    rt, isvc = manifests["ServingRuntime"], manifests["InferenceService"]
    (c,) = rt["spec"]["containers"]
    (command,) = c["command"]
    assert command == "furiosa-serve-kserve"
    script = DEPLOY / command
    assert os.access(script, os.X_OK), f"{script} is not executable"
    mnt = tmp_path / "mnt-models"
    mnt.mkdir()
    shutil.copy(mnt_model := mnist_model(), mnt / "model.onnx")
    (mnt / "config.json").write_text(json.dumps({"device": "npu0pe1"}))
    name = isvc["metadata"]["name"]
    args = [a.replace("{{.Name}}", name).replace("/mnt/models", str(mnt)) for a in c["args"]]
    assert any(a.startswith("--grpc-port=") for a in args), args
    args = [re.sub(r"^--(http|grpc)-port=\d+$", r"--\1-port=0", a).replace("--host=0.0.0.0", "--host=127.0.0.1")
            for a in args]
    passed = {a.split("=", 1)[0] for a in args if a.startswith("--")} - {"--model-name", "--model-dir"}
    assert passed <= serve_flags, f"flags not in furiosa-serve --help: {passed - serve_flags}"
    env = dict(os.environ, FURIOSA_SERVE=str(SERVE), TMPDIR=str(tmp_path))
    s = Server([str(script)] + args, env=env)
    try:
        meta = requests.get(f"{s.url}/v2/models/{name}", timeout=10)
        assert meta.status_code == 200, meta.text
        assert meta.json()["name"] == name and meta.json()["platform"] == "onnx"
        assert requests.get(f"{s.url}/v2/models/{name}/ready", timeout=10).status_code == 200
        assert "device npu0pe1" in s.output(), "config.json beside the model was not used: " + s.output()
        assert mnt_model.exists()
    finally:
        code = s.stop()
    assert code == 0, s.output()


def test_kserve_wrapper_refuses_ambiguous_folder(tmp_path):
    mnt = tmp_path / "two"
    mnt.mkdir()
    shutil.copy(mnist_model(), mnt / "a.onnx")
    shutil.copy(mnist_model(), mnt / "b.onnx")
    r = subprocess.run([str(DEPLOY / "furiosa-serve-kserve"), "--model-name", "m", "--model-dir", str(mnt)],
                       capture_output=True, text=True, timeout=30, env=dict(os.environ, FURIOSA_SERVE=str(SERVE)))
    assert r.returncode == 1 and "holds 2 model files" in r.stderr, r.stderr


def test_kserve_wrapper_serves_a_repository_as_is(tmp_path):
    repo = tmp_path / "repo"
    (repo / "digits" / "3").mkdir(parents=True)
    (repo / "digits" / "3" / "model.onnx").symlink_to(mnist_model())
    (repo / "digits" / "config.json").write_text(json.dumps({"device": "npu0pe1"}))
    s = Server([str(DEPLOY / "furiosa-serve-kserve"), "--model-name", "ignored", "--model-dir", str(repo),
                "--host", "127.0.0.1", "--http-port", "0", "--grpc-port", "0"], env=dict(os.environ, FURIOSA_SERVE=str(SERVE)))
    try:
        assert requests.get(f"{s.url}/v2/models/digits/versions/3", timeout=10).status_code == 200
        assert requests.get(f"{s.url}/v2/models/ignored", timeout=10).status_code == 404
    finally:
        code = s.stop()
    assert code == 0, s.output()
