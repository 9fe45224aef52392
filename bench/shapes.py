"""Model shapes the hook benchmarks train, beside torch's own modules.

``lm_head(torch, body)`` is ``body`` shaped as a transformers model given
labels: called with keyword inputs, ``model(input_ids=x, labels=y)``, it
computes its own cross-entropy loss and returns it with the logits in a
:class:`ModelOutput`, as ``GPT2LMHeadModel`` and its kin do.

``lightning_module(L, torch)`` is a LightningModule laid out as
Lightning's README lays it out: ``training_step`` calls the submodules
(``self.decoder(self.encoder(x))``), never ``self(x)``, and computes the
loss itself.
"""

import collections


class ModelOutput(collections.OrderedDict):
    """What a transformers model returns: an OrderedDict whose keys are
    also attributes (``transformers.modeling_outputs.ModelOutput``)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def mlp(torch):
    """The tiny MLP the benchmarks train: 256-64-10 with a ReLU."""
    return torch.nn.Sequential(torch.nn.Linear(256, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


def lm_head(torch, body):
    """``body`` (logits from ``input_ids``) as a transformers model."""

    class LMHead(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = body

        def forward(self, input_ids=None, labels=None):
            logits = self.body(input_ids)
            loss = torch.nn.functional.cross_entropy(logits, labels)
            return ModelOutput(loss=loss, logits=logits)

    return LMHead()


def lightning_module(L, torch, watch=None, mlp=None):
    """A LightningModule of the README's layout. By default the tiny MLP the
    other benchmarks train (256-64-10, SGD with momentum); ``mlp=(inp, width,
    hidden)`` makes the encoder ``inp``-``width`` and ``hidden`` more
    ``width``-``width`` layers, trained by Adam (the cost model's "h100mlp").
    ``watch``: a function ``configure_optimizers`` calls with the module and
    its optimizer (a ``vramscope.watch`` there, without the callback)."""
    inp, width, hidden = mlp or (256, 64, 0)

    class Lit(L.LightningModule):
        def __init__(self):
            super().__init__()
            layers = [torch.nn.Linear(inp, width), torch.nn.ReLU()]
            for _ in range(hidden):
                layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
            self.encoder = torch.nn.Sequential(*layers)
            self.decoder = torch.nn.Linear(width, 10)

        def training_step(self, batch, i):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.decoder(self.encoder(x)), y)

        def configure_optimizers(self):
            if mlp is not None:
                opt = torch.optim.Adam(self.parameters(), lr=1e-4)
            else:
                opt = torch.optim.SGD(self.parameters(), lr=1e-3, momentum=0.9)
            if watch is not None:
                watch(self, opt)
            return opt

    return Lit()
