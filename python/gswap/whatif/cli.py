"""`gswap whatif`: record a model's training iteration on the meta device and print its predicted
step time under memory budgets, and the largest batch that fits a budget."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys

from .. import _paths

GiB = 1 << 30


def _size(b: float) -> str:
    return f"{b / GiB:.1f} GiB" if b >= GiB else f"{b / (1 << 20):.1f} MiB"


def _ms(us: float) -> str:
    return f"{us / 1000:.1f} ms"


def _cell(p) -> str:
    if not p.feasible:
        return "does not fit"
    return f"{_ms(p.step_time_us)} {p.slowdown:5.2f}x"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="gswap whatif",
        description="Predict a training step's time under GPU memory budgets, without a GPU: one "
                    "iteration is recorded on PyTorch's meta device and planned and simulated as "
                    "gswapd would.")
    ap.add_argument("--model", required=True,
                    help="torchvision:NAME (resnet50, vit_b_16, ...) or gpt:layers=12,hidden=768,"
                         "heads=12,seq=1024,vocab=50257,dropout=0.1")
    ap.add_argument("--batch", type=int, required=True, help="batch size")
    ap.add_argument("--gpu", default="h100",
                    help="h100, h200, a100, a preset with changes (h100:link_gbps=25) or "
                         "custom:memory=24GiB,bf16_tflops=..,tf32_tflops=..,fp32_tflops=..,"
                         "hbm_tbps=..,link_gbps=.. (default: h100)")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32",
                    help="precision the model runs in (default fp32)")
    ap.add_argument("--optimizer", choices=["adamw", "adam", "sgd"], default="adamw")
    ap.add_argument("--image-size", type=int, help="torchvision models: input height and width "
                                                    "(default 224)")
    ap.add_argument("--budgets", default="100%,90%,75%,60%,50%,40%,30%",
                    help="comma-separated budgets: percentages of the peak or sizes (40GiB)")
    ap.add_argument("--fit", metavar="BUDGET",
                    help="also find the largest batch that fits this budget (a size such as 40GiB, "
                         "or 'gpu': the GPU's memory less its reserve)")
    ap.add_argument("--max-slowdown", type=float, default=1.10,
                    help="with --fit: the slowdown against unlimited memory that is acceptable "
                         "(default 1.10)")
    ap.add_argument("--trace", metavar="FILE", help="keep the recorded trace (gswap-trace JSON) "
                                                     "for gswapctl simulate")
    ap.add_argument("--search-ms", type=float, default=200,
                    help="planner search time per simulation, as gswapd (default 200)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = ap.parse_args(argv)

    import torch

    from .gpus import parse_gpu, parse_size
    from .models import parse_model

    def refuse(why: str) -> int:
        print(f"gswap whatif: {why}", file=sys.stderr)
        return 2

    # Everything that can be checked is, before the model is recorded.
    if args.batch < 1:
        return refuse("--batch must be at least 1")
    if args.image_size is not None and args.image_size < 1:
        return refuse("--image-size must be at least 1")
    if not math.isfinite(args.max_slowdown) or args.max_slowdown < 1:
        return refuse(f"--max-slowdown must be a finite number of at least 1, not {args.max_slowdown}")
    if not math.isfinite(args.search_ms) or args.search_ms < 0:
        return refuse(f"--search-ms must be a finite number of milliseconds, 0 or more, not "
                      f"{args.search_ms}")
    if args.trace and (os.path.isdir(args.trace) or
                       not os.path.isdir(os.path.dirname(os.path.abspath(args.trace)))):
        return refuse(f"--trace {args.trace}: not a file in an existing directory")
    try:
        _paths.gswapctl()  # it plans and simulates the recorded iteration
    except FileNotFoundError as e:
        return refuse(str(e))
    try:
        for b in (b.strip() for b in args.budgets.split(",")):
            if not b:
                continue
            if b.endswith("%"):
                # As gswapctl reads a percentage: digits and a decimal point, no sign, exponent
                # or separators (float() takes '1e2', '+50', '1_0', which gswapctl refuses).
                m = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*%", b)
                pct = float(m.group(1)) if m else math.nan
                if not 0 < pct <= 100:
                    raise ValueError(f"--budgets: '{b}' is not a percentage above 0 and at most 100")
            elif parse_size(b) <= 0:
                raise ValueError(f"--budgets: '{b}' is not a budget: it must be above 0 bytes")
        gpu = parse_gpu(args.gpu)
        workload = parse_model(args.model, args.image_size)
        fit_budget = None
        if args.fit:
            fit_budget = (gpu.memory_bytes - gpu.reserved_bytes if args.fit == "gpu"
                          else parse_size(args.fit))
            if fit_budget <= 0:
                return refuse(f"--fit {args.fit}: the budget must be above 0 bytes")
    except ValueError as e:
        return refuse(str(e))
    try:
        return _run(args, torch, gpu, workload, fit_budget)
    except KeyboardInterrupt:  # Ctrl-C: one line, as the shell's convention for SIGINT
        print("gswap whatif: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # one line, not a traceback: what the model or gswapctl refused
        print(f"gswap whatif: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
              file=sys.stderr)
        return 1


def _run(args, torch, gpu, workload, fit_budget) -> int:
    from .predict import budget_table, largest_batch
    from .record import record

    dtype = torch.bfloat16 if args.dtype == "bf16" else None
    optimizers = {"adamw": lambda p: torch.optim.AdamW(p, lr=1e-4),
                  "adam": lambda p: torch.optim.Adam(p, lr=1e-4),
                  "sgd": lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9)}
    progress = not args.no_progress

    def make_batch(batch, device):
        inputs, target = workload.make_batch(batch, device)
        if dtype is not None and inputs.is_floating_point():
            inputs = inputs.to(dtype)
        return inputs, target

    def record_at(batch: int, description: str = "recording"):
        t = record(workload.model, make_batch, workload.loss, optimizers[args.optimizer],
                   batch_size=batch, gpu=gpu, dtype=dtype, progress=progress,
                   description=description)
        t.info.update({"model": args.model, "dtype": args.dtype, "optimizer": args.optimizer})
        return t

    trace = record_at(args.batch)
    rows = budget_table(trace, [b.strip() for b in args.budgets.split(",") if b.strip()],
                        args.trace, args.search_ms, progress)
    fit = None
    if fit_budget is not None:
        fit = largest_batch(lambda b: record_at(b, f"recording batch {b}"), fit_budget,
                            args.max_slowdown, args.batch, search_ms=args.search_ms,
                            progress=progress)

    if args.json:
        out = {"model": workload.name, "batch": args.batch, "dtype": args.dtype,
               "optimizer": args.optimizer, "gpu": gpu.name, "launches": trace.launches,
               "peak_bytes": trace.peak_bytes, "ideal_step_time_us": trace.step_time_us,
               "budgets": [{"budget": r.budget, "budget_bytes": r.hybrid.budget_bytes,
                            "swap_only": vars(r.swap_only), "hybrid": vars(r.hybrid)}
                           for r in rows]}
        if fit is not None:
            out["fit"] = {"budget_bytes": fit_budget, "max_slowdown": args.max_slowdown,
                          **{mode: (None if f is None else
                                    {"batch": f.batch, "peak_bytes": f.peak_bytes,
                                     "slowdown": f.prediction.slowdown if f.prediction else 1.0,
                                     "at_limit": f.at_limit})
                             for mode, f in fit.items()}}
        if args.trace:
            out["trace"] = args.trace
        print(json.dumps(out))
        return 0

    print(f"{workload.name}, batch {args.batch}, {args.dtype}, {args.optimizer}")
    print(f"on {gpu.describe()}")
    print(f"{trace.launches} kernels, peak {_size(trace.peak_bytes)} of tensors, "
          f"{_ms(trace.step_time_us)} per step with unlimited memory")
    print()
    head = f"{'budget':>8} {'':>10}  {'swap only':>18}  {'swap + recompute':>18}"
    print(head)
    for r in rows:
        print(f"{r.budget:>8} {_size(r.hybrid.budget_bytes):>10}  {_cell(r.swap_only):>18}  "
              f"{_cell(r.hybrid):>18}")
    print("(step time, and slowdown against unlimited memory; recomputation needs a framework "
          "recompute callback)")
    if fit is not None:
        print()
        print(f"largest batch in {_size(fit_budget)} within {args.max_slowdown:.2f}x:")
        for mode, f in fit.items():
            if f is None:
                print(f"  {mode:>16}: none (not even batch 1)")
                continue
            how = (f"{f.prediction.slowdown:.2f}x" if f.prediction is not None
                   else "fits without swapping")
            least = "at least " if f.at_limit else ""
            limit = ", the search's limit" if f.at_limit else ""
            print(f"  {mode:>16}: {least}{f.batch:>6}  (peak {_size(f.peak_bytes)}, {how}{limit})")
    if args.trace:
        print(f"\ntrace written to {args.trace} (gswapctl simulate --trace {args.trace} ...)")
    return 0
