"""Predictions from a recorded trace: gswapctl simulate under budgets, with and without
recomputation, and the largest batch that fits a budget within a slowdown."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Callable, Optional

from .. import _paths
from .record import Trace


@dataclass
class Prediction:
    budget_bytes: int
    feasible: bool
    step_time_us: float
    ideal_step_time_us: float
    swapped_out_bytes: int = 0
    recomputed_bytes: int = 0
    error: str = ""

    @property
    def slowdown(self) -> float:
        """Step time over the ideal step; inf where the plan cannot run. An iteration of launches
        that take no time runs at 1.0 when it runs in no time too."""
        if not self.feasible:
            return float("inf")
        if self.ideal_step_time_us <= 0:
            return 1.0 if self.step_time_us <= 0 else float("inf")
        return self.step_time_us / self.ideal_step_time_us


def _budget_text(budget) -> str:
    """A budget as gswapctl reads it: a string ('50%', '6GiB') or whole bytes (an int)."""
    if isinstance(budget, bool) or not isinstance(budget, (str, int)):
        raise TypeError(f"a budget is a string such as '50%' or '6GiB', or bytes as an int, not "
                        f"{type(budget).__name__}")
    if isinstance(budget, int):
        if budget <= 0:
            raise ValueError(f"a budget of {budget} bytes: it must be above 0 bytes")
        return str(budget)
    return budget


def simulate(trace_path: str, budget, recompute: bool, search_ms: float = 200) -> Prediction:
    """One `gswapctl simulate` run: the plan gswapd would make (Capuchin, improved by the search).
    budget: a string gswapctl reads ('50%' of the trace's peak, '6GiB') or bytes as an int."""
    cmd = [_paths.gswapctl(), "simulate", "--trace", trace_path, "--budget", _budget_text(budget),
           "--policy", "capuchin", "--json", "--search-ms", str(search_ms)]
    if not recompute:
        cmd.append("--no-recompute")
    p = subprocess.run(cmd, capture_output=True, text=True)
    line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    try:
        j = json.loads(line)
    except json.JSONDecodeError:
        said = (p.stderr.strip() or p.stdout.strip() or f"status {p.returncode}").splitlines()[0]
        raise RuntimeError(f"gswapctl simulate failed: {said}")
    return Prediction(j["budget_bytes"], bool(j["feasible"]), j["step_time_us"],
                      j["ideal_step_time_us"], j.get("swapped_out_bytes", 0),
                      j.get("recomputed_bytes", 0), j.get("error", ""))


class SavedTrace:
    """A trace written to a file for gswapctl (a temporary one unless a path is given)."""

    def __init__(self, trace: Trace, path: Optional[str] = None):
        self.trace = trace
        self.temporary = path is None
        if path is None:
            fd, path = tempfile.mkstemp(prefix="gswap-whatif-", suffix=".json")
            os.close(fd)
        self.path = path
        try:
            trace.save(path)
        except BaseException:  # a trace that cannot be written, or an interrupt: no file left
            self.close()
            raise

    def close(self) -> None:
        if self.temporary and os.path.exists(self.path):
            os.unlink(self.path)

    def __enter__(self) -> "SavedTrace":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class BudgetRow:
    budget: str
    swap_only: Prediction
    hybrid: Prediction


def budget_table(trace: Trace, budgets: list, trace_path: Optional[str] = None,
                 search_ms: float = 200, progress: bool = True) -> list[BudgetRow]:
    """Swap-only and hybrid predictions per budget: each a string gswapctl reads ('50%', '6GiB')
    or bytes as an int."""
    if isinstance(budgets, (str, bytes, int)):
        raise TypeError("budgets: a list of budgets such as ['50%', '6GiB'], not one "
                        f"{type(budgets).__name__}")
    budgets = list(budgets)
    for b in budgets:
        _budget_text(b)  # checked before anything is simulated
    rows = []
    with SavedTrace(trace, trace_path) as saved:
        it = budgets
        if progress:
            from tqdm.auto import tqdm
            it = tqdm(budgets, desc="simulating", unit=" budgets", leave=False)
        for b in it:
            rows.append(BudgetRow(str(b), simulate(saved.path, b, False, search_ms),
                                  simulate(saved.path, b, True, search_ms)))
    return rows


@dataclass
class BatchFit:
    batch: int
    peak_bytes: int
    prediction: Optional[Prediction]  # None: fits without swapping
    # The search stopped at its limit with this batch still fitting: the largest is at least it.
    at_limit: bool = False


def largest_batch(record_at: Callable[[int], Trace], budget_bytes: int, max_slowdown: float,
                  start: int, limit: int = 1 << 16, search_ms: float = 200,
                  progress: bool = True) -> dict[str, Optional[BatchFit]]:
    """The largest batch whose iteration fits `budget_bytes`: without gswap (peak live bytes within
    the budget), with swap-only plans and with hybrid plans (slowdown at most `max_slowdown`).
    Searches by doubling from `start`, then bisecting; assumes larger batches never fit better.
    Batches above `limit` (or `start`, when larger) are not tried: a batch that fits there is
    returned with `at_limit`."""
    if isinstance(budget_bytes, bool) or not isinstance(budget_bytes, int) or budget_bytes <= 0:
        raise TypeError(f"budget_bytes: bytes as an int above 0, not {budget_bytes!r} "
                        "(gswap.whatif.parse_size reads '24GiB')")
    limit = max(limit, start)
    cache: dict[int, tuple[Trace, dict[str, Prediction]]] = {}
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(desc="batch search", unit=" batches", leave=False)

    def probe(batch: int) -> tuple[Trace, dict[str, Prediction]]:
        if batch not in cache:
            trace = record_at(batch)
            preds: dict[str, Prediction] = {}
            if trace.peak_bytes > budget_bytes:
                with SavedTrace(trace) as saved:
                    for mode, recompute in (("swap-only", False), ("hybrid", True)):
                        preds[mode] = simulate(saved.path, str(budget_bytes), recompute, search_ms)
            cache[batch] = (trace, preds)
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(f"batch {batch}")
        return cache[batch]

    def fits(batch: int, mode: str) -> bool:
        trace, preds = probe(batch)
        if trace.peak_bytes <= budget_bytes:
            return True
        if mode == "without gswap":
            return False
        p = preds[mode]
        return p.feasible and p.slowdown <= max_slowdown

    result: dict[str, Optional[BatchFit]] = {}
    try:
        for mode in ("without gswap", "swap-only", "hybrid"):
            lo, hi = 0, None  # lo fits (0: nothing found yet), hi does not
            b = max(1, start)
            while b <= limit:
                if fits(b, mode):
                    lo = b
                    b *= 2
                else:
                    hi = b
                    break
            if hi is None:
                hi = limit + 1
            if lo == 0:  # even `start` does not fit: search below it
                lo_b, hi_b = 0, min(hi, max(1, start))
                while hi_b - lo_b > 1:
                    mid = (lo_b + hi_b) // 2
                    if fits(mid, mode):
                        lo_b = mid
                    else:
                        hi_b = mid
                lo = lo_b
            else:
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    if fits(mid, mode):
                        lo = mid
                    else:
                        hi = mid
            if lo == 0:
                result[mode] = None
            else:
                trace, preds = probe(lo)
                result[mode] = BatchFit(lo, trace.peak_bytes,
                                        preds.get(mode) if mode != "without gswap" else None,
                                        at_limit=lo == limit)
    finally:
        if bar is not None:
            bar.close()
    return result
