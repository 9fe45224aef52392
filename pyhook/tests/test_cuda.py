"""The CUDA seam: mem mapping, one memory_stats() per marker, peaks, sampling."""

import time
import types

import pytest

from conftest import FakeCuda, load_fixture_stats, make_config, nested_of, queued
from vramscope import _client, _cuda, _watch


@pytest.mark.parametrize("name", ["memory_stats_torch113_a100.json",
                                  "memory_stats_torch23_a100.json"])
def test_mem_maps_exactly_from_memory_stats(name):
    stats = load_fixture_stats(name)
    mem = _cuda.mem_from_stats(stats)
    assert mem == {
        "allocated": stats["allocated_bytes.all.current"],
        "max_allocated": stats["allocated_bytes.all.peak"],
        "reserved": stats["reserved_bytes.all.current"],
        "max_reserved": stats["reserved_bytes.all.peak"],
        "alloc_retries": stats["num_alloc_retries"],
        "ooms": stats["num_ooms"],
    }
    assert mem["allocated"] == 1210056704 and mem["alloc_retries"] == 3


def test_mem_of_an_uninitialised_allocator_is_null():
    assert _cuda.mem_from_stats({}) is None
    stats = load_fixture_stats()
    del stats["num_ooms"]
    assert "ooms" not in _cuda.mem_from_stats(stats)


class FakeTorchCuda:
    """The torch.cuda functions CudaStats calls, counting each call."""

    def __init__(self):
        self.stats_calls = 0
        self.resets = 0
        self.stats = load_fixture_stats()

    def memory_stats(self, device):
        self.stats_calls += 1
        return self.stats

    def reset_peak_memory_stats(self, device):
        self.resets += 1

    def get_device_properties(self, device):
        return types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", total_memory=85024112640,
                                     uuid="5e7f3a1c0b2d4c8e9f102a3b4c5d6e7f")


def run_steps(torch, cuda, steps=2):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    client = _client.Client(make_config(), cuda=cuda, start=False)
    _watch.Watcher(torch, client, model, opt, client.config)
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
    client.mark("done")
    return client


def test_one_memory_stats_call_per_marker_and_no_reset_without_the_bindings(torch_mod):
    # A torch without torch._C's stats and reset bindings: no exact peaks,
    # reads at every end edge (exact peaks: test_exact_peaks.py).
    fake = FakeTorchCuda()
    cuda = _cuda.CudaStats(types.SimpleNamespace(cuda=fake), 0)
    client = run_steps(torch_mod, cuda)
    markers = [m for m in queued(client) if m["type"] in ("phase", "mark")]
    assert len(markers) == 2 * 10 + 1
    # One read per end edge and per mark; a begin edge reads nothing itself.
    reads = [m for m in markers if m.get("edge") != "begin"]
    assert fake.stats_calls == len(reads) == 2 * 5 + 1
    assert all(m["mem"] == _cuda.mem_from_stats(fake.stats) for m in reads)
    begins = sum(1 for m in markers if m.get("edge") == "begin")
    assert begins == 10 and fake.resets == 0
    assert client.hello["hook"]["reset_peaks"] is False
    assert client.hello["hook"]["exact_peaks"] is False


def test_device_info_formats_the_uuid():
    cuda = _cuda.CudaStats(types.SimpleNamespace(cuda=FakeTorchCuda()), 2)
    assert cuda.device_info() == {"index": 2, "uuid": "GPU-5e7f3a1c-0b2d-4c8e-9f10-2a3b4c5d6e7f",
                                  "name": "NVIDIA H100 80GB HBM3", "total": 85024112640}
    assert _cuda.format_uuid("GPU-abc") == "GPU-abc"


def test_cpu_torch_has_no_seam(torch_mod):
    if torch_mod.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert _cuda.detect(torch_mod) is None
    assert _cuda.detect(None) is None


def test_cpu_run_sends_null_mem_and_no_samples(torch_mod):
    client = run_steps(torch_mod, None)
    msgs = queued(client)
    assert all(m["mem"] is None for m in msgs if m["type"] in ("phase", "mark"))
    assert client._sampler is None


def test_samples_flow_at_about_the_configured_rate():
    fake = FakeCuda()
    client = _client.Client(make_config(sample_hz=100), cuda=fake, start=False)
    client._sampling.set()
    import threading
    t = threading.Thread(target=client._run_sampler, daemon=True)
    t.start()
    time.sleep(0.5)
    client._sampling.clear()
    client._stop.set()
    t.join(1)
    samples = [m for m in queued(client) if m["type"] == "sample"]
    assert 20 <= len(samples) <= 55, len(samples)
    assert all(m["mem"]["allocated"] == 1210056704 for m in samples)
    # One read per sample, and one more where sampling stopped between a
    # read and its sample (the sampler then sends none).
    assert len(samples) <= fake.reads <= len(samples) + 1


def test_sampler_stops_at_close(sock_path):
    fake = FakeCuda()
    client = _client.Client(make_config(socket=sock_path, sample_hz=200), cuda=fake)
    time.sleep(0.1)
    client.close("removed")
    n = fake.reads
    time.sleep(0.1)
    assert fake.reads == n
    assert not client._sampler.is_alive() and not client._sender.is_alive()



@pytest.mark.parametrize("name", ["memory_stats_torch113_a100.json",
                                  "memory_stats_torch23_a100.json"])
def test_nested_stats_map_to_the_same_mem(name):
    flat = load_fixture_stats(name)
    nested = nested_of(flat)
    assert nested["allocated_bytes"]["all"]["peak"] == flat["allocated_bytes.all.peak"]
    assert _cuda.mem_from_nested(nested) == _cuda.mem_from_stats(flat)
    assert _cuda.mem_from_nested({}) is None
    del nested["num_ooms"], nested["reserved_bytes"]["all"]["peak"]
    assert _cuda.mem_from_nested(nested) is None, "a required value missing"


class FakeNestedTorchCuda(FakeTorchCuda):
    """A torch.cuda with memory_stats_as_nested_dict (torch 1.13 and 2.x)."""

    def __init__(self):
        super().__init__()
        self.nested_calls = 0
        self.nested = nested_of(self.stats)

    def memory_stats_as_nested_dict(self, device):
        self.nested_calls += 1
        return self.nested


def test_nested_read_is_preferred_one_call_per_marker(torch_mod):
    fake = FakeNestedTorchCuda()
    cuda = _cuda.CudaStats(types.SimpleNamespace(cuda=fake), 0)
    client = run_steps(torch_mod, cuda)
    markers = [m for m in queued(client) if m["type"] in ("phase", "mark")]
    reads = [m for m in markers if m.get("edge") != "begin"]
    assert fake.nested_calls == len(reads) == 2 * 5 + 1
    assert fake.stats_calls == 0, "memory_stats() (flatten + sort) not called"
    assert all(m["mem"] == _cuda.mem_from_stats(fake.stats) for m in reads)


def test_without_nested_stats_memory_stats_is_read():
    fake = FakeTorchCuda()
    assert not hasattr(fake, "memory_stats_as_nested_dict")
    cuda = _cuda.CudaStats(types.SimpleNamespace(cuda=fake), 0)
    assert cuda.read() == _cuda.mem_from_stats(fake.stats) and fake.stats_calls == 1


def test_real_torch_has_the_nested_reader(torch_mod):
    # Feature detection must find it on the torch these tests run with.
    assert callable(getattr(torch_mod.cuda, "memory_stats_as_nested_dict", None))
