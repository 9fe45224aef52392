"""What a frozen monitor costs the training thread: long steps from the
sender's work at each reconnect.

A monitor stopped with SIGSTOP still completes connections (the kernel
does) but reads nothing: each of the hook's reconnects sends its hello and
backlog until the send times out, then tries again a second later. Here a
listening socket that never accepts stands in for it, a training loop of
about 1 ms steps marks each step, and the script prints the step times
(median, 99th percentile, max), the reconnects, how many messages the
sender encoded during its reconnects and the sender's CPU time per
reconnect (thread time: a send blocked on the frozen socket costs none).

    PYTHONPATH=pyhook python3 bench/reconnect_backlog.py [SECONDS] [frozen|none]

"none" runs the same loop with no monitor at all, the baseline of the
machine at that moment.
"""

import os
import socket
import statistics
import sys
import tempfile
import time

from vramscope import _client, _config


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20
    mode = sys.argv[2] if len(sys.argv) > 2 else "frozen"
    d = tempfile.mkdtemp(prefix="vs-bench-")
    os.chmod(d, 0o700)
    path = os.path.join(d, "s.sock")
    if mode == "frozen":
        frozen = socket.socket(socket.AF_UNIX)
        frozen.bind(path)
        frozen.listen(64)  # never accepts, never reads: a stopped monitor
    cfg = _config.resolve(socket=path, sample_hz=0)
    client = _client.Client(cfg, send_timeout=2.0, retry_interval=1.0)
    encodes = {"in_connect": 0, "cpu": 0.0}
    connect, encode = client._connect, client._encode
    inside = [False]

    def counting_encode(msg):
        if inside[0]:
            encodes["in_connect"] += 1
        return encode(msg)

    def counting_connect():
        inside[0] = True
        cpu = time.thread_time()
        try:
            connect()
        finally:
            inside[0] = False
            encodes["cpu"] += time.thread_time() - cpu

    client._encode, client._connect = counting_encode, counting_connect
    steps = []
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        t0 = time.perf_counter()
        for k in range(4):
            client.mark("step %d part %d" % (i, k))
        x = 0
        for j in range(20000):  # about 1 ms of the training thread's own work
            x += j * j
        steps.append(time.perf_counter() - t0)
        i += 1
    client.close("exit", timeout=0.2)
    steps.sort()
    ms = [s * 1e3 for s in steps]
    n = max(1, client.connects)
    print("%s: %d steps in %g s: median %.2f ms, p99 %.2f ms, max %.1f ms; %d connects, "
          "%d messages encoded during them, %.1f ms of sender CPU per connect"
          % (mode, len(ms), seconds, statistics.median(ms), ms[int(len(ms) * 0.99)], ms[-1],
             client.connects, encodes["in_connect"], encodes["cpu"] * 1e3 / n))


if __name__ == "__main__":
    main()
