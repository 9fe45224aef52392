"""A model of residual blocks whose saved tensors are known from its shapes
(the census's split by module: test_census.py, test_oom_census.py): an
embedding Linear(16, 64), three blocks x + fc2(gelu(fc1(x))) of width 256,
and a head Linear(64, 10) without bias. A block whose ``boom`` is set raises
the CUDA allocator's out-of-memory error after its GELU, as an allocation
failing there would."""

import torch


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.boom = torch.nn.Linear(64, 256), torch.nn.Linear(256, 64), False

    def forward(self, x):
        h = torch.nn.functional.gelu(self.fc1(x))
        if self.boom:
            raise RuntimeError("CUDA out of memory. Tried to allocate 4.00 GiB")
        return x + self.fc2(h)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Linear(16, 64)
        self.blocks = torch.nn.ModuleList([Block() for _ in range(3)])
        self.head = torch.nn.Linear(64, 10, bias=False)

    def forward(self, x):
        x = self.emb(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x)
