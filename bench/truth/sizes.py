"""Sizes of real models' training memory, from their parameter counts and
published formulas; every figure of the truth corpus comes from here.

* Parameter counts: GPT-2 small 124M, medium 355M, large 774M (Radford et
  al. 2019, table 2, as counted by Hugging Face's ``GPT2LMHeadModel``:
  124,439,808; 354,823,168; 774,030,080 with the tied embedding once);
  ViT-B/16 86M (Dosovitskiy et al. 2021, table 1).
* Weights and gradients: 4 bytes a parameter (fp32, and the fp32 master
  weights of mixed precision, Micikevicius et al. 2018).
* Adam: two fp32 states a parameter, 8 bytes (Kingma and Ba 2015; torch's
  ``exp_avg`` and ``exp_avg_sq``), made by the first ``optimizer.step()``.
  torch's foreach implementation (the CUDA default) makes temporaries the
  size of the parameters it updates: one 4-byte list at its peak.
* Muon (Jordan et al. 2024; torch's ``torch.optim.Muon``, torch/optim/_muon.py)
  updates the transformer blocks' matrices, ``12 h^2`` parameters a layer
  (attention's ``h x 3h`` and ``h x h``, the MLP's ``h x 4h`` and ``4h x
  h``), and AdamW the rest (embeddings, norms, biases). Muon's state is one
  fp32 momentum buffer a matrix (``zeros_like(grad)``), 4 bytes a
  parameter. It updates one matrix at a time: the Nesterov update
  ``grad.lerp(buf)`` (fp32, ``4 m n``) and its Newton-Schulz
  orthogonalization in bf16, whose peak holds the copy and the next
  iterate (``2 m n`` each) and two ``n x n`` Gram matrices (``2 n^2``
  each): ``8 m n + 4 n^2`` bytes for an ``m x n`` matrix, ``n`` its smaller
  side; the MLP's ``4h x h`` is the largest.
* Activations saved for backward, a transformer layer in 16-bit mixed
  precision without recomputation: ``s b h (34 + 5 a s / h)`` bytes
  (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
  Transformer Models", eq. 1); with full activation checkpointing each layer
  keeps its input only, ``2 s b h`` bytes (same paper, section 4.1).
* The attention scores of one layer, the forward's largest temporary:
  ``2 a s^2 b`` bytes (16-bit ``QK^T``, same paper's ``5 a s / h`` term).
* Logits: ``b s V`` fp32 values, 4 bytes each (the LM head's output cast
  for the loss); the cross-entropy keeps its log-softmax, the same size,
  and backward makes its gradient, the same size again.
"""

MIB = 1 << 20


class Transformer:
    """A decoder-only transformer's memory on one device."""

    def __init__(self, name, params, layers, hidden, heads, vocab):
        self.name, self.params = name, params
        self.layers, self.hidden, self.heads, self.vocab = layers, hidden, heads, vocab

    def weights(self, share=1.0):
        return int(4 * self.params * share)

    def grads(self, share=1.0):
        return int(4 * self.params * share)

    def adam(self, share=1.0):
        return int(8 * self.params * share)

    def foreach_temp(self, share=1.0):
        return int(4 * self.params * share)

    def tensors(self):
        """The parameter tensors (Hugging Face's GPT-2 layout): two layer
        norms and four linear layers a block, each a weight and a bias, and
        the token and position embeddings and the final norm's two."""
        return 12 * self.layers + 4

    def clip_temp(self):
        """``clip_grad_norm_``'s temporaries (torch/nn/utils/clip_grad.py,
        foreach): a norm per gradient tensor, each a block of the caching
        allocator's smallest size (512 bytes), and their stack and total."""
        return 512 * (self.tensors() + 2)

    def matrices(self):
        """The parameters Muon updates: the blocks' matrices."""
        return 12 * self.layers * self.hidden ** 2

    def muon(self):
        """Muon's state: a momentum buffer a matrix."""
        return 4 * self.matrices()

    def muon_temp(self):
        """Muon's largest temporary: one matrix's update being orthogonalized."""
        m, n = 4 * self.hidden, self.hidden
        return 8 * m * n + 4 * n * n

    def rest(self):
        """The share of the parameters AdamW updates beside Muon."""
        return 1.0 - self.matrices() / self.params

    def layer_acts(self, batch, seq, checkpointed=False):
        s, b, h, a = seq, batch, self.hidden, self.heads
        if checkpointed:
            return 2 * s * b * h
        return int(s * b * h * (34 + 5 * a * s / h))

    def attn_scores(self, batch, seq):
        return 2 * self.heads * seq * seq * batch

    def logits(self, batch, seq):
        return 4 * batch * seq * self.vocab


GPT2_SMALL = Transformer("gpt2-124M", 124_439_808, 12, 768, 12, 50257)
GPT2_MEDIUM = Transformer("gpt2-355M", 354_823_168, 24, 1024, 16, 50257)
GPT2_LARGE = Transformer("gpt2-774M", 774_030_080, 36, 1280, 20, 50257)
# ViT-B/16 at 224x224: 196 patches + the class token, 1000 classes.
VIT_B16 = Transformer("vit-b16", 86_567_656, 12, 768, 12, 1000)
