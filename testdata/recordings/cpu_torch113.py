# A tiny CPU training loop (torch 1.13 CPU, Debian) watched by vramscope:
# the fixture for the TUI's compact CPU view. cpu_torch113.jsonl.gz was
# recorded with (no GPU, no NVML on the machine):
#   vramscope record -o cpu_torch113.jsonl.gz &
#   PYTHONPATH=pyhook /usr/bin/python3 cpu_torch113.py   # then Ctrl-C the recorder
import torch, vramscope
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
h = vramscope.watch(model, opt)
for step in range(40):
    x = torch.randn(64, 256); y = torch.randint(0, 10, (64,))
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
h.remove()
