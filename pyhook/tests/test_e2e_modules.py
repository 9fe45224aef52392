"""End to end, by module: the seed-001 model at scale 0.1 trained on CPU with
watch(), recorded by the real ``vramscope record`` and read by ``vramscope
report``: the report names the loss's saved tensors with their size and the
model's largest blocks, each with its share."""

import os

import vramscope
from test_e2e import has_goodbye, report, report_json, start, stop_ok, the_process
from test_modules import F32, seed001


def test_seed001_report_names_the_loss_and_the_largest_blocks(torch_mod, vs_bin, workdir, recorders):
    torch = torch_mod
    out, sock = os.path.join(workdir, "run.jsonl"), os.path.join(workdir, "s.sock")
    rec = start(recorders, vs_bin, out, sock)
    model, a = seed001(torch, 0.1)
    B, T, V = a.batch_size, 50, a.vocab_size
    opt = torch.optim.Adam(model.parameters())
    crit = torch.nn.CrossEntropyLoss(ignore_index=a.pad_id, reduction="sum")
    handle = vramscope.watch(model, opt, socket=sock)
    x = torch.ones(B, T, dtype=torch.long) * 2
    y = torch.ones(B, T, dtype=torch.long) * 2
    for _ in range(3):
        model.zero_grad()
        logit = model(x, y)
        loss = crit(logit.view(-1, logit.size(-1)), y.view(-1)) / B
        loss.backward()
        opt.step()
    handle.remove()
    rec.wait_for(has_goodbye, "the hook's goodbye")
    stop_ok(rec)

    h = the_process(report_json(vs_bin, out))["anatomy"]["holders"]
    log_softmax = B * T * V * F32
    assert h["step"] == 2 and h["loss_largest"] == log_softmax and h["loss_largest_item"]
    assert h["saved"] == h["activations"] + h["loss"]
    loss = [m for m in h["modules"] if m["outside"]][0]
    assert loss["bytes"] == h["loss"] and abs(loss["share"] - h["loss"] / h["saved"]) < 1e-9
    assert h["blocks"][0]["module"] == "attention"  # 50 calls of its tanh(keys + query)
    assert [c["module"] for c in h["checkpoint"]][:1] == ["attention"]

    text = report(vs_bin, out)
    assert "      loss (outside the model)                5 MiB   25%" in text, text
    assert "    largest blocks: attention 8 MiB (44%), encoder 2 MiB (12%)" in text, text
    assert "→ checkpoint attention (torch.utils.checkpoint around each): saves about 8 MiB" in text
    assert "→ shrink the loss's saved tensors" in text
