"""The recorded allocation stream is PyTorch's own: one training iteration recorded on the CPU
(through the same dispatch mode as on the meta device) against the CPU allocator's allocations and
frees seen by the profiler in the same iteration run with no mode at all; and the meta device
records the same stream as the CPU.

Both sides see the same ops. The dispatch mode sees an op as one launch unless it is a
CompositeImplicitAutograd op (F.linear, dropout, the math path of attention), whose parts it sees
instead; the reference takes the same view of the profiler's op tree, and calls an allocation freed
before its op returns that op's scratch space."""

import functools

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch._C._profiler import _EventType, _TensorMetadata  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from gswap.whatif.models import gpt_workload  # noqa: E402
from gswap.whatif.record import TrainingStep, record  # noqa: E402


@functools.lru_cache(maxsize=None)
def _overloads(name: str) -> list:
    """(schema, is CompositeImplicitAutograd) of each overload of a profiled op ("aten::where")."""
    ns, _, op = name.partition("::")
    packet = getattr(getattr(torch.ops, ns, None), op, None)
    out = []
    for overload in (packet.overloads() if packet is not None else []):
        full = name if overload == "default" else f"{name}.{overload}"
        try:
            implicit = torch._C._dispatch_has_kernel_for_dispatch_key(
                full, "CompositeImplicitAutograd")
        except RuntimeError:  # a TorchScript-only overload
            continue
        out.append((getattr(packet, overload)._schema, implicit))
    return out


def _matches(schema, inputs) -> bool:
    if len(inputs) != len(schema.arguments):
        return False
    for arg, value in zip(schema.arguments, inputs):
        kind = str(arg.type)
        if kind in ("Tensor", "Tensor?"):
            if not (isinstance(value, _TensorMetadata) or (value is None and kind == "Tensor?")):
                return False
        elif isinstance(value, _TensorMetadata):
            return False
    return True


def seen_as_one_op(node) -> bool:
    """Whether a dispatch mode sees this profiled aten op as one op. The profiler names the op but
    not its overload (where.ScalarSelf decomposes, where.self does not), so the overload is the one
    whose schema takes the recorded inputs (Tensor or not, argument by argument)."""
    overloads = _overloads(node.name)
    implicit = [imp for schema, imp in overloads if _matches(schema, node.extra_fields.inputs)]
    implicit = implicit or [imp for _, imp in overloads]
    return not (implicit and all(implicit))


def allocator_stream(model, make_batch, loss, batch, dtype=None):
    """(alloc|free, bytes) of a steady-state iteration from the CPU allocator: the storages made in
    the iteration. Left out: allocations freed before the op that made them returns (a kernel's
    scratch space), scalars wrapped outside any op, and memory from before the iteration (the
    profiler knows some of it, from earlier profiling in the process)."""
    torch.manual_seed(0)
    step = TrainingStep(model, make_batch, loss, batch_size=batch, device="cpu", dtype=dtype)
    step()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True,
                 record_shapes=True) as prof:  # record_shapes: the ops' inputs, for overloads
        step()
    events = []

    def walk(node, op):
        if node.tag == _EventType.Allocation:
            events.append((node.start_time_ns, node.extra_fields.ptr,
                           node.extra_fields.alloc_size, op))
        if (op is None and node.tag == _EventType.TorchOp and node.name.startswith("aten::")
                and seen_as_one_op(node)):
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
    """Runs of allocations and runs of frees, each as a sorted tuple of sizes: a kernel may
    allocate its outputs in any order (batch norm's backward does not follow its return order)."""
    res, i = [], 0
    while i < len(stream):
        j = i
        while j < len(stream) and stream[j][0] == stream[i][0]:
            j += 1
        res.append((stream[i][0], tuple(sorted(b for _, b in stream[i:j]))))
        i = j
    return res


def recorded_stream(model, make_batch, loss, batch, device="cpu", dtype=None):
    torch.manual_seed(0)
    trace = record(model, make_batch, loss, batch_size=batch, device=device, dtype=dtype,
                   gpu_kernels=False, progress=False)
    made = {rid for k, rid, _ in trace.recording.events if k == "alloc"}
    return [(k, b) for k, rid, b in trace.recording.events if rid in made]


def small_resnet():
    import torchvision
    return torchvision.models.resnet18(num_classes=10)


def images(batch, device):
    return (torch.randn(batch, 3, 32, 32, device=device),
            torch.randint(0, 10, (batch,), device=device))


def test_cnn_stream_equals_the_cpu_allocator():
    # Residual adds, batch norm (saved statistics, running stats), in-place ReLU, max pooling,
    # gradient accumulation at every residual, Adam's state made in the first step.
    ref = allocator_stream(small_resnet, images, F.cross_entropy, 2)
    mine = recorded_stream(small_resnet, images, F.cross_entropy, 2)
    assert len(ref) > 500
    assert canonical(mine) == canonical(ref)


def test_cnn_meta_records_what_the_cpu_records():
    cpu = recorded_stream(small_resnet, images, F.cross_entropy, 2, "cpu")
    meta = recorded_stream(small_resnet, images, F.cross_entropy, 2, "meta")
    assert canonical(meta) == canonical(cpu)


def tiny_gpt(layers, dropout):
    return gpt_workload(layers=layers, hidden=32, heads=4, seq=16, vocab=100, dropout=dropout)


@pytest.mark.parametrize("dropout, dtype", [(0.1, None), (0.0, torch.bfloat16)],
                         ids=["fp32-dropout", "bf16"])
def test_transformer_stream_equals_the_cpu_allocator(dropout, dtype):
    # Two layers: the residual stream's gradient accumulated across layers, q/k/v gradients
    # accumulated into the packed projection's, the tied embedding's gradient (a view, which
    # autograd adds to out of place), layer norm's saved statistics. With dropout: its masks and
    # the math path of attention (the CPU's fused kernel takes no dropout); without: the CPU's
    # fused attention and its saved log-sum-exp.
    w = tiny_gpt(2, dropout)
    ref = allocator_stream(w.model, w.make_batch, w.loss, 3, dtype)
    mine = recorded_stream(w.model, w.make_batch, w.loss, 3, dtype=dtype)
    assert len(ref) > 300
    assert canonical(mine) == canonical(ref)


def test_transformer_meta_records_what_the_cpu_records():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    w = tiny_gpt(2, 0.1)
    with sdpa_kernel(SDPBackend.MATH):  # the meta device has only the math path
        cpu = recorded_stream(w.model, w.make_batch, w.loss, 3, "cpu")
        meta = recorded_stream(w.model, w.make_batch, w.loss, 3, "meta")
    assert canonical(meta) == canonical(cpu)
