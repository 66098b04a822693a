"""The recorded allocation stream is PyTorch's own: one training iteration recorded on the CPU
(through the same dispatch mode as on the meta device) against the CPU allocator's allocations and
frees seen by the profiler in the same iteration run with no mode at all; and the meta device
records the same stream as the CPU."""

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch._C._profiler import _EventType  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from gswap.whatif.models import gpt_workload  # noqa: E402
from gswap.whatif.record import TrainingStep, record  # noqa: E402


def allocator_stream(model, make_batch, loss, batch):
    """(alloc|free, bytes) of a steady-state iteration from the CPU allocator: the storages made in
    the iteration. Allocations that die inside the op that made them (a kernel's scratch space),
    scalars Python wraps outside any op, and memory from before the iteration (the profiler knows
    some of it, from earlier profiling in the process) are left out."""
    torch.manual_seed(0)
    step = TrainingStep(model, make_batch, loss, batch_size=batch, device="cpu")
    step()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = []

    def walk(node, op):
        if node.tag == _EventType.Allocation:
            events.append((node.start_time_ns, node.extra_fields.ptr,
                           node.extra_fields.alloc_size, op))
        if op is None and node.tag == _EventType.TorchOp and node.name.startswith("aten::"):
            op = node
        for child in node.children:
            walk(child, op)

    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root, None)
    events.sort(key=lambda e: e[0])
    live, out = {}, []
    for t, ptr, size, op in events:
        if size > 0:
            live[ptr] = (len(out), op)
            out.append(["alloc", size, op is None])
        elif size < 0:
            if ptr not in live:
                continue
            i, aop = live.pop(ptr)
            if out[i][2] or t <= aop.end_time_ns:
                out[i][2] = True
                continue
            out.append(["free", -size, False])
    return [(k, b) for k, b, drop in out if not drop]


def canonical(stream):
    """Runs of allocations and runs of frees, each as a sorted tuple of sizes: PyTorch may
    allocate an op's outputs in any order."""
    res, i = [], 0
    while i < len(stream):
        j = i
        while j < len(stream) and stream[j][0] == stream[i][0]:
            j += 1
        res.append((stream[i][0], tuple(sorted(b for _, b in stream[i:j]))))
        i = j
    return res


def recorded_stream(model, make_batch, loss, batch, device="cpu"):
    torch.manual_seed(0)
    trace = record(model, make_batch, loss, batch_size=batch, device=device, gpu_kernels=False,
                   progress=False)
    made = {rid for k, rid, _ in trace.recording.events if k == "alloc"}
    return [(k, b) for k, rid, b in trace.recording.events if rid in made]


def peak(stream):
    cur = top = 0
    for k, b in stream:
        cur += b if k == "alloc" else -b
        top = max(top, cur)
    return top


def small_resnet():
    import torchvision
    return torchvision.models.resnet18(num_classes=10)


def images(batch, device):
    return (torch.randn(batch, 3, 32, 32, device=device),
            torch.randint(0, 10, (batch,), device=device))


def test_cnn_stream_equals_the_cpu_allocator():
    # Residual adds, batch norm (saved statistics, running stats), in-place ReLU, max pooling,
    # gradient accumulation at every residual, AdamW's foreach kernels.
    ref = allocator_stream(small_resnet, images, F.cross_entropy, 2)
    mine = recorded_stream(small_resnet, images, F.cross_entropy, 2)
    assert len(ref) > 500
    assert canonical(mine) == canonical(ref)


def test_cnn_meta_records_what_the_cpu_records():
    cpu = recorded_stream(small_resnet, images, F.cross_entropy, 2, "cpu")
    meta = recorded_stream(small_resnet, images, F.cross_entropy, 2, "meta")
    assert canonical(meta) == canonical(cpu)


def tiny_gpt(layers):
    # No dropout: with dropout the CPU's attention is the unfused math path, whose intermediates
    # the profiler cannot attribute to ops.
    return gpt_workload(layers=layers, hidden=32, heads=4, seq=16, vocab=100, dropout=0.0)


def test_transformer_peak_and_events_equal_the_cpu_allocator():
    w = tiny_gpt(1)
    ref = allocator_stream(w.model, w.make_batch, w.loss, 3)
    mine = recorded_stream(w.model, w.make_batch, w.loss, 3)
    assert len(mine) == len(ref)
    assert peak(mine) == peak(ref)


@pytest.mark.xfail(strict=True, reason="known gap: under a dispatch mode autograd accumulates "
                   "gradients out of place, and annotate_inplace does not yet fold every case "
                   "that eager PyTorch runs in place (two layers: one allocation more, and a "
                   "peak 15% higher, than PyTorch's)")
def test_transformer_stream_equals_the_cpu_allocator():
    w = tiny_gpt(2)
    ref = allocator_stream(w.model, w.make_batch, w.loss, 3)
    mine = recorded_stream(w.model, w.make_batch, w.loss, 3)
    assert canonical(mine) == canonical(ref)


def test_transformer_meta_records_what_the_cpu_records():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    w = tiny_gpt(2)
    with sdpa_kernel(SDPBackend.MATH):  # the meta device has only the math path
        cpu = recorded_stream(w.model, w.make_batch, w.loss, 3, "cpu")
        meta = recorded_stream(w.model, w.make_batch, w.loss, 3, "meta")
    assert canonical(meta) == canonical(cpu)
