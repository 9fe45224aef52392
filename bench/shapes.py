"""Model shapes the hook benchmarks train, beside torch's own modules.

``lm_head(torch, body)`` is ``body`` shaped as a transformers model given
labels: called with keyword inputs, ``model(input_ids=x, labels=y)``, it
computes its own cross-entropy loss and returns it with the logits in a
:class:`ModelOutput`, as ``GPT2LMHeadModel`` and its kin do.
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
