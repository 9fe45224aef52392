"""The hook in a process that treats it roughly: warnings turned into errors,
forks from a thread that is inside a hook, every descriptor closed behind
its back, exceptions whose ``str()`` raises. Training goes on each time, and
the hook never writes to a descriptor that is no longer its own."""

import os
import subprocess
import sys
import textwrap
import warnings

import pytest

from conftest import ROOT, FakeMonitor
import vramscope
from vramscope import _oom

PYHOOK = os.path.join(ROOT, "pyhook")


def run_script(body, env=None, timeout=60):
    """Run body in a fresh Python with the hook importable; return the process."""
    script = "import sys\nsys.path.insert(0, %r)\n" % PYHOOK + textwrap.dedent(body)
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-c", script], env=full_env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("name, value", [("VRAMSCOPE_DISABLE", "maybe"),
                                         ("VRAMSCOPE_SAMPLE_HZ", "fast"),
                                         ("VRAMSCOPE_ACTIVATIONS_EVERY", "often"),
                                         ("VRAMSCOPE_RESET_PEAKS", "1")])
def test_an_odd_setting_never_raises_under_warnings_as_errors(monkeypatch, name, value):
    # python -W error and pytest's filterwarnings = error turn every warning
    # into an exception: the hook's advice about a setting must not escape.
    monkeypatch.setenv(name, value)
    monkeypatch.setenv("VRAMSCOPE_SOCKET", "/nonexistent/vramscope.sock")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vramscope.mark("x")
        with vramscope.phase("eval"):
            pass


def test_watch_with_an_odd_setting_under_python_w_error(torch_mod):
    proc = run_script("""
        import torch, vramscope
        model = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        h = vramscope.watch(model, opt)
        opt.zero_grad(); model(torch.randn(3, 4)).sum().backward(); opt.step()
        h.remove()
        print("trained")
    """, env={"VRAMSCOPE_SAMPLE_HZ": "fast", "VRAMSCOPE_DISABLE": "",
              "VRAMSCOPE_SOCKET": "/nonexistent/vramscope.sock", "PYTHONWARNINGS": "error"})
    assert proc.returncode == 0 and proc.stdout == "trained\n", proc.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_child_forked_while_a_thread_is_inside_a_hook_trains(torch_mod):
    # Another thread holds the watcher's lock, as it does inside a hook body,
    # when the main thread forks: the child must not wait on a lock whose
    # holder does not exist in it. Without the hook, 0 of 40 children hung.
    proc = run_script("""
        import os, threading, time, torch, vramscope
        from vramscope import _api
        model = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        handle = vramscope.watch(model, opt)
        watcher = _api._live_handles()[0].watcher
        inside, leave = threading.Event(), threading.Event()

        def in_a_hook():
            with watcher._lock:
                inside.set()
                leave.wait()

        t = threading.Thread(target=in_a_hook)
        t.start()
        inside.wait()
        pid = os.fork()
        if pid == 0:
            opt.zero_grad(); model(torch.randn(3, 4)).sum().backward(); opt.step()
            os._exit(0)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            print("the child hung")
            status = 1
        leave.set()
        t.join()
        handle.remove()
        print("child", os.waitstatus_to_exitcode(status) if status != 1 else "hung")
    """, env={"VRAMSCOPE_SOCKET": "/nonexistent/vramscope.sock"})
    assert proc.stdout.strip().endswith("child 0"), proc.stdout + proc.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_child_forked_while_a_thread_watches_can_watch(torch_mod):
    # Another thread is inside watch() or remove(), holding the locks of the
    # process-wide wrappers (torch.autograd.backward's, TorchScript's,
    # Optimizer.__init__'s) or auto-attach's, when the main thread forks: a
    # watch() in the child must not wait on them.
    proc = run_script("""
        import os, threading, time, torch, vramscope
        from vramscope import _autoattach, _backward, _jit, _successor
        inside, leave = threading.Event(), threading.Event()

        def in_watch():
            with _backward._lock, _jit._lock, _successor._lock, _autoattach._lock:
                inside.set()
                leave.wait()

        t = threading.Thread(target=in_watch)
        t.start()
        inside.wait()
        pid = os.fork()
        if pid == 0:
            model = torch.nn.Linear(4, 2)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            handle = vramscope.watch(model, opt)
            opt.zero_grad(); model(torch.randn(3, 4)).sum().backward(); opt.step()
            handle.remove()
            os._exit(0)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            status = 1
        leave.set()
        t.join()
        print("child", os.waitstatus_to_exitcode(status) if status != 1 else "hung")
    """, env={"VRAMSCOPE_SOCKET": "/nonexistent/vramscope.sock"})
    assert proc.stdout.strip().endswith("child 0"), proc.stdout + proc.stderr


# A monitor in a process of its own (the script's closerange must not close
# it) that accepts one connection, reads nothing for 2 s, then drains it.
SLOW_MONITOR = """
import socket, sys, time
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(sys.argv[1]); srv.listen(4)
print("ready", flush=True)
c, _ = srv.accept()
time.sleep(2.0)
c.settimeout(0.5)
try:
    while c.recv(1 << 20):
        pass
except OSError:
    pass
"""


@pytest.mark.parametrize("reuse", ["closerange", "dup2"])
def test_a_send_that_waited_for_room_never_lands_in_the_process_own_socket(sock_path, reuse):
    # The hook's sender waits for room while the monitor reads nothing; the
    # process closes the hook's socket meanwhile and its own sockets take
    # numbers: lowest first after a closerange, or the very number (dup2
    # onto it). socket.sendall() polled, then sent to whatever the number
    # named then: 219,264 bytes of the hook's messages reached the process's
    # sockets after a closerange (the hook before this test), 0 now.
    mon = subprocess.Popen([sys.executable, "-c", SLOW_MONITOR, sock_path],
                           stdout=subprocess.PIPE, text=True)
    try:
        assert mon.stdout.readline().strip() == "ready"
        proc = run_script("""
            import os, socket, time
            from vramscope import _client, _config
            cfg = _config.resolve(socket=%(sock)r, environ={}, sample_hz=0)
            client = _client.Client(cfg, retry_interval=60, send_timeout=10)
            deadline = time.monotonic() + 10
            while client.connects < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            line = {"v": 1, "type": "mark", "seq": None, "t": 0.0, "name": "x" * 1000,
                    "step": 0, "mem": None}
            for _ in range(4000):  # megabytes: the socket's buffer fills up
                client.emit(dict(line, t=time.monotonic()))
            time.sleep(0.5)  # the sender waits for room
            theirs = client._sock.fileno()
            if %(reuse)r == "closerange":
                os.closerange(3, os.sysconf("SC_OPEN_MAX"))
                pairs = [socket.socketpair() for _ in range(4)]
            else:
                pairs = [socket.socketpair()]
                os.dup2(pairs[0][0].fileno(), theirs)
                pairs.append((socket.socket(fileno=theirs),))
            time.sleep(3.0)  # the monitor drains: the sender's wait ends
            got = 0
            for pair in pairs:
                for end in pair:
                    end.setblocking(False)
                    try:
                        got += len(end.recv(1 << 22))
                    except BlockingIOError:
                        pass
            print("connected", client.connects, "got", got, "send_errors", client.send_errors)
            os._exit(0)
        """ % {"sock": sock_path, "reuse": reuse})
    finally:
        mon.kill()
        mon.wait()
    assert proc.stdout.split() == ["connected", "1", "got", "0", "send_errors", "1"], \
        proc.stdout + proc.stderr


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux /proc")
def test_after_closerange_the_hook_writes_to_no_descriptor_of_the_user(torch_mod, sock_path):
    # Daemonizing code closes every descriptor it did not open; the numbers
    # come back as the user's own files and sockets. The hook's CPU reader
    # wrote "5" (for clear_refs) into the user's log, and its sender the
    # samples' JSON into the user's socket.
    mon = FakeMonitor(sock_path)
    mon.start()
    try:
        proc = run_script("""
            import os, resource, socket, sys, time, torch, vramscope
            from vramscope import _api
            model = torch.nn.Linear(4, 2)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)

            def step():
                opt.zero_grad(); model(torch.randn(3, 4)).sum().backward(); opt.step()

            h = vramscope.watch(model, opt)
            for _ in range(3):
                step()
            # Connected first: a first connect that fails (a loaded machine)
            # is retried a second later, after the numbers are reused, and
            # then there is no lost connection to count.
            client = _api._current
            deadline = time.monotonic() + 10
            while client.connects < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.3)
            connected = client.connects
            # The process's files take the lowest free numbers; the hook's
            # socket and /proc files sit at half the soft limit (4096 at most).
            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            cpu = client.cuda
            low = [fd for fd in (client._sock.fileno(), cpu._statm, cpu._status, cpu._clear)
                   if fd is None or fd < min(soft // 2, 4096)]
            # Every number up to the limit, as python-daemon does (the hook's
            # sit at 4096 where the limit is 8192 or more, out of closerange(3, 4096)'s reach)
            os.closerange(3, os.sysconf("SC_OPEN_MAX"))
            # The numbers come back lowest first: logs the job reopens to
            # append to (readable, with a line in each), then its sockets.
            logs = []
            for i in range(3):
                path = os.path.join(%(tmp)r, "log%%d" %% i)
                with open(path, "wb") as f:
                    f.write(b"run 1 resumed\\n")
                logs.append(open(path, "a+b", buffering=0))
            pairs = [socket.socketpair() for _ in range(3)]
            for _ in range(20):
                step()
                time.sleep(0.02)
            deadline = time.monotonic() + 5  # the sender's next round sees the loss
            while client.send_errors < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.3)
            wrote = [os.fstat(f.fileno()).st_size - len(b"run 1 resumed\\n") for f in logs]
            got = []
            for pair in pairs:
                for end in pair:
                    end.setblocking(False)
                    try:
                        got.append(len(end.recv(1 << 20)))
                    except BlockingIOError:
                        got.append(0)
            print("logs", sum(wrote), "sockets", sum(got), "send_errors", client.send_errors,
                  "connected", connected, "below", low)
            os._exit(0)
        """ % {"tmp": str(sock_path) + ".d"}, env={"VRAMSCOPE_SOCKET": sock_path,
                                                   "VRAMSCOPE_SAMPLE_HZ": "200"})
    finally:
        mon.stop()
    words = proc.stdout.split()
    assert words[:4] == ["logs", "0", "sockets", "0"], proc.stdout + proc.stderr
    assert words[6:8] == ["connected", "1"], "connected before the numbers were reused: " \
        + proc.stdout
    assert words[8:] == ["below", "[]"], "the hook's descriptors above the process's: " \
        + proc.stdout
    assert int(words[5]) >= 1, "the lost connection counts as a send error: " + proc.stdout


@pytest.fixture(autouse=True)
def _logs_dir(sock_path):
    os.makedirs(str(sock_path) + ".d", exist_ok=True)


class _Unprintable(RuntimeError):
    def __str__(self):
        raise ValueError("no text for you")


def test_the_oom_excepthook_passes_on_an_exception_whose_str_raises(monkeypatch):
    seen = []
    monkeypatch.setattr(_oom._excepthook, "previous", lambda *a: seen.append(a[0]), raising=False)
    _oom._excepthook(_Unprintable, _Unprintable(), None)
    assert seen == [_Unprintable], "the user's own excepthook was skipped"
