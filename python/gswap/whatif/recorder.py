"""Records one training iteration as a gswap-trace, on the meta device (or any device).

A TorchDispatchMode sees every aten op below autograd, so it sees what the GPU would run: the
forward, the backward that autograd derives, and the optimizer. For each op it notes which
storages the op reads and writes. A storage is one region: the allocation a per-tensor allocator
(PyTorch's cudaMallocAsync backend, as `gswap run` sets) makes for it on a GPU. Regions die when
PyTorch frees the storage, which a weakref callback on the storage observes as it happens: the
refcount frees of the forward, the activations autograd saves for backward and releases after
using them, gradients dropped by zero_grad. Views share their base's region and launch nothing.

The recorder calls every op as it came and holds only weak references, but an active dispatch
mode still changes one thing: C++ composite code and the autograd engine check for one
("composite compliance": isTensorSubclassLike() is true for every tensor while a mode is active)
and then run some in-place ops out of place. Autograd's InputBuffer accumulates a gradient with
`old + new` instead of `old.add_(new)`, F.linear adds its bias out of place. Eager PyTorch would
have reused the first operand, which dies right after the op; annotate_inplace() folds the two
regions back into one, where eager PyTorch could have reused it (not a view, the storage's only
holder: the gradient of a tied weight arrives as a transposed view, and eager PyTorch adds to it
out of place too). tests/python/test_recorder.py checks the result against PyTorch's own CPU
allocator (seen by the profiler, with no mode active) for a CNN and a transformer, with and
without dropout, in fp32 and bf16.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .costmodel import CostModel

# Ops that create a storage without running a kernel, or change storages without one.
_NO_KERNEL = {
    "aten.empty.memory_format", "aten.empty_strided.default", "aten.empty_like.default",
    "aten.new_empty.default", "aten.new_empty_strided.default", "aten.empty.names",
    "aten.resize_.default", "aten.set_.source_Storage", "aten.set_.source_Storage_storage_offset",
    "aten.set_.source_Tensor", "aten.set_.default",
}

PHASES = ("forward", "backward", "optimizer", "other")

# Torch functions through which Python code asks for arithmetic itself (`a + b`, torch.add).
_PYTHON_ARITHMETIC = {
    f"{pre}{op}{post}" for op in ("add", "sub", "mul", "div", "truediv", "true_divide")
    for pre, post in (("", ""), ("", "_"), ("__", "__"), ("__r", "__"), ("__i", "__"))}


# Out-of-place ops that composite-compliant C++ code uses where eager code runs them in place.
_INPLACE_IN_EAGER = {"add"}


@dataclass
class Region:
    id: int
    bytes: int
    alloc_seq: int
    free_seq: Optional[int] = None
    producer: Optional[int] = None      # the launch that created it, None if it existed before
    written: list[int] = field(default_factory=list)  # launches that wrote it
    last_access: int = -1
    recompute: Optional[dict] = None
    folded: bool = False  # folded into the operand eager PyTorch updates in place


@dataclass
class Launch:
    seq: int
    kernel: str
    dur_us: float
    regions: list[int]
    reads: list[int]
    phase: str
    internal: bool = False  # dispatched by C++ (a composite op, autograd), not called from Python
    # Its first operand could have been updated in place by eager code (see _reusable_in_place).
    self_reusable: bool = False


@dataclass
class Recording:
    regions: list[Region]
    launches: list[Launch]
    events: list[tuple[str, int, int]]  # ("alloc" | "free", region id, bytes), in order


# PyTorch's multi_tensor_apply on a GPU (ATen/native/cuda/MultiTensorApply.cuh): a foreach op is
# not one kernel over every tensor of its lists but a launch per group of at most this many
# tensors (for 1 to 5 lists, outputs included) and at most 320 chunks of 65536 elements; a tensor
# whose chunks do not all fit goes on in the next launch. gswap makes memory resident per launch,
# so an optimizer step over every parameter is that many launches, each touching a few tensors.
_FOREACH_MAX_TENSORS = (110, 64, 48, 36, 30)
_FOREACH_MAX_CHUNKS = 320
_FOREACH_CHUNK = 65536


def _foreach_groups(args, out) -> Optional[tuple[list[list[int]], list[list[torch.Tensor]]]]:
    """For a foreach op over tensor lists: the element indices of each launch it makes on a GPU,
    and the tensor lists (inputs, then outputs); None for any other call."""
    lists = [a for a in args if isinstance(a, (list, tuple)) and a
             and all(isinstance(t, torch.Tensor) for t in a)]
    if not lists or any(len(lst) != len(lists[0]) for lst in lists):
        return None
    n = len(lists[0])
    if isinstance(out, (list, tuple)) and len(out) == n and all(isinstance(t, torch.Tensor)
                                                                 for t in out):
        lists = [*lists, list(out)]
    max_tensors = _FOREACH_MAX_TENSORS[min(len(lists), len(_FOREACH_MAX_TENSORS)) - 1]
    groups: list[list[int]] = []
    current: list[int] = []
    chunks = 0
    for i in range(n):
        left = -(-lists[0][i].numel() // _FOREACH_CHUNK)
        if left == 0:
            continue  # an empty tensor: no chunk, no launch of its own
        current.append(i)
        while left:
            take = min(left, _FOREACH_MAX_CHUNKS - chunks)
            chunks += take
            left -= take
            if chunks == _FOREACH_MAX_CHUNKS or (left == 0 and len(current) == max_tensors):
                groups.append(current)
                current = [i] if left else []
                chunks = 0
    if current:
        groups.append(current)
    return groups, lists


def _tensors(tree) -> list[torch.Tensor]:
    flat, _ = tree_flatten(tree)
    return [t for t in flat if isinstance(t, torch.Tensor)]


def _storage(t: torch.Tensor):
    try:
        s = t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # sparse and other storage-less tensors
        return None
    return s if s.nbytes() > 0 else None


def _non_overlapping_and_dense(t: torch.Tensor) -> bool:
    """Its elements fill its storage span exactly once, in some order of dimensions."""
    expected = 1
    for size, stride in sorted((d for d in zip(t.shape, t.stride()) if d[0] != 1),
                               key=lambda d: d[1]):
        if stride != expected:
            return False
        expected *= size
    return True


def _reusable_in_place(t) -> bool:
    """What autograd's InputBuffer asks (can_accumulate_inplace) before it accumulates a gradient
    in place rather than out of place: a dense, non-overlapping tensor that is the only holder of
    its storage. A view fails (its base holds the storage too): the gradient of a tied weight
    arrives as the transpose of a matmul's output, and eager PyTorch adds to it out of place."""
    if (not isinstance(t, torch.Tensor) or t.layout != torch.strided or t._is_view()
            or not _non_overlapping_and_dense(t)):
        return False
    s = _storage(t)
    if s is None:
        return False
    use_count = getattr(torch._C, "_storage_Use_Count", None)
    # The tensor and the Python storage object (one per storage, which `s` is) hold it.
    return use_count is None or use_count(s._cdata) == 2


class _Finalizer:
    """Callback of a storage's weakref: the storage (not the Python wrapper) has been freed."""

    __slots__ = ("recorder", "key", "rid")

    def __init__(self, recorder: "Recorder", key: int, rid: int):
        self.recorder, self.key, self.rid = recorder, key, rid

    def __call__(self, _ref=None) -> None:
        rec = self.recorder
        if rec.live.get(self.key) == self.rid:
            del rec.live[self.key]
        rec._freed(self.rid)


class Recorder(TorchDispatchMode):
    """Records launches and regions while active. `phase` is set by the driver."""

    def __init__(self, cost: Optional[CostModel] = None,
                 on_launch: Optional[Callable[[], None]] = None):
        super().__init__()
        self.cost = cost
        self.on_launch = on_launch
        self.phase = "other"
        self.python_call: Optional[str] = None  # the torch function Python is in (CallTracker)
        self.recording = True
        self.regions: list[Region] = []
        self.launches: list[Launch] = []
        self.events: list[tuple[str, int, int]] = []
        self.live: dict[int, int] = {}       # storage address (StorageImpl) -> region id
        self._refs: dict[int, weakref.ref] = {}

    # Regions ------------------------------------------------------------------------------------

    def _region(self, storage, preexisting: bool) -> tuple[int, bool]:
        key = storage._cdata
        rid = self.live.get(key)
        if rid is not None:
            return rid, False
        rid = len(self.regions)
        seq = 0 if preexisting else len(self.launches)
        self.regions.append(Region(rid, storage.nbytes(), seq))
        self.live[key] = rid
        self._refs[rid] = weakref.ref(storage, _Finalizer(self, key, rid))
        if not preexisting:
            self.events.append(("alloc", rid, storage.nbytes()))
        return rid, True

    def _freed(self, rid: int) -> None:
        self._refs.pop(rid, None)
        if not self.recording:
            return
        self.regions[rid].free_seq = len(self.launches)
        self.events.append(("free", rid, self.regions[rid].bytes))

    def stop(self) -> None:
        """Stops recording; frees after this point are not part of the iteration."""
        self.recording = False

    # Ops ----------------------------------------------------------------------------------------

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        inputs = _tensors((args, kwargs))
        if not self.recording:
            return func(*args, **kwargs)
        reads: list[int] = []
        for t in inputs:
            s = _storage(t)
            if s is not None:
                reads.append(self._region(s, preexisting=True)[0])
        # Storages written in place: the arguments the schema marks as written (self of add_,
        # out= arguments, the running stats of batch norm).
        written: list[int] = []
        for i, arg in enumerate(func._schema.arguments):
            if arg.alias_info is None or not arg.alias_info.is_write:
                continue
            value = args[i] if i < len(args) and not arg.kwarg_only else kwargs.get(arg.name)
            for t in _tensors(value):
                s = _storage(t)
                if s is not None:
                    written.append(self._region(s, preexisting=True)[0])
        self_reusable = (func._overloadpacket.__name__ in _INPLACE_IN_EAGER and bool(args)
                         and _reusable_in_place(args[0]))

        out = func(*args, **kwargs)

        outputs = _tensors(out)
        created: list[int] = []
        touched: list[int] = list(reads)
        for t in outputs:
            s = _storage(t)
            if s is None:
                continue
            rid, new = self._region(s, preexisting=False)
            touched.append(rid)
            if new:
                created.append(rid)
        name = str(func)
        if name in _NO_KERNEL or not (created or written or func._schema.is_mutable):
            return out  # views, aliases, allocations without a kernel
        dur = self.cost.duration_us(func, args, kwargs, out, inputs, outputs) if self.cost else 0.0
        internal = self.python_call not in _PYTHON_ARITHMETIC
        split = _foreach_groups(args, out) if name.startswith("aten._foreach_") else None
        if split is None or len(split[0]) <= 1:
            self._launch(name, dur, touched, reads, created, written, internal, self_reusable)
            return out
        # One launch per group, as on a GPU: each touches its tensors of every list, and the
        # tensors outside the lists (a step count, a learning rate); the time is shared by
        # elements.
        groups, lists = split
        listed = {id(t) for lst in lists for t in lst}
        shared = [t for t in inputs if id(t) not in listed]
        elements = [sum(lists[0][i].numel() for i in g) for g in groups]
        total = sum(elements) or 1
        for g, count in zip(groups, elements):
            mine = shared + [lst[i] for lst in lists for i in g]
            rids = {self._region(st, preexisting=True)[0]
                    for st in (_storage(t) for t in mine) if st is not None}
            self._launch(name, dur * count / total, [r for r in touched if r in rids],
                         [r for r in reads if r in rids], [r for r in created if r in rids],
                         [r for r in written if r in rids], internal, self_reusable)
        return out

    def _launch(self, name, dur, touched, reads, created, written, internal, self_reusable):
        seq = len(self.launches)
        regions = list(dict.fromkeys(touched))
        self.launches.append(Launch(seq, name, dur, regions,
                                    [r for r in dict.fromkeys(reads) if r not in created],
                                    self.phase, internal, self_reusable))
        for rid in created:
            self.regions[rid].producer = seq
        for rid in dict.fromkeys(written):
            self.regions[rid].written.append(seq)
        for rid in regions:
            self.regions[rid].last_access = seq
        if self.on_launch:
            self.on_launch()

    def result(self) -> Recording:
        return Recording(self.regions, self.launches, self.events)


class CallTracker(torch.overrides.TorchFunctionMode):
    """Tells the recorder which torch function Python called (the outermost one: the mode is off
    while a call runs), so the recorder can tell `a + b` written in Python from an add that C++
    code issued."""

    def __init__(self, recorder: Recorder):
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        rec = self.recorder
        outer = rec.python_call
        rec.python_call = getattr(func, "__name__", None) or ""
        try:
            return func(*args, **kwargs)
        finally:
            rec.python_call = outer


def annotate_inplace(rec: Recording) -> None:
    """Folds the output of an out-of-place op issued by C++ code into the operand eager PyTorch
    would have updated in place.

    Eager code updates `self` (`old.add_(new)` in autograd's InputBuffer, `out.add_(bias)` in
    F.linear), so only the first operand can take the output, and only when eager PyTorch could
    reuse it: made in this iteration, the output's size, last used by this op and dead before the
    next launch (autograd checks it holds the only reference). Chains fold into one region: a
    gradient accumulated from three uses is one buffer updated twice."""
    regions, launches = rec.regions, rec.launches
    merged: dict[int, int] = {}  # folded output -> the operand's region (the chain's first)
    dropped_events: set[tuple[str, int]] = set()
    for l in launches:
        if not (l.internal and l.self_reusable and l.reads):
            continue
        outputs = [r for r in l.regions if regions[r].producer == l.seq and r not in merged]
        if len(outputs) != 1:
            continue
        c = regions[outputs[0]]
        aid = l.reads[0]  # self; an earlier fold's output when the chain goes on
        a = regions[merged.get(aid, aid)]
        if (a.producer is not None and a.bytes == c.bytes and a.last_access == l.seq
                and a.free_seq == l.seq + 1):
            merged[c.id] = a.id
            # The operand's own free (recorded under its id, which may be an earlier fold's
            # output) and the output's allocation never happen in eager PyTorch.
            dropped_events.update({("alloc", c.id), ("free", aid)})
            a.free_seq, a.last_access = c.free_seq, c.last_access
            a.written.extend([l.seq, *c.written])
            c.folded = True
    if not merged:
        return

    def resolve(r: int) -> int:
        while r in merged:
            r = merged[r]
        return r

    for l in launches:
        l.regions = list(dict.fromkeys(resolve(r) for r in l.regions))
        l.reads = list(dict.fromkeys(resolve(r) for r in l.reads))
    events = []
    for kind, rid, nbytes in rec.events:
        if (kind, rid) in dropped_events:
            dropped_events.discard((kind, rid))
            continue
        events.append((kind, resolve(rid), nbytes))
    rec.events = events


def annotate_recompute(rec: Recording) -> None:
    """Marks forward activations recomputable from the launch that produced them, at that launch's
    cost (what a framework's recomputation callback would rerun), where that is sound: neither the
    activation nor its sources are written between the producer and the activation's last use,
    and every source is still alive then."""
    launches, regions = rec.launches, rec.regions
    for r in regions:
        if (r.folded or r.producer is None or launches[r.producer].phase != "forward"
                or r.last_access < 0):
            continue
        p = launches[r.producer]
        end = r.last_access
        if any(p.seq < w <= end for w in r.written):
            continue
        # State the producer updates as a side effect (batch norm's running statistics) is no input
        # of the recomputation.
        sources = [s for s in p.reads if s != r.id and p.seq not in regions[s].written]
        ok = True
        for sid in sources:
            s = regions[sid]
            if any(p.seq < w <= end for w in s.written) or (
                    s.free_seq is not None and s.free_seq <= end):
                ok = False
                break
        if ok:
            r.recompute = {"cost_us": p.dur_us, "sources": sources}
