"""The hook checks the socket before it connects (its owner, its mode, a
symlink) and says once when it cannot reach a monitor."""

import os
import sys
import socket
import tempfile
import shutil
import time
import warnings

import pytest

from conftest import FakeMonitor, make_config
from vramscope import _client, _sockcheck


def client_for(path, **kw):
    kw.setdefault("retry_interval", 0.05)
    kw.setdefault("stats_interval", 3600)
    return _client.Client(make_config(socket=path), **kw)


def ours(caught):
    return [str(w.message) for w in caught if "vramscope:" in str(w.message)]


def run_for(seconds, path, **kw):
    """Run a client on ``path`` for ``seconds``; return it and its warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = client_for(path, **kw)
        time.sleep(seconds)
        client.close("removed", timeout=0.5)
    return client, ours(caught)


@pytest.fixture
def fast_warning(monkeypatch):
    monkeypatch.setattr(_sockcheck, "UNREACHABLE_AFTER", 0.3)


def test_a_socket_of_another_user_is_never_connected():
    """Finding 2: another local user creates vramscope-$UID/vramscope.sock
    first, under the shared /tmp. The hook must not send it anything."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run the hostile listener as another uid (65534)")
    base = tempfile.mkdtemp(prefix="vs-")
    os.chmod(base, 0o1777)  # a shared /tmp, where anyone may create the directory
    path = os.path.join(base, "vramscope-%d" % os.getuid(), "vramscope.sock")
    ready_r, ready_w = os.pipe()
    got_r, got_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the other user
        try:
            os.close(ready_r)
            os.close(got_r)
            os.setgid(65534)
            os.setuid(65534)
            os.mkdir(os.path.dirname(path), 0o700)
            srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            srv.bind(path)
            srv.listen(4)
            os.write(ready_w, b"1")
            srv.settimeout(1.5)
            try:
                conn, _ = srv.accept()
                conn.settimeout(1)
                os.write(got_w, b"connected:" + conn.recv(200))
            except socket.timeout:
                os.write(got_w, b"nothing")
        finally:
            os._exit(0)
    try:
        os.close(ready_w)
        os.close(got_w)
        assert os.read(ready_r, 1) == b"1", "the hostile listener did not start"
        assert os.stat(path).st_uid == 65534
        client, warned = run_for(0.5, path)
        got = os.read(got_r, 300)
        os.waitpid(pid, 0)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert got == b"nothing", "the hook connected to another user's socket: %r" % got
    assert client.connects == 0
    assert len(warned) == 1, warned
    assert "not connecting to %s" % path in warned[0]
    assert "belongs to uid 65534, not to you (uid 0)" in warned[0]


def test_a_listener_of_another_user_gets_nothing_even_behind_our_files():
    """The files look like ours (owner and 0700 directory), but the process
    listening runs as another uid: SO_PEERCRED tells, before any byte."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run the listener as another uid (65534)")
    base = tempfile.mkdtemp(prefix="vs-")
    os.chmod(base, 0o755)
    d = os.path.join(base, "d")
    os.mkdir(d, 0o700)
    os.chown(d, 65534, 65534)
    path = os.path.join(d, "vramscope.sock")
    ready_r, ready_w = os.pipe()
    got_r, got_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(ready_r)
            os.close(got_r)
            os.setgid(65534)
            os.setuid(65534)
            srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            srv.bind(path)
            srv.listen(4)
            os.write(ready_w, b"1")
            srv.settimeout(1.5)
            data = b""
            try:
                while True:
                    conn, _ = srv.accept()
                    conn.settimeout(0.5)
                    try:
                        data += conn.recv(200)
                    except socket.timeout:
                        pass
            except socket.timeout:
                pass
            os.write(got_w, b"got:" + data)
        finally:
            os._exit(0)
    try:
        os.close(ready_w)
        os.close(got_w)
        assert os.read(ready_r, 1) == b"1"
        os.chown(d, 0, 0)  # now both look like ours
        os.chown(path, 0, 0)
        assert _sockcheck.unsafe(path) is None
        client, warned = run_for(0.5, path)
        got = os.read(got_r, 300)
        os.waitpid(pid, 0)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert got == b"got:", "the hook sent bytes to another user's listener: %r" % got
    assert client.connects == 0
    assert len(warned) == 1 and "runs as uid 65534, not as you (uid 0)" in warned[0], warned


def test_an_open_directory_is_refused_with_its_real_mode(sock_path):
    """Finding 13: a 1777 directory was reported as "mode 0777"."""
    d = os.path.dirname(sock_path)
    mon = FakeMonitor(sock_path).start()
    try:
        os.chmod(d, 0o1777)
        client, warned = run_for(0.3, sock_path)
    finally:
        mon.stop()
    assert client.connects == 0 and mon.connections == []
    assert len(warned) == 1 and "has mode 1777" in warned[0], warned
    # Never advise a chmod of the directory (it may be /tmp).
    assert "chmod" not in warned[0], warned
    private = os.path.join(d, "vramscope-%d" % os.geteuid())
    assert "mkdir -m 700 %s" % private in warned[0], warned
    assert "VRAMSCOPE_SOCKET=%s" % os.path.join(private, os.path.basename(sock_path)) in warned[0]


def test_a_socket_file_of_another_owner_is_refused(sock_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to give the socket file to another uid")
    mon = FakeMonitor(sock_path).start()
    try:
        os.chown(sock_path, 65534, 65534)
        client, warned = run_for(0.3, sock_path)
    finally:
        mon.stop()
    assert client.connects == 0 and mon.connections == []
    assert len(warned) == 1 and "the socket %s belongs to uid 65534" % sock_path in warned[0]


def test_the_monitors_own_layout_is_accepted(monitor):
    client, warned = run_for(0.2, monitor.path)
    assert client.connects == 1 and warned == []
    assert monitor.messages()[0]["type"] == "hello"


@pytest.mark.parametrize("case", ["too long", "regular file", "nothing there", "stale socket"])
def test_an_unreachable_monitor_is_said_once(case, sock_path, fast_warning, monkeypatch):
    """Finding 12: the hook never said it could not reach a monitor."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/4242")
    path = sock_path
    want = ""
    if case == "too long":
        path = os.path.join(os.path.dirname(sock_path), "d" * 120 + ".sock")
        want = "longer than the 107 a Unix socket allows"
    elif case == "regular file":
        with open(path, "w") as f:
            f.write("not a socket")
        want = "is not a socket"
    elif case == "nothing there":
        want = "XDG_RUNTIME_DIR is /run/user/4242 in this shell"
    else:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        s.close()  # bound, never listened: what a crashed monitor leaves
        want = "no monitor listens on it"
    client, warned = run_for(0.8, path)
    assert client.connects == 0
    assert len(warned) == 1, warned
    w = warned[0]
    assert "no monitor reached at %s after" % path in w
    assert want in w, w
    assert "VRAMSCOPE_SOCKET" in w
    assert "\n" not in w


def test_no_warning_before_the_delay_or_after_a_monitor_was_reached(sock_path, fast_warning):
    _, warned = run_for(0.1, sock_path)
    assert warned == [], "warned before the delay"
    mon = FakeMonitor(sock_path).start()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = client_for(sock_path)
        assert mon.wait_for(lambda m: len(m.connections) == 1)
        mon.stop()  # the monitor goes away after the hook reached it
        time.sleep(0.8)
        client.close("removed", timeout=0.5)
    assert ours(caught) == [], "a hook that reached a monitor warned that it cannot"


def test_the_warning_names_the_delay():
    r = _sockcheck.Reach("/nonexistent/v.sock", after=5.0, clock=iter([0.0, 2.0, 5.0, 9.0]).__next__)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(4):
            r.failed(FileNotFoundError(2, "No such file or directory"))
    got = ours(caught)
    assert len(got) == 1 and "after 5 s" in got[0], got


def test_the_warning_prints_no_source_line(sock_path, monkeypatch):
    """The warning printed the hook's own source line after the message
    (``if not self._reach.allowed():``), which looked like a traceback. As
    Python prints it, it is the message alone when no watch() said where it
    was called; with one, the next test."""
    monkeypatch.setattr(_sockcheck, "origin", ("vramscope", 0))
    d = os.path.dirname(sock_path)
    os.chmod(d, 0o755)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = client_for(sock_path)
        time.sleep(0.3)
        client.close("removed", timeout=0.5)
    mine = [w for w in caught if "vramscope:" in str(w.message)]
    assert mine, caught
    w = mine[0]
    text = warnings.formatwarning(w.message, w.category, w.filename, w.lineno)
    assert text.count("\n") == 1 and "allowed()" not in text, text
    assert text.startswith("vramscope:0: RuntimeWarning: vramscope: "), text


def test_the_warning_points_at_the_users_watch_line(sock_path, torch_mod, monkeypatch):
    """It read "vramscope:0: RuntimeWarning: vramscope: ...". After
    watch(), the sender thread's warnings point at the line that called it,
    as any Python warning points at its caller."""
    import vramscope
    monkeypatch.setattr(_sockcheck, "origin", _sockcheck.origin)  # restored after
    d = os.path.dirname(sock_path)
    os.chmod(d, 0o755)
    model = torch_mod.nn.Linear(2, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        h = vramscope.watch(model, socket=sock_path)
        time.sleep(0.3)
        h.remove()
    mine = [w for w in caught if "not connecting" in str(w.message)]
    assert mine, [str(w.message) for w in caught]
    w = mine[0]
    assert (w.filename, w.lineno) == (__file__, line), (w.filename, w.lineno)
    text = warnings.formatwarning(w.message, w.category, w.filename, w.lineno)
    assert not text.startswith("vramscope:0:"), text
