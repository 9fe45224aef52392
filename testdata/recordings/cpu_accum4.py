# A CPU training loop with gradient accumulation over 4 micro-steps
# (torch 1.13 CPU, Debian) watched by vramscope: the fixture for phase
# times that are the micro-steps' own durations summed. cpu_accum4.jsonl.gz
# was recorded with (no GPU, no NVML on the machine):
#   vramscope record -o cpu_accum4.jsonl.gz &
#   PYTHONPATH=pyhook /usr/bin/python3 cpu_accum4.py   # then Ctrl-C the recorder
import torch, vramscope
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
h = vramscope.watch(model, opt)
for step in range(6):
    opt.zero_grad()
    for micro in range(4):
        x = torch.randn(256, 256); y = torch.randint(0, 10, (256,))
        loss = torch.nn.functional.cross_entropy(model(x), y) / 4
        loss.backward()
    opt.step()
h.remove()
