"""A reconnect sends the backlog as lines already made: the sender's work per
reconnect does not grow with it. A monitor stopped for 20 s (SIGSTOP) made
the hook reconnect every second and re-encode up to 8,192 kept messages each
time, and the training thread saw steps of up to 369 ms
(bench/reconnect_backlog.py measures it)."""

import time

from conftest import FakeMonitor, make_config
from vramscope import _client


def test_a_reconnect_encodes_nothing_it_kept(sock_path):
    client = _client.Client(make_config(socket=sock_path), retry_interval=0.05,
                            stats_interval=3600)
    encoded = []
    encode = client._encode

    def counting(msg):
        encoded.append(msg)
        return encode(msg)

    client._encode = counting
    for i in range(50):
        client.mark("before any monitor %d" % i)  # kept as messages: none may ever come
    first = FakeMonitor(sock_path).start()
    try:
        assert first.wait_for(lambda m: len(m.messages()) >= 51)
    finally:
        first.stop()
    deadline = time.monotonic() + 5
    while client._sock is not None and time.monotonic() < deadline:
        client.mark("the send that finds the monitor gone")
        time.sleep(0.05)
    for i in range(200):
        client.mark("while the monitor is gone %d" % i)
    time.sleep(0.3)  # drained and kept while no monitor listens
    encoded.clear()
    connects = client.connects
    second = FakeMonitor(sock_path).start()
    try:
        assert second.wait_for(lambda m: client.connects > connects and len(m.messages()) >= 251)
        names = [m.get("name") for m in second.messages() if m["type"] == "mark"]
        names = [n for n in names if n != "the send that finds the monitor gone"]
        assert names == ["before any monitor %d" % i for i in range(50)] + \
            ["while the monitor is gone %d" % i for i in range(200)]
        assert encoded == [], "the reconnect encoded %d kept messages again" % len(encoded)
    finally:
        client.close("exit", timeout=0.2)
        second.stop()
