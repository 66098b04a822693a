#!/usr/bin/env python3
"""pytorch_train.py: deterministic PyTorch training runs for gswap's GPU validation (issue 6).

Runs ResNet-50 (torchvision, no weights) or a GPT-2-style transformer (built here from torch.nn) on
synthetic data, with the settings gswap needs and the determinism a bitwise comparison needs:
  - PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync, so every tensor is one driver allocation;
  - torch.use_deterministic_algorithms(True), CUBLAS_WORKSPACE_CONFIG, fixed seeds, data drawn
    from a seeded generator per step;
  - every step's loss printed exactly (float.hex), so two runs compare bit for bit.

It prints JSON lines on stdout: one {"event": "step", ...} per step and one {"event": "summary"}
at the end (status "ok" or "oom"; exit code 0 or 3). Modes and options:
  train (default)          --model, --batch, --steps, --warmup
  baselines                --save-on-cpu (torch.autograd.graph.save_on_cpu(pin_memory=True)),
                           --checkpoint (torch.utils.checkpoint per block),
                           --budget BYTES (torch.cuda.set_per_process_memory_fraction of it)
  --max-batch-search       doubling then bisecting the batch, one subprocess per trial so that an
                           OOM cannot poison the next trial; --gswap-lib/--gswap-budget run the
                           trials under LD_PRELOAD, --budget under the memory fraction instead;
                           --search-seconds S stops it after S seconds with the largest batch
                           known to fit and "complete": false in its max_batch line
  --compare A B            bitwise comparison of the losses in two JSON-lines outputs
  --self-test              checks the logic that needs no torch (search, parsing, comparison)

torch is imported only by the modes that train, so --help, --compare and --self-test run on any
machine with python3.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

OOM_EXIT = 3


# ----------------------------------------------------------------------------------------------
# Helpers that need no torch (covered by --self-test).


def parse_size(text):
    """Bytes from a size read as the library reads GSWAP_BUDGET: K/M/G/T alone or with "iB" are
    binary units (8GiB = 8 << 30), with "B" decimal ones (1.5GB = 1.5e9); no unit means bytes."""
    s = str(text).strip()
    i = 0
    while i < len(s) and (s[i].isdigit() or s[i] == "."):
        i += 1
    num, unit = s[:i], s[i:].strip()
    try:
        value = float(num)
    except ValueError:
        raise ValueError("bad size %r" % text) from None
    mul = 1
    if unit:
        power = "KMGT".find(unit[0].upper()) + 1
        rest = unit[1:]
        if power == 0 or rest not in ("", "iB", "B"):
            raise ValueError("bad size %r" % text)
        mul = (1000 if rest == "B" else 1024) ** power
    return int(value * mul)


def parse_json_lines(text):
    """The JSON objects among the lines of a run's stdout; other lines (library logs) are skipped."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def summary_of(records):
    """The last summary record, or None."""
    found = None
    for r in records:
        if r.get("event") == "summary":
            found = r
    return found


def losses_of(records):
    """The per-step losses as hex strings, in step order."""
    steps = sorted((r for r in records if r.get("event") == "step"), key=lambda r: r["step"])
    return [r["loss_hex"] for r in steps]


def compare_losses(a, b):
    """Bitwise comparison of two loss lists: (equal, first differing step or None, compared)."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return False, i, n
    if len(a) != len(b):
        return False, n, n
    return True, None, n


class SearchCutOff(Exception):
    """Raised by a search's fits() when its time is up: the search stops where it is."""


def max_batch_search(fits, start, limit, resolution=1):
    """Largest batch in [1, limit] for which fits(batch) is true, assuming fits is monotone.

    Doubles from `start` until a trial fails (or `limit` is reached), then bisects between the
    last success and the first failure until they are `resolution` apart. Returns (best, trials,
    fails_at) where trials lists (batch, ok) in the order run, best is 0 when nothing fits, and
    fails_at is the smallest batch known not to fit (None when none failed). When fits raises
    SearchCutOff the search stops: best is then the largest batch known to fit, a lower bound,
    and the search is complete only if fails_at - best <= resolution or best == limit.
    """
    trials = []
    known = {"lo": 0, "hi": None}  # lo fits (0: none known), hi fails (None: none known)

    def run(b):
        ok = bool(fits(b))
        trials.append((b, ok))
        if ok:
            known["lo"] = max(known["lo"], b)
        else:
            known["hi"] = b if known["hi"] is None else min(known["hi"], b)
        return ok

    def search():
        b = max(1, min(start, limit))
        while run(b):
            if b >= limit:
                return
            b = min(b * 2, limit)
        # Bisects between what is known (run keeps it), from 0 if even the first trial failed.
        while known["hi"] - known["lo"] > resolution:
            mid = (known["lo"] + known["hi"]) // 2
            if mid < 1:
                break
            run(mid)

    try:
        search()
    except SearchCutOff:
        pass
    return known["lo"], trials, known["hi"]


def search_complete(best, fails_at, limit, resolution=1):
    """Whether a search's result is its boundary (not a lower bound of a search cut off)."""
    if best >= limit:
        return True
    if fails_at is None:
        return False
    return fails_at - best <= resolution


def median(values):
    return statistics.median(values) if values else float("nan")


def emit(obj):
    print(json.dumps(obj, sort_keys=True), flush=True)


# ----------------------------------------------------------------------------------------------
# Training (needs torch and a GPU).


def set_determinism_env(args):
    # These must be set before torch initialises CUDA.
    if args.allocator == "cudaMallocAsync":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def build_gpt(torch, nn, args):
    F = torch.nn.functional

    class Attention(nn.Module):
        # Written out instead of scaled_dot_product_attention: its fused backward kernels are not
        # all deterministic, and the bitwise comparison needs them to be.
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(x).split(d, dim=2)
            shape = (b, t, self.heads, d // self.heads)
            q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, d)
            return self.proj(y)

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.attn = Attention(d, heads)
            self.ln2 = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self, vocab, seq, d, layers, heads):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(seq, d)
            self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.checkpoint = False

        def forward(self, idx, targets):
            t = idx.shape[1]
            x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
            for blk in self.blocks:
                if self.checkpoint:
                    x = torch.utils.checkpoint.checkpoint(blk, x, use_reentrant=False)
                else:
                    x = blk(x)
            logits = self.head(self.ln(x))
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    return GPT(args.vocab, args.seq_len, args.width, args.layers, args.heads)


def build_resnet(torch, nn, args):
    import torchvision

    model = torchvision.models.resnet50(weights=None)

    class GlobalAvgPool(nn.Module):
        # AdaptiveAvgPool2d's CUDA backward has no deterministic implementation (it raises under
        # use_deterministic_algorithms); for a 1x1 output it is a mean, whose backward is.
        def forward(self, x):
            return x.mean(dim=(2, 3), keepdim=True)

    model.avgpool = GlobalAvgPool()
    if args.checkpoint:
        ckpt = torch.utils.checkpoint.checkpoint

        class Checkpointed(nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, x):
                return ckpt(self.inner, x, use_reentrant=False)

        for name in ("layer1", "layer2", "layer3", "layer4"):
            layer = getattr(model, name)
            for i in range(len(layer)):
                layer[i] = Checkpointed(layer[i])
    return model


def train(args):
    set_determinism_env(args)
    import torch
    import torch.nn as nn
    import torch.utils.checkpoint  # noqa: F401  (makes torch.utils.checkpoint available)

    torch.manual_seed(args.seed)
    torch.cuda.manual_seed_all(args.seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")

    free0, total = torch.cuda.mem_get_info()
    if args.budget:
        frac = min(1.0, parse_size(args.budget) / total)
        torch.cuda.set_per_process_memory_fraction(frac)

    if args.model == "resnet50":
        model = build_resnet(torch, nn, args).to(dev)
        criterion = nn.CrossEntropyLoss()

        def step_loss(gen):
            x = torch.randn(args.batch, 3, args.image, args.image, device=dev, generator=gen)
            y = torch.randint(0, 1000, (args.batch,), device=dev, generator=gen)
            return criterion(model(x), y)

    else:
        model = build_gpt(torch, nn, args).to(dev)
        model.checkpoint = args.checkpoint

        def step_loss(gen):
            idx = torch.randint(0, args.vocab, (args.batch, args.seq_len), device=dev, generator=gen)
            tgt = torch.randint(0, args.vocab, (args.batch, args.seq_len), device=dev, generator=gen)
            return model(idx, tgt)

    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    gen = torch.Generator(device=dev)
    step_ms = []
    driver_used_peak = total - free0
    base = {"model": args.model, "batch": args.batch, "save_on_cpu": args.save_on_cpu,
            "checkpoint": args.checkpoint, "budget": args.budget or "",
            "gswap": "libgswap" in os.environ.get("LD_PRELOAD", ""),
            "gswap_budget": os.environ.get("GSWAP_BUDGET", ""),
            "allocator": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "native"),
            "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "total_bytes": total}
    status = "ok"
    error = ""
    steps_done = 0
    try:
        for step in range(args.steps):
            gen.manual_seed(args.seed * 1000003 + step)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            if args.save_on_cpu:
                with torch.autograd.graph.save_on_cpu(pin_memory=True):
                    loss = step_loss(gen)
                    loss.backward()
            else:
                loss = step_loss(gen)
                loss.backward()
            opt.step()
            value = loss.item()  # synchronises
            torch.cuda.synchronize()
            ms = (time.perf_counter() - t0) * 1e3
            free, _ = torch.cuda.mem_get_info()
            driver_used_peak = max(driver_used_peak, total - free)
            if step >= args.warmup:
                step_ms.append(ms)
            steps_done += 1
            emit({"event": "step", "step": step, "loss_hex": float(value).hex(), "loss": value,
                  "step_ms": round(ms, 3)})
    except torch.cuda.OutOfMemoryError as e:
        status, error = "oom", str(e).splitlines()[0][:300]
    except RuntimeError as e:
        msg = str(e)
        if "out of memory" in msg.lower() or "OUT_OF_MEMORY" in msg:
            status, error = "oom", msg.splitlines()[0][:300]
        else:
            raise
    try:
        peak_alloc = torch.cuda.max_memory_allocated()
    except RuntimeError:  # not every allocator backend keeps the statistic
        peak_alloc = -1
    summary = dict(base)
    summary.update({"event": "summary", "status": status, "error": error, "steps": steps_done,
                    "step_ms_median": round(median(step_ms), 3) if step_ms else None,
                    "step_ms_mean": round(statistics.fmean(step_ms), 3) if step_ms else None,
                    "max_memory_allocated": peak_alloc, "driver_used_peak": driver_used_peak})
    emit(summary)
    return 0 if status == "ok" else OOM_EXIT


# ----------------------------------------------------------------------------------------------
# Max-batch search: one subprocess per trial.


def trial_command(args, batch):
    cmd = [sys.executable, os.path.abspath(__file__), "--model", args.model, "--batch", str(batch),
           "--steps", str(args.trial_steps), "--warmup", "1", "--seed", str(args.seed)]
    for flag in ("save_on_cpu", "checkpoint"):
        if getattr(args, flag):
            cmd.append("--" + flag.replace("_", "-"))
    if args.budget:
        cmd += ["--budget", args.budget]
    if args.model == "gpt2":
        cmd += ["--seq-len", str(args.seq_len), "--layers", str(args.layers), "--width",
                str(args.width), "--heads", str(args.heads), "--vocab", str(args.vocab)]
    else:
        cmd += ["--image", str(args.image)]
    return cmd


def trial_env(args):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if args.gswap_lib:
        env["LD_PRELOAD"] = os.path.abspath(args.gswap_lib)
        env["GSWAP_BUDGET"] = args.gswap_budget
    return env


def search(args):
    deadline = time.time() + args.search_seconds if args.search_seconds > 0 else None

    def fits(batch):
        # A trial the search's time would cut short is not started: its answer would be unknown.
        timeout = args.trial_timeout
        if deadline is not None:
            left = deadline - time.time()
            if left <= 0:
                raise SearchCutOff()
            timeout = min(timeout, left)
        cmd = trial_command(args, batch)
        t0 = time.time()
        cut = False
        try:
            p = subprocess.run(cmd, env=trial_env(args), capture_output=True, text=True,
                               timeout=timeout)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            cut = timeout < args.trial_timeout
            rc, out, err = -1, e.stdout or "", "timeout after %.0fs" % timeout
            if isinstance(out, bytes):
                out = out.decode(errors="replace")
        s = summary_of(parse_json_lines(out))
        ok = rc == 0 and s is not None and s.get("status") == "ok"
        emit({"event": "trial", "batch": batch, "ok": ok, "rc": rc,
              "status": "cut off" if cut else (s.get("status") if s else None),
              "step_ms_median": s.get("step_ms_median") if s else None,
              "seconds": round(time.time() - t0, 1),
              "stderr_tail": "" if ok else err[-400:]})
        if cut:
            raise SearchCutOff()  # stopped by the search's time, not by a failure
        return ok

    best, trials, fails_at = max_batch_search(fits, args.start_batch, args.max_batch,
                                              args.resolution)
    emit({"event": "max_batch", "model": args.model, "max_batch": best, "trials": len(trials),
          "complete": search_complete(best, fails_at, args.max_batch, args.resolution),
          "fails_at": fails_at,
          "gswap": bool(args.gswap_lib), "gswap_budget": args.gswap_budget if args.gswap_lib else "",
          "budget": args.budget or "", "save_on_cpu": args.save_on_cpu,
          "checkpoint": args.checkpoint})
    return 0


# ----------------------------------------------------------------------------------------------
# Comparison of two runs.


def compare(path_a, path_b):
    with open(path_a) as fa, open(path_b) as fb:
        ra, rb = parse_json_lines(fa.read()), parse_json_lines(fb.read())
    la, lb = losses_of(ra), losses_of(rb)
    equal, first, n = compare_losses(la, lb)
    out = {"event": "compare", "a": path_a, "b": path_b, "equal": equal and n > 0, "steps": n,
           "first_difference": first}
    if first is not None and first < min(len(la), len(lb)):
        out["a_loss"], out["b_loss"] = la[first], lb[first]
    emit(out)
    return 0 if out["equal"] else 1


# ----------------------------------------------------------------------------------------------
# Self-test of the torch-free logic.


def self_test():
    import unittest

    class T(unittest.TestCase):
        def test_search_finds_the_boundary(self):
            for limit_fit in (1, 2, 3, 37, 64, 100, 255, 256, 1000):
                calls = []

                def fits(b, lf=limit_fit):
                    calls.append(b)
                    return b <= lf

                best, trials, _ = max_batch_search(fits, 8, 4096)
                self.assertEqual(best, limit_fit)
                self.assertEqual(len(trials), len(calls))
                self.assertEqual(len(set(calls)), len(calls), "no batch is tried twice")
                self.assertLess(len(calls), 30)

        def test_search_doubles_first(self):
            _, trials, _ = max_batch_search(lambda b: b <= 100, 8, 4096)
            self.assertEqual([b for b, _ in trials[:5]], [8, 16, 32, 64, 128])

        def test_search_nothing_fits(self):
            best, _, fails_at = max_batch_search(lambda b: False, 8, 4096)
            self.assertEqual(best, 0)
            self.assertEqual(fails_at, 1)
            self.assertTrue(search_complete(best, fails_at, 4096))

        def test_search_stops_at_limit(self):
            best, trials, fails_at = max_batch_search(lambda b: True, 8, 100)
            self.assertEqual(best, 100)
            self.assertEqual(trials[-1], (100, True))
            self.assertIsNone(fails_at)
            self.assertTrue(search_complete(best, fails_at, 100))

        def test_search_resolution(self):
            best, trials, fails_at = max_batch_search(lambda b: b <= 1000, 8, 4096, resolution=16)
            self.assertLessEqual(best, 1000)
            self.assertGreater(best, 1000 - 16)
            # 8 doublings (8..1024), then 5 halvings of the 512-wide gap down to 16.
            self.assertEqual(len(trials), 13)
            self.assertTrue(search_complete(best, fails_at, 4096, 16))
            _, exact, _ = max_batch_search(lambda b: b <= 1000, 8, 4096)
            self.assertGreater(len(exact), len(trials))

        def test_search_cut_off_keeps_what_it_knows(self):
            # The 11-28 H200 run: 16..512 fit, 1024 fails, 768 fits, 896 fails, then time is up.
            answers = iter([True] * 6 + [False, True, False])

            def fits(b):
                a = next(answers, None)
                if a is None:
                    raise SearchCutOff()
                return a

            best, trials, fails_at = max_batch_search(fits, 16, 2048, resolution=8)
            self.assertEqual((best, fails_at), (768, 896))
            self.assertEqual([b for b, _ in trials], [16, 32, 64, 128, 256, 512, 1024, 768, 896])
            self.assertFalse(search_complete(best, fails_at, 2048, 8))

        def test_search_cut_off_while_doubling(self):
            def fits(b):
                if b > 64:
                    raise SearchCutOff()
                return True

            best, trials, fails_at = max_batch_search(fits, 16, 2048)
            self.assertEqual((best, fails_at, len(trials)), (64, None, 3))
            self.assertFalse(search_complete(best, fails_at, 2048))

        def test_parse_size(self):
            self.assertEqual(parse_size("8GiB"), 8 << 30)
            self.assertEqual(parse_size("512MiB"), 512 << 20)
            self.assertEqual(parse_size("1.5G"), 3 << 29)
            self.assertEqual(parse_size("1024"), 1024)
            self.assertEqual(parse_size("1.5GB"), 1500000000)
            self.assertEqual(parse_size("4K"), 4096)
            self.assertEqual(parse_size(" 512 MiB "), 512 << 20)
            for bad in ("", "x", "5Q", "-1G", "12GiBs", "GiB"):
                with self.assertRaises(ValueError):
                    parse_size(bad)

        def test_parse_json_lines_skips_other_output(self):
            text = ("gswap: peak resident 1.0 GiB ...\n"
                    '{"event": "step", "step": 1, "loss_hex": "0x1.8p+0"}\n'
                    "{broken\n"
                    '{"event": "step", "step": 0, "loss_hex": "0x1.0p+1"}\n'
                    '[1, 2]\n'
                    '{"event": "summary", "status": "oom"}\n')
            recs = parse_json_lines(text)
            self.assertEqual(len(recs), 3)
            self.assertEqual(losses_of(recs), ["0x1.0p+1", "0x1.8p+0"])
            self.assertEqual(summary_of(recs)["status"], "oom")
            self.assertIsNone(summary_of(recs[:2]))

        def test_compare_losses(self):
            a = [float(x).hex() for x in (2.5, 2.25, 2.0)]
            self.assertEqual(compare_losses(a, list(a)), (True, None, 3))
            b = list(a)
            b[1] = float(2.25 + 2 ** -40).hex()  # one ulp-level difference must count
            self.assertEqual(compare_losses(a, b), (False, 1, 3))
            self.assertEqual(compare_losses(a, a[:2]), (False, 2, 2))

        def test_trial_command_round_trips(self):
            args = build_parser().parse_args(["--model", "gpt2", "--checkpoint", "--budget", "8GiB",
                                              "--max-batch-search"])
            cmd = trial_command(args, 48)
            child = build_parser().parse_args(cmd[2:])
            self.assertEqual(child.batch, 48)
            self.assertTrue(child.checkpoint)
            self.assertFalse(child.max_batch_search)
            self.assertEqual(child.budget, "8GiB")
            args.gswap_lib = "/x/libgswap.so"
            self.assertEqual(trial_env(args)["LD_PRELOAD"], "/x/libgswap.so")

        def test_search_runs_each_trial_in_a_subprocess(self):
            import contextlib
            import io
            from unittest import mock

            seen = []

            def fake_run(cmd, env, capture_output, text, timeout):
                batch = int(cmd[cmd.index("--batch") + 1])
                seen.append((batch, env.get("LD_PRELOAD"), env.get("GSWAP_BUDGET")))
                if batch == 64:  # a hung trial counts as a failure, not a crash of the search
                    raise subprocess.TimeoutExpired(cmd, timeout, output=b"")
                if batch <= 40:
                    out = '{"event": "summary", "status": "ok", "step_ms_median": 1.0}\n'
                    return subprocess.CompletedProcess(cmd, 0, out, "")
                out = 'gswap: log line\n{"event": "summary", "status": "oom"}\n'
                return subprocess.CompletedProcess(cmd, OOM_EXIT, out, "CUDA out of memory")

            args = build_parser().parse_args(["--max-batch-search", "--start-batch", "8",
                                              "--gswap-lib", "/x/libgswap.so",
                                              "--gswap-budget", "8GiB"])
            buf = io.StringIO()
            with mock.patch.object(subprocess, "run", fake_run), contextlib.redirect_stdout(buf):
                self.assertEqual(search(args), 0)
            recs = parse_json_lines(buf.getvalue())
            result = [r for r in recs if r["event"] == "max_batch"][-1]
            self.assertEqual(result["max_batch"], 40)
            self.assertTrue(result["gswap"])
            trials = [r for r in recs if r["event"] == "trial"]
            self.assertEqual([t["batch"] for t in trials], [b for b, _, _ in seen])
            self.assertEqual([t["batch"] for t in trials[:4]], [8, 16, 32, 64])
            self.assertFalse([t for t in trials if t["batch"] == 64][0]["ok"])
            self.assertTrue(all(lib == "/x/libgswap.so" and b == "8GiB" for _, lib, b in seen))

    suite = unittest.defaultTestLoader.loadTestsFromTestCase(T)
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
    return 0 if result.wasSuccessful() else 1


# ----------------------------------------------------------------------------------------------


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=("resnet50", "gpt2"), default="resnet50")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3, help="steps left out of the step time")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--allocator", choices=("cudaMallocAsync", "native"), default="cudaMallocAsync",
                   help="PyTorch allocator backend (gswap needs cudaMallocAsync)")
    p.add_argument("--save-on-cpu", action="store_true",
                   help="baseline: torch.autograd.graph.save_on_cpu(pin_memory=True)")
    p.add_argument("--checkpoint", action="store_true",
                   help="baseline: torch.utils.checkpoint per block")
    p.add_argument("--budget", default="",
                   help="cap PyTorch at this many bytes with set_per_process_memory_fraction")
    p.add_argument("--image", type=int, default=224, help="ResNet-50 input size")
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50257)
    g = p.add_argument_group("max-batch search")
    g.add_argument("--max-batch-search", action="store_true")
    g.add_argument("--start-batch", type=int, default=16)
    g.add_argument("--max-batch", type=int, default=4096)
    g.add_argument("--resolution", type=int, default=1,
                   help="stop bisecting when success and failure are this close")
    g.add_argument("--trial-steps", type=int, default=3)
    g.add_argument("--trial-timeout", type=int, default=240)
    g.add_argument("--search-seconds", type=float, default=0,
                   help="start no trial after this many seconds, and cut a trial short at that "
                        "time; the result is then the largest batch known to fit, with "
                        "complete: false (default 0: no limit)")
    g.add_argument("--gswap-lib", default="", help="run the trials under LD_PRELOAD of this library")
    g.add_argument("--gswap-budget", default="8GiB", help="GSWAP_BUDGET of the gswap trials")
    p.add_argument("--compare", nargs=2, metavar=("A", "B"),
                   help="compare the losses of two JSON-lines outputs bitwise")
    p.add_argument("--self-test", action="store_true", help="test the torch-free logic and exit")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.self_test:
        return self_test()
    if args.compare:
        return compare(*args.compare)
    if args.max_batch_search:
        return search(args)
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
