"""Pins the number of vramscope Python frames a plain training step runs
(docs/hook.md, "Cost"): an upper bound, so a change that adds hook work to
every step shows here. Deterministic: calls are counted with sys.setprofile
for one step, nothing is timed (bench/cost_model.py times them).
"""

import collections
import os
import sys

from test_reads import at_rest, plain_step, watched

import vramscope

PKG = os.path.dirname(os.path.abspath(vramscope.__file__))

# One plain step at default settings, step >= 3, counted on torch 1.13:
#   zero_grad: the optimizer patch, _zero_grad + begin + end              (4)
#   forward: _on_forward_pre + begin, _on_forward + end (+ loss begin)    (4)
#            (1.13's kwargs-peek wrapper of forward is undone at the first
#            forward with a positional tensor; a keyword-called model keeps it: +1)
#   backward: the wrapper (torch.autograd.backward, which Tensor.backward calls),
#             user_backward_begin + end (+ backward begin),
#             user_backward_end + end                                     (5)
#   step: the patch, _step_around, _step_pre + begin,
#         _step_post + _finish_step + end                                (7)
# Reads are a functools.partial of torch's binding: no frame of ours;
# Activations.note_input and prepare run inline in their common case.
# 20 on torch 1.13; on torch >= 2.0 the step patch is two step hooks
# and a step's arguments are searched for a closure (+1): 21 worked out
# from the code, 22 measured on torch 2.15 (make test-py runs this file on
# both). The pin leaves room for what a torch 2.x run may show that this
# reading missed.
PLAIN_STEP_FRAMES = 24  # 44 before the every-step paths were inlined, 28 before the bare reads


def frames_of_one_step(torch, model, opt):
    calls = collections.Counter()

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            if os.path.dirname(os.path.abspath(code.co_filename)) == PKG:
                calls[(os.path.basename(code.co_filename), code.co_name)] += 1

    old = sys.getprofile()
    sys.setprofile(profile)
    try:
        plain_step(torch, model, opt)
    finally:
        sys.setprofile(old)
    return calls


def test_plain_step_runs_at_most_the_pinned_number_of_hook_frames(torch_mod):
    client, model, opt, binding, _, _ = watched(torch_mod, step=5)
    for _ in range(2):  # past the first step's one-off work (output grad hook)
        plain_step(torch_mod, model, opt)
    calls = frames_of_one_step(torch_mod, model, opt)
    total = sum(calls.values())
    assert total > 0, "the profiler saw the hook run"
    assert total <= PLAIN_STEP_FRAMES, sorted(calls.items())



# One plain step of a loop at rest (the fast paths: docs/hook.md, "Cost"):
#   zero_grad: the optimizer patch and _zero_grad                           (2)
#   forward: _on_forward_pre, _on_forward                                   (2)
#   backward: the wrapper and Watcher.user_backward                         (2)
#   step: the patch and _step_around (torch 1.13) or the two step hooks
#         (torch >= 2.0), then _finish_step, with the closing read's
#         Watcher._close_read and DevicePeaks.read_reset                    (5)
# 11 on torch 1.13 and on torch 2.15 (bench/hook_ops.py counts the same
# step, on the fake allocator the cost model times).
FAST_STEP_FRAMES = 11


def test_a_step_at_rest_runs_at_most_the_pinned_number_of_hook_frames(torch_mod):
    with at_rest(torch_mod) as (_, watcher, model, opt):
        calls = frames_of_one_step(torch_mod, model, opt)
        assert watcher._fast
    assert 0 < sum(calls.values()) <= FAST_STEP_FRAMES, sorted(calls.items())
