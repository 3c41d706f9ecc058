"""Fixtures for end-to-end tests against the real `gregor` binary.

Every node gets its own temporary data directory and ephemeral ports (port 0), so tests run in
parallel (pytest-xdist) safely. Nothing sleeps to synchronise: `wait_for` polls a condition
until a deadline.
"""

import io
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT = 60.0
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def gregor_bin():
    if os.environ.get("GREGOR_BIN"):
        return Path(os.environ["GREGOR_BIN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    if not target.is_absolute():
        target = REPO / target
    return target / "debug" / "gregor"


def wait_for(what, condition, timeout=10.0, interval=0.05):
    """Polls `condition()` until it returns a truthy value (returned) or `timeout` passes."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - remembered for the failure message
            last_exc = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}" + (f" (last error: {last_exc!r})" if last_exc else ""))
        time.sleep(interval)


class Node:
    """A running `gregor node` process."""

    def __init__(self, overrides=None):
        self._tmp = tempfile.TemporaryDirectory(prefix="gregor-py-")
        self.data_dir = os.path.join(self._tmp.name, "data")
        self.log_path = os.path.join(self._tmp.name, "node.log")
        self.overrides = {
            "log.dirs": self.data_dir,
            "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
            "metrics.listener": "127.0.0.1:0",
        }
        self.overrides.update(overrides or {})
        self.proc = None
        self.bootstrap = None
        self.metrics = None
        self.start()

    def start(self):
        binary = gregor_bin()
        if not binary.exists():
            raise RuntimeError(f"{binary} is missing: run `cargo build -p gregor-node` (or set GREGOR_BIN)")
        args = [str(binary), "node"]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        env = dict(os.environ, NO_COLOR="1")
        env.pop("RUST_LOG", None)
        self._log = open(self.log_path, "ab")
        self._log_start = self._log.tell()
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log, env=env)
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            line = self._ready_line()
            if line:
                listeners = re.search(r"(?:^|\s)listeners=(\S+)", line)
                metrics = re.search(r"(?:^|\s)metrics=(\S+)", line)
                assert listeners and metrics, f"unparseable ready line: {line!r}"
                entries = dict(e.split("://", 1) for e in listeners.group(1).strip('"').split(","))
                self.bootstrap = entries["PLAINTEXT"]
                self.metrics = metrics.group(1).strip('"')
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"gregor exited with {self.proc.returncode} before it was ready:\n{self.log()}")
            if time.monotonic() > deadline:
                self.kill9()
                raise RuntimeError(f"gregor did not log `node ready` within {READY_TIMEOUT}s:\n{self.log()}")
            time.sleep(0.02)

    def _ready_line(self):
        with open(self.log_path, "rb") as f:
            f.seek(self._log_start)
            for raw in f.read().decode("utf-8", "replace").splitlines():
                line = ANSI.sub("", raw)
                if "node ready" in line:
                    return line
        return None

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")[-20000:]
        except OSError:
            return ""

    @property
    def host(self):
        return self.bootstrap.rsplit(":", 1)[0]

    @property
    def port(self):
        return int(self.bootstrap.rsplit(":", 1)[1])

    def metrics_text(self):
        with urllib.request.urlopen(f"http://{self.metrics}/metrics", timeout=10) as resp:
            return resp.read().decode()

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        if getattr(self, "_log", None):
            self._log.close()

    def restart(self):
        self.kill9()
        self.start()

    def close(self):
        self.kill9()
        # GREGOR_KEEP_NODE_LOGS=DIR keeps each node's log past the test (to read a failure).
        keep = os.environ.get("GREGOR_KEEP_NODE_LOGS")
        if keep and os.path.exists(self.log_path):
            os.makedirs(keep, exist_ok=True)
            shutil.copy(self.log_path, os.path.join(keep, os.path.basename(self._tmp.name) + ".log"))
        self._tmp.cleanup()


@pytest.fixture
def start_node():
    """Factory: `start_node({"key": "value"})` starts a node; all are killed after the test."""
    nodes = []

    def start(overrides=None):
        node = Node(overrides)
        nodes.append(node)
        return node

    yield start
    for node in nodes:
        node.close()


@pytest.fixture(scope="module")
def node():
    """One node per test module, auto-creation off so tests control what exists."""
    n = Node({"auto.create.topics.enable": "false"})
    yield n
    n.close()


# ---------------------------------------------------------------------------------------------
# Raw protocol: kafka-python's message classes on a bare socket, exact version, no ApiVersions.


def decode_strict(resp_cls, body, version):
    """Decodes a response frame body (header + message) and fails on leftover bytes."""
    hdr_data = io.BytesIO(bytes(body))
    if resp_cls.__name__.startswith("ApiVersionsResponse"):
        header = resp_cls.header_class.decode(hdr_data, flexible=False)
        pos = hdr_data.tell()
        (error_code,) = struct.unpack(">h", body[pos:pos + 2])
        if error_code != 0:
            version = 0
    else:
        header = resp_cls.parse_header(hdr_data, version=version)
        pos = hdr_data.tell()
    flexible = resp_cls.flexible_version_q(version)
    decode = resp_cls._struct.compiled_decode_from(version, compact=flexible, tagged=flexible, data_class=resp_cls[None])
    msg, end = decode(memoryview(bytes(body)), pos)
    assert end == len(body), f"{resp_cls.__name__} v{version}: {len(body) - end} trailing byte(s)"
    msg._header = header
    return msg


class RawConn:
    """One TCP connection; `send(Request[v](...))` returns the decoded response."""

    def __init__(self, bootstrap, timeout=30.0):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation_id = 100

    def close(self):
        self.sock.close()

    def send_bytes(self, data):
        self.sock.sendall(data)

    def recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return buf

    def recv_frame(self):
        (size,) = struct.unpack(">i", self.recv_exact(4))
        return self.recv_exact(size)

    def send(self, request, response_cls):
        self.correlation_id += 1
        version = request.API_VERSION
        request.with_header(correlation_id=self.correlation_id, client_id="pytest-raw")
        self.send_bytes(bytes(request.encode(header=True, framed=True)))
        resp = decode_strict(response_cls, self.recv_frame(), version)
        assert resp._header.correlation_id == self.correlation_id
        return resp


@pytest.fixture
def raw(node):
    conns = []

    def connect(target=None):
        c = RawConn((target or node).bootstrap)
        conns.append(c)
        return c

    yield connect
    for c in conns:
        c.close()
