"""A monitor that writes garbage back to the hook.

The hook reads what its monitor writes back only for requests
(docs/protocol.md, "Requests"): on its sender thread, without waiting, at
most 64 KiB a turn, lines over 4 KiB dropped, anything not a valid request
counted and skipped. The training script's messages all arrive, it exits as
fast as with a quiet monitor, and nothing of the garbage reaches its output.
"""

import os
import subprocess
import sys
import threading
import time

from conftest import ROOT, FakeMonitor


class GarbageMonitor(FakeMonitor):
    """FakeMonitor that also floods every connection with hostile bytes."""

    def __init__(self, path):
        super().__init__(path)
        self.written = 0
        self.errors = []

    def _serve(self, conn, msgs):
        super()._serve(conn, msgs)
        threading.Thread(target=self._flood, args=(conn,), daemon=True).start()

    def _flood(self, conn):
        junk = (b"\x1b]0;pwned\x07\x1b[2J\x00\xff" * 4096) + b"\n" + b'{"v":1,"type":"stop"}\n'
        conn.settimeout(10)
        while True:
            try:
                n = conn.send(junk)
            except OSError as exc:
                self.errors.append(exc)
                return
            with self._lock:
                self.written += n


def test_garbage_from_the_monitor_changes_nothing(sock_path, tmp_path):
    monitor = GarbageMonitor(sock_path).start()
    try:
        script = tmp_path / "train.py"
        script.write_text(
            "import time, vramscope\n"
            "for i in range(200):\n"
            "    vramscope.mark('m%d' % i)\n"
            "    if i == 0:\n"
            "        time.sleep(2)  # the monitor floods us meanwhile\n"
            "with vramscope.phase('eval'):\n"
            "    pass\n"
            "print('trained', flush=True)\n")
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "pyhook"), VRAMSCOPE_SOCKET=sock_path)
        t0 = time.monotonic()
        out = subprocess.run([sys.executable, str(script)], env=env, timeout=60,
                             capture_output=True)
        took = time.monotonic() - t0
        assert out.returncode == 0, out.stderr
        assert out.stdout == b"trained\n"
        assert b"\x1b" not in out.stderr and b"Traceback" not in out.stderr, out.stderr
        assert monitor.wait_for(lambda m: m.messages() and m.messages()[-1]["type"] == "goodbye")
        # (a CPU run samples the host's RSS between reads: docs/hook.md, "Devices")
        types = [m["type"] for m in monitor.messages() if m["type"] not in ("stats", "sample")]
        assert types == ["hello"] + ["mark"] * 200 + ["phase", "phase", "goodbye"]
        assert monitor.written > 0, (monitor.errors, len(monitor.connections))
        assert took < 30
    finally:
        monitor.stop()
