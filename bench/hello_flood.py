"""Floods a monitor with short-lived hooks and prints the monitor's memory.

Each of N connections sends one hello whose host, argv and torch are SIZE
bytes long, then closes (short-lived hooks, as a probe made them), and the
script prints the monitor's VmRSS before, its VmHWM after, and its VmRSS
after WAIT seconds. Start the monitor first (the live view in a terminal):

    vramscope --socket /tmp/vs/s.sock &
    python3 bench/hello_flood.py /tmp/vs/s.sock PID [N] [SIZE] [WAIT]

The figures of docs/architecture.md's fault page come from N=20000,
SIZE=20000, WAIT=15.
"""

import json
import socket
import sys
import time


def status(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) // 1024
    return -1


def main():
    sock, pid = sys.argv[1], int(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    size = int(sys.argv[4]) if len(sys.argv) > 4 else 20000
    wait = float(sys.argv[5]) if len(sys.argv) > 5 else 15
    big = "a" * size
    before = status(pid, "VmRSS")
    start = time.monotonic()
    for i in range(n):
        hello = {"v": 1, "type": "hello", "seq": 0, "t": 1.0, "session": "%016x" % i,
                 "pid": 100000 + i, "nspid": [100000 + i], "host": big, "argv": [big],
                 "torch": big, "clock": {"mono": 1.0, "wall": time.time()}}
        c = socket.socket(socket.AF_UNIX)
        c.connect(sock)
        c.sendall((json.dumps(hello) + "\n").encode())
        c.close()
    took = time.monotonic() - start
    time.sleep(wait)
    print("%d hellos of %d KB in %.1f s: VmRSS %d MB before, VmHWM %d MB, VmRSS %d MB %g s after"
          % (n, 3 * size // 1000, took, before, status(pid, "VmHWM"), status(pid, "VmRSS"), wait))


if __name__ == "__main__":
    main()
