"""Shared fixtures: torch detection, a fake monitor and a fake CUDA seam."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "pyhook"))

import vramscope  # noqa: E402
from vramscope import _api, _backward, _client, _config, _cuda, _jit, _messages, _safe, _sender  # noqa: E402

try:
    import torch
except ImportError:  # reported loudly below
    torch = None

REQUIRE_TORCH = os.environ.get("VRAMSCOPE_REQUIRE_TORCH") == "1"
BANNER = ("!" * 72 + "\n!! torch is not importable: every torch test is SKIPPED.\n"
          "!! Install python3-torch (or set VRAMSCOPE_REQUIRE_TORCH=1 to fail).\n" + "!" * 72)


def pytest_report_header(config):
    if torch is None:
        return BANNER
    return "vramscope hook tests: torch %s" % torch.__version__


def pytest_terminal_summary(terminalreporter):
    if torch is None:
        terminalreporter.write_line(BANNER, red=True, bold=True)


def pytest_collection_modifyitems(config, items):
    if torch is not None or REQUIRE_TORCH:
        return  # with REQUIRE_TORCH the torch_mod fixture fails each test instead
    for item in items:
        if "torch_mod" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.skip(reason="torch is not importable"))


@pytest.fixture
def torch_mod():
    """The torch module; a failure when missing and VRAMSCOPE_REQUIRE_TORCH=1."""
    if torch is None:
        pytest.fail("torch is not importable and VRAMSCOPE_REQUIRE_TORCH=1")
    torch.manual_seed(0)
    return torch


@pytest.fixture(autouse=True)
def _isolated(monkeypatch):
    """Each test starts without a client, with a clean environment and error count."""
    for name in list(os.environ):
        if name.startswith("VRAMSCOPE_"):
            monkeypatch.delenv(name)
    _safe._reset_for_tests()
    yield
    client = _api._current
    if client is not None:
        client.close("removed", timeout=0.2)
    for h in _api._live_handles():
        h.remove()
    _api._current = None
    _api._refs = 0
    _api._told.clear()
    _backward._reset_for_tests()
    _jit._reset_for_tests()


def load_fixture_stats(name="memory_stats_torch23_a100.json"):
    with open(os.path.join(ROOT, "testdata", "torch", name)) as f:
        return json.load(f)


def nested_of(flat):
    """Rebuild memory_stats_as_nested_dict() from memory_stats(), its flattened copy."""
    nested = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = nested
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return nested


class FakeCuda:
    """FakeCuda stands in for _cuda.CudaStats with a realistic memory_stats() dict."""

    def __init__(self, stats=None, fail=False):
        self.stats = dict(stats or load_fixture_stats())
        self.reads = 0
        self.resets = 0
        self.fail = fail

    def read(self):
        self.reads += 1
        if self.fail:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return _cuda.mem_from_stats(self.stats)

    def reset_peaks(self):
        self.resets += 1

    def device_info(self):
        return {"index": 0, "uuid": "GPU-5e7f3a1c-0b2d-4c8e-9f10-2a3b4c5d6e7f",
                "name": "NVIDIA A100-SXM4-80GB", "total": 85899345920}


@pytest.fixture
def fake_cuda():
    return FakeCuda()


class FakeMonitor:
    """FakeMonitor is a Unix-socket server collecting decoded lines, per connection."""

    def __init__(self, path):
        self.path = path
        self.connections = []  # list of lists of decoded messages
        self.raw = []
        self._lock = threading.Lock()
        self._srv = None
        self._conns = []

    def start(self):
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(self.path):
            os.unlink(self.path)
        srv.bind(self.path)
        srv.listen(8)
        self._srv = srv
        threading.Thread(target=self._accept, args=(srv,), daemon=True).start()
        return self

    def _accept(self, srv):
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            msgs = []
            with self._lock:
                self.connections.append(msgs)
                self._conns.append(conn)
            self._serve(conn, msgs)

    def _serve(self, conn, msgs):
        """Start what runs on one accepted connection: its reader."""
        threading.Thread(target=self._read, args=(conn, msgs), daemon=True).start()

    def _read(self, conn, msgs):
        buf = b""
        while True:
            try:
                data = conn.recv(1 << 16)
            except OSError:
                return
            if not data:
                return
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                with self._lock:
                    self.raw.append(line)
                    msgs.append(json.loads(line, parse_constant=_no_constants))

    def stop(self):
        """Kill the monitor: close the listener and every connection."""
        with self._lock:
            conns, self._conns = self._conns, []
        if self._srv is not None:
            self._srv.close()
            self._srv = None
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        if os.path.exists(self.path):
            os.unlink(self.path)

    def messages(self):
        with self._lock:
            return [m for conn in self.connections for m in conn]

    def wait_for(self, pred, timeout=5.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred(self):
                return True
            time.sleep(0.01)
        return pred(self)


def _no_constants(name):
    raise ValueError("non-finite number %s in a hook message" % name)


@pytest.fixture
def sock_path():
    d = tempfile.mkdtemp(prefix="vs-")  # short: AF_UNIX paths are limited to 108 bytes
    yield os.path.join(d, "m.sock")
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def monitor(sock_path):
    m = FakeMonitor(sock_path).start()
    yield m
    m.stop()


def make_config(socket="/nonexistent/vramscope.sock", **kw):
    return _config.resolve(socket=socket, environ={}, **kw)


def queued(client):
    """Messages a client created but never sent (a client built with start=False),
    numbered as its sender would number them (Client._number), queue untouched."""
    seq, out = client._next_seq, []
    for item in list(client._queue):
        if type(item) is tuple:  # one or two edges, as the training thread queues them
            edges = _messages.edges_of(item)
            for edge in edges[:-1]:
                out.append(_messages.phase_message((seq, edge)))
                seq += 1
            out.append(_messages.phase_message((seq, edges[-1])))
        else:
            m = dict(item)
            seq += m.pop(_sender.GAP, 0)
            m["seq"] = seq
            out.append(m)
        seq += 1
    return out


def checkpoint(torch, fn, *args):
    """torch.utils.checkpoint.checkpoint, reentrant as on torch 1.13; torch 2.x
    wants ``use_reentrant`` passed explicitly (detected, not versioned)."""
    import inspect
    import torch.utils.checkpoint as cp
    if "use_reentrant" in inspect.signature(cp.checkpoint).parameters:
        return cp.checkpoint(fn, *args, use_reentrant=True)
    return cp.checkpoint(fn, *args)


# The real monitor, for the end-to-end tests: its binary, a private
# directory for its socket and recordings, and its recorders.

@pytest.fixture(scope="module")
def vs_bin():
    path = os.environ.get("VRAMSCOPE_BIN")
    if path:
        assert os.access(path, os.X_OK), "VRAMSCOPE_BIN=%s is not executable" % path
        yield path
        return
    out = tempfile.mkdtemp(prefix="vs-bin-")
    target = os.path.join(out, "vramscope")
    try:
        proc = subprocess.run(["go", "build", "-o", target, "."], cwd=ROOT,
                              capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.fail("VRAMSCOPE_BIN is unset and go build could not run: %s" % exc)
    if proc.returncode != 0:
        pytest.fail("VRAMSCOPE_BIN is unset and go build failed:\n%s" % proc.stderr)
    yield target
    shutil.rmtree(out, ignore_errors=True)


@pytest.fixture
def workdir():
    # Short and private: sun_path is at most 107 bytes, and the monitor
    # refuses a socket directory that others can read (mkdtemp makes 0700).
    d = tempfile.mkdtemp(prefix="vs", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


class Recorder:
    """Recorder runs ``vramscope record -o FILE --socket SOCK`` as a subprocess."""

    def __init__(self, binary, out, sock):
        self.out, self.sock = out, sock
        self.stderr_path = out + ".stderr"
        self._err = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen([binary, "record", "-o", out, "--socket", sock],
                                     stdout=subprocess.DEVNULL, stderr=self._err)
        deadline = time.monotonic() + 15
        while not os.path.exists(sock):
            if self.proc.poll() is not None:
                pytest.fail("vramscope record exited %d before listening:\n%s"
                            % (self.proc.returncode, self.stderr()))
            if time.monotonic() > deadline:
                self.proc.kill()
                pytest.fail("vramscope record did not create %s in 15 s" % sock)
            time.sleep(0.02)

    def stderr(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def messages(self):
        """Hook messages flushed to the file so far (the writer flushes every second)."""
        got = []
        try:
            with open(self.out, "rb") as f:
                lines = f.read().split(b"\n")
        except FileNotFoundError:
            return got
        for line in lines[1:]:
            try:
                ev = json.loads(line)
            except ValueError:
                continue  # empty or torn last line
            if "msg" in ev:
                got.append(ev["msg"])
        return got

    def wait_for(self, pred, what, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred(self.messages()):
                return
            time.sleep(0.05)
        pytest.fail("the recording never showed %s" % what)

    def stop(self):
        """SIGINT, as Ctrl-C; return (exit code, stderr)."""
        self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail("vramscope record did not stop on SIGINT")
        self._err.close()
        return code, self.stderr()

    def kill(self):
        self.proc.kill()
        self.proc.wait(timeout=15)
        self._err.close()

    def cleanup(self):
        if self.proc.poll() is None:
            self.kill()


@pytest.fixture
def recorders():
    made = []
    yield made
    for r in made:
        r.cleanup()
