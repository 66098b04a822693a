"""Will it fit, and how much slower? Predictions for a PyTorch training step under a memory budget,
on a machine without a GPU.

    import torch, gswap.whatif as whatif
    trace = whatif.record(model, make_batch, torch.nn.functional.cross_entropy,
                          batch_size=64, gpu="h100")
    for row in whatif.budget_table(trace, ["100%", "75%", "50%"]):
        print(row.budget, row.swap_only.slowdown, row.hybrid.slowdown)

record() runs one training iteration on the meta device and writes what a GPU would do as a
gswap-trace; budget_table() and largest_batch() ask gswapctl's simulator (the planner gswapd runs)
what that iteration costs under a budget.
"""

from .gpus import GPU, PRESETS, parse_gpu, parse_size

__all__ = ["GPU", "PRESETS", "parse_gpu", "parse_size", "Trace", "TrainingStep", "record",
           "default_optimizer", "Prediction", "BudgetRow", "BatchFit", "budget_table",
           "largest_batch", "simulate"]

# Recording and predicting need PyTorch, an optional dependency: without it the package still
# imports (`gswap whatif --help` runs), and those names say what is missing when used.
try:
    from .predict import BatchFit, BudgetRow, Prediction, budget_table, largest_batch, simulate
    from .record import Trace, TrainingStep, default_optimizer, record
except ModuleNotFoundError as _e:
    if (_e.name or "").split(".")[0] != "torch":
        raise
    _missing = str(_e)

    def __getattr__(name: str):
        if name in __all__:
            raise ModuleNotFoundError(f"gswap.whatif.{name} needs PyTorch ({_missing}): "
                                      "pip install 'gswap[whatif]'", name="torch")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
