"""The hook's added training-thread CPU a step on a CPU run: no hook, the
hook with mem null, the hook reading the host's RSS (docs/hook.md, "Devices").
Run from the repository root: python3 bench/host_cost.py"""
import sys, time, statistics, os
sys.path.insert(0, "pyhook")
import torch
torch.set_num_threads(1)
from vramscope import _client, _config, _devices, _watch
cfg = _config.resolve()
def loop(make, blocks=15, steps=40):
    out = []
    for b in range(blocks):
        model = torch.nn.Sequential(torch.nn.Linear(256, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x, y = torch.randn(16, 256), torch.randint(0, 10, (16,))
        w = c = None
        if make:
            c = _client.Client(_config.resolve(socket="/nonexistent/s.sock", sample_hz=0, activations_every=0), cuda=make(), start=False)
            w = _watch.Watcher(torch, c, model, opt, c.config)
        for i in range(steps + 3):
            if i == 3: t = time.thread_time()
            opt.zero_grad(); torch.nn.functional.cross_entropy(model(x), y).backward(); opt.step()
        out.append((time.thread_time() - t) / steps * 1e6)
        if w: w.remove()
        if c: c._closed = True
    return statistics.median(out)
for r in range(6):
    base = loop(None); none = loop(lambda: None); host = loop(_devices.HostStats)
    print("base %.1f us/step; hook mem null +%.1f; hook host RSS +%.1f" % (base, none - base, host - base))
