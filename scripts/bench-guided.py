#!/usr/bin/env python3
"""bench-guided.py: guided execution measured on the simulated GPU (issue 11's benchmark).

    scripts/bench-guided.py [--build DIR] [--quick] [--no-launch-bench] [--only NAME]

In one run, for each workload (minitrain, and shuffled_train with weight-sized layers) at 70%,
50% and 33% of its peak: the steady step without gswap, under passive gswap (no daemon, so no
plan) and under guided gswap (a fresh gswapd; timing starts once the library follows the plan);
host and device-side stall and bytes copied per iteration; and the simulator's prediction for the
trace the daemon captured (`gswapctl trace dump --plan-out`, then `gswapctl simulate --plan` at the
budget it planned for: the plan the library followed) next to the measured guided step, with the
prediction for a plan searched afresh from that trace beside it. Then the issue's own configuration (minitrain 12 x 256 x
4096, link 200 MB/s, 12 iterations, half its peak): passive against guided. Then both workloads
at half their peak on fast links (simcuda unthrottled, and 1 GB/s), where the simulator predicts
a step near the ideal one: guided against no gswap. Then the launch-path cost of following a plan
(gswap_launch_path_bench). Prints Markdown.

The link. simcuda's kernels run on the CPU, so its compute is thousands of times slower than an
H100's. For each workload the script measures simcuda's step without gswap on an unthrottled link
(compute alone), estimates the same step on an H100 from its kernels (each kernel takes
max(FLOPs / 60% of the TF32 tensor peak of 494.7 TFLOP/s, bytes / 78% of 3.35 TB/s, 3 us): the
model of policy/'s reference traces and `gswap whatif`), and throttles simcuda's link to
50 GB/s x (H100 step / simcuda step), so that copying a byte costs the same fraction of a step as
on an H100 with a 50 GB/s link.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

H100_TF32 = 494.7e12
H100_HBM = 3.35e12
LINK = 50e9


def kernel_s(flops, bytes_):
    return max(flops / (0.6 * H100_TF32), bytes_ / (0.78 * H100_HBM), 3e-6)


def h100_minitrain(layers, width, batch):
    """One minitrain iteration's kernels on an H100 (minitrain.cpp's kernels, fp32 as TF32)."""
    a, w, L = batch * width, width, layers
    t = L * kernel_s(2 * a * w, 4 * (2 * a + w * w + w))  # forward
    t += kernel_s(2 * a, 8 * a) + kernel_s(3 * a, 12 * a)  # loss, its gradient
    t += (L - 1) * kernel_s(a, 12 * a)  # ReLU backward
    t += L * kernel_s(2 * a * w, 4 * (2 * a + w * w))  # weight gradient
    t += L * kernel_s(a, 4 * (a + w))  # bias gradient
    t += (L - 1) * kernel_s(2 * a * w, 4 * (2 * a + w * w))  # input gradient
    t += L * (kernel_s(2 * w * w, 12 * w * w) + kernel_s(2 * w, 12 * w))  # SGD
    return t


def h100_shuffled(dims, batch):
    """One shuffled_train iteration's kernels on an H100."""
    t, L, B = 0.0, len(dims) - 1, batch
    for i in range(L):
        m, n = dims[i], dims[i + 1]
        t += kernel_s(2 * B * m * n, 4 * (B * m + m * n + n + B * n))
        if i < L - 1:
            t += kernel_s(B * n, 12 * B * n)
        t += kernel_s(2 * B * m * n, 4 * (B * m + B * n + m * n))
        t += kernel_s(B * n, 4 * (B * n + n))
        if i > 0:
            t += kernel_s(2 * B * m * n, 4 * (B * n + m * n + B * m))
        t += kernel_s(2 * m * n, 12 * m * n) + kernel_s(2 * n, 12 * n)
    a = B * dims[0]
    return t + kernel_s(2 * a, 8 * a) + kernel_s(3 * a, 12 * a)


class Bench:
    def __init__(self, build, quick):
        self.build = build
        self.quick = quick
        self.minitrain = os.path.join(build, "tests/workloads/minitrain")
        self.shuffled = os.path.join(build, "tests/workloads/shuffled_train")
        self.lib = os.path.join(build, "interpose/libgswap.so")
        self.gswapd = os.path.join(build, "bin/gswapd")
        self.gswapctl = os.path.join(build, "bin/gswapctl")
        self.lpb = os.path.join(build, "interpose/gswap_launch_path_bench")
        for f in (self.minitrain, self.shuffled, self.lib, self.gswapd, self.gswapctl):
            if not os.path.exists(f):
                sys.exit("bench-guided: %s is not built (scripts/build.sh)" % f)
        self.work = tempfile.mkdtemp(prefix="gswap-bench-guided-")
        self.env = dict(os.environ)
        simcuda = os.path.join(build, "tests/simcuda")
        self.env["LD_LIBRARY_PATH"] = simcuda + (":" + self.env["LD_LIBRARY_PATH"]
                                                 if self.env.get("LD_LIBRARY_PATH") else "")
        self.env["SIMCUDA_CAPACITY"] = "4GiB"
        for k in ("GSWAP_BUDGET", "GSWAP_DAEMON", "GSWAP_CONFIG", "LD_PRELOAD", "GSWAP_TIMELINE"):
            self.env.pop(k, None)
        self.env["GSWAP_SUMMARY"] = "1"
        self.daemon = None
        self.runs = 0

    def close(self):
        if self.daemon:
            self.daemon.kill()
            self.daemon.wait()
        shutil.rmtree(self.work, ignore_errors=True)

    # --- one run -------------------------------------------------------------------------------
    def run(self, cmd, env):
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            sys.exit("bench-guided: %s failed (%d):\n%s" % (" ".join(cmd), r.returncode, r.stdout[-2000:]))
        return r.stdout

    @staticmethod
    def parse(out):
        p = {"steps": []}
        for line in out.splitlines():
            f = line.split()
            if line.startswith("step_seconds:"):
                p["steps"].append(float(f[3]))
            elif line.startswith(("steady_step_seconds:", "train_seconds:")):
                p[f[0][:-1]] = float(f[1])
            elif line.startswith("peak_bytes:"):
                p["peak"] = int(f[1])
            elif line.startswith("checksum:"):
                p["checksum"] = f[1]
            elif line.startswith("gswap summary:"):
                for kv in f[2:]:
                    if "=" in kv:
                        k, v = kv.split("=", 1)
                        try:
                            p[k] = float(v)
                        except ValueError:
                            p[k] = v
        return p

    def plain(self, cmd, bps):
        env = dict(self.env, SIMCUDA_H2D_BPS=str(bps), SIMCUDA_D2H_BPS=str(bps))
        return self.parse(self.run(cmd, env))

    def passive(self, cmd, bps, budget):
        env = dict(self.env, SIMCUDA_H2D_BPS=str(bps), SIMCUDA_D2H_BPS=str(bps),
                   GSWAP_DAEMON="off", GSWAP_BUDGET=str(budget), LD_PRELOAD=self.lib)
        p = self.parse(self.run(cmd, env))
        n = len(p["steps"])
        p["per_it"] = {k: p[k] / n for k in ("stall_ms", "device_stall_ms")}
        p["per_it"]["moved_mib"] = (p["swapped_out"] + p["swapped_in"]) / n / 2**20
        return p

    def status(self, pid, env):
        r = subprocess.run([self.gswapctl, "status", "--json"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        if r.returncode != 0:
            return None
        try:
            for g in json.loads(r.stdout)["gpus"]:
                for c in g["clients"]:
                    if c["pid"] == pid:
                        return c
        except (ValueError, KeyError):
            pass
        return None

    def guided(self, cmd, bps, budget):
        """cmd under a fresh gswapd. Timing starts with the first iteration that begins after the
        library reports mode guided; stalls and bytes are counted from then on."""
        self.runs += 1
        rt = os.path.join(self.work, "run%d" % self.runs)
        env = dict(self.env, SIMCUDA_H2D_BPS=str(bps), SIMCUDA_D2H_BPS=str(bps), GSWAP_RUNTIME_DIR=rt)
        self.daemon = subprocess.Popen([self.gswapd, "--gpu", "0", "--foreground", "--log-file",
                                        os.path.join(self.work, "gswapd%d.log" % self.runs)], env=env)
        for _ in range(200):
            if glob.glob(os.path.join(rt, "*.sock")):
                break
            time.sleep(0.05)
        out_path = os.path.join(self.work, "out%d.txt" % self.runs)
        with open(out_path, "w") as out:
            prog = subprocess.Popen(cmd, env=dict(env, GSWAP_BUDGET=str(budget), LD_PRELOAD=self.lib),
                                    stdout=out, stderr=subprocess.STDOUT)
        # guided_at: iterations finished when the library was first seen guided (the one in
        # progress then is mixed); snap: the counters at the end of that mixed iteration, taken as
        # soon as a poll sees its step line, so everything after it ran under the plan.
        guided_at, snap, trace, plan_budget = None, None, None, None
        while prog.poll() is None:
            c = self.status(prog.pid, env)
            with open(out_path) as f:
                done = f.read().count("step_seconds:")
            if c and c["mode"] == "guided":
                if guided_at is None:
                    guided_at = done
                elif snap is None and done > guided_at:
                    snap = dict(c, steps_before=done)
                if trace is None and c["guided_iterations"] >= 1:
                    path = os.path.join(self.work, "trace%d.json" % self.runs)
                    plan = os.path.join(self.work, "plan%d.json" % self.runs)
                    if subprocess.run([self.gswapctl, "trace", "dump", "--pid", str(prog.pid), "--out",
                                       path, "--plan-out", plan], env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL).returncode == 0:
                        trace, plan_budget = path, c["plan_budget_bytes"]
            time.sleep(0.1)
        self.daemon.send_signal(signal.SIGTERM)
        self.daemon.wait()
        self.daemon = None
        with open(out_path) as f:
            text = f.read()
        if prog.returncode != 0:
            sys.exit("bench-guided: %s failed under gswapd:\n%s" % (" ".join(cmd), text[-2000:]))
        p = self.parse(text)
        p["guided_from"] = None
        if snap:
            first = snap["steps_before"]
            window = p["steps"][first:]
            n = len(window)
            p["guided_from"] = first
            if n >= 2:
                p["steady_step_seconds"] = statistics.median(window)
                p["per_it"] = {
                    "stall_ms": (p["stall_ms"] - snap["stall_ns"] / 1e6) / n,
                    "device_stall_ms": (p["device_stall_ms"] - snap["device_stall_ns"] / 1e6) / n,
                    "moved_mib": (p["swapped_out"] + p["swapped_in"] - snap["swapped_out_bytes"] -
                                  snap["swapped_in_bytes"]) / n / 2**20,
                }
            p["guided_iterations_timed"] = n
        # The prediction: the simulator on the plan the library followed (as gswapd had it when
        # the trace was dumped), and, for comparison, on a plan searched afresh from the trace.
        p["simulated"] = p["replanned"] = None
        if trace:
            base = [self.gswapctl, "simulate", "--trace", trace, "--budget", str(plan_budget),
                    "--no-recompute", "--json"]
            for key, extra in (("simulated", ["--plan", trace.replace("trace", "plan")]),
                               ("replanned", ["--policy", "capuchin"])):
                r = subprocess.run(base + extra, env=self.env, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True)
                if r.returncode == 0:
                    p[key] = json.loads(r.stdout)
        return p

    # --- a workload ------------------------------------------------------------------------------
    def calibrate(self, cmd_for, h100_s):
        """simcuda's compute step (no gswap, link unthrottled) and the link that gives an H100's
        swap/compute ratio."""
        p = self.plain(cmd_for(6), 0)
        sim_s = p["steady_step_seconds"]
        slowdown = sim_s / h100_s
        return sim_s, slowdown, LINK / slowdown

    def workload(self, name, cmd_for, h100_s, iters, fractions, lines):
        sim_s, slowdown, bps = self.calibrate(cmd_for, h100_s)
        bps = float("%.3g" % bps)
        lines.append("")
        lines.append("### %s" % name)
        lines.append("")
        lines.append("`%s`: simcuda step without gswap, link unthrottled: %.3f s; H100 estimate %.0f us; "
                     "slowdown %.0fx; link throttled to **%.3g MB/s** each way (50 GB/s / %.0f)."
                     % (" ".join(os.path.basename(x) if i == 0 else x for i, x in enumerate(cmd_for(iters))),
                        sim_s, h100_s * 1e6, slowdown, bps / 1e6, slowdown))
        lines.append("")
        none = self.plain(cmd_for(iters), bps)
        lines.append("| budget | no gswap | passive | guided | passive / none | guided / none | "
                     "guided / passive | host stall ms/it (passive, guided) | device stall ms/it "
                     "(passive, guided) | MiB moved/it (passive, guided) | simulated (plan followed) "
                     "| guided / simulated | simulated (searched afresh) | checksums |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for frac in fractions:
            budget = int(none["peak"] * frac)
            pa = self.passive(cmd_for(iters), bps, budget)
            gu = self.guided(cmd_for(iters), bps, budget)
            ok = pa["checksum"] == none["checksum"] == gu["checksum"]
            t0, tp = none["steady_step_seconds"], pa["steady_step_seconds"]
            if gu.get("per_it") and gu["guided_from"] is not None:
                tg = gu["steady_step_seconds"]
                g = "%.3f s (%d it)" % (tg, gu["guided_iterations_timed"])
                gi = gu["per_it"]
                ratio_g = "%.2f" % (tg / t0)
                ratio_gp = "%.2f" % (tg / tp)
                stall = "%.0f, %.0f" % (pa["per_it"]["stall_ms"], gi["stall_ms"])
                dstall = "%.0f, %.0f" % (pa["per_it"]["device_stall_ms"], gi["device_stall_ms"])
                moved = "%.0f, %.0f" % (pa["per_it"]["moved_mib"], gi["moved_mib"])
            else:
                g = "never guided (%s)" % gu.get("mode", "?")
                ratio_g = ratio_gp = "-"
                stall = "%.0f, -" % pa["per_it"]["stall_ms"]
                dstall = "%.0f, -" % pa["per_it"]["device_stall_ms"]
                moved = "%.0f, -" % pa["per_it"]["moved_mib"]
            sim = gu["simulated"]
            if sim and gu.get("per_it"):
                s = "%.3f s (%.2fx ideal)" % (sim["step_time_us"] / 1e6,
                                              sim["step_time_us"] / sim["ideal_step_time_us"])
                vs = "%.2f" % (gu["steady_step_seconds"] / (sim["step_time_us"] / 1e6))
            else:
                s, vs = "-", "-"
            re = gu["replanned"]
            rs = "%.3f s" % (re["step_time_us"] / 1e6) if re else "-"
            lines.append("| %d%% | %.3f s | %.3f s | %s | %.2f | %s | %s | %s | %s | %s | %s | %s | %s | %s |"
                         % (round(frac * 100), t0, tp, g, tp / t0, ratio_g, ratio_gp, stall, dstall, moved,
                            s, vs, rs, "equal" if ok else "DIFFER"))
            sys.stderr.write("  %s at %d%%: done\n" % (name, round(frac * 100)))

    def issue_config(self, lines):
        cmd = [self.minitrain, "--layers", "12", "--width", "256", "--batch", "4096", "--iters", "12"]
        bps = 200e6
        none = self.plain(cmd, bps)
        budget = none["peak"] // 2
        pa = self.passive(cmd, bps, budget)
        gu = self.guided(cmd, bps, budget)
        lines.append("")
        lines.append("### The issue's configuration")
        lines.append("")
        lines.append("`minitrain --layers 12 --width 256 --batch 4096 --iters 12`, link 200 MB/s each way, "
                     "budget half the peak (%d bytes); whole runs (12 iterations, gswapd's measured "
                     "iterations included):" % budget)
        lines.append("")
        lines.append("| | no gswap | passive | guided | guided / passive (target <= 0.85) |")
        lines.append("|---|---|---|---|---|")
        lines.append("| train_seconds | %.2f s | %.2f s | %.2f s | %.2f |" % (
            none["train_seconds"], pa["train_seconds"], gu["train_seconds"],
            gu["train_seconds"] / pa["train_seconds"]))
        if gu.get("per_it"):
            lines.append("| steady step (median; guided: its guided iterations) | %.3f s | %.3f s | %.3f s | %.2f |" % (
                none["steady_step_seconds"], pa["steady_step_seconds"], gu["steady_step_seconds"],
                gu["steady_step_seconds"] / pa["steady_step_seconds"]))
            dp, dg = pa["per_it"]["device_stall_ms"], gu["per_it"]["device_stall_ms"]
            lines.append("| device stall ms per iteration (guided: its guided iterations) | - | %.1f | %.1f | "
                         "%.2f (target <= 0.10) |" % (dp, dg, dg / dp if dp else float("nan")))
        lines.append("| device_stall_ms (summary, whole run) | - | %.0f | %.0f | %.2f |" % (
            pa["device_stall_ms"], gu["device_stall_ms"],
            gu["device_stall_ms"] / pa["device_stall_ms"] if pa["device_stall_ms"] else float("nan")))
        lines.append("| stall_ms, host (summary) | - | %.0f | %.0f | %.2f |" % (
            pa["stall_ms"], gu["stall_ms"], gu["stall_ms"] / pa["stall_ms"] if pa["stall_ms"] else float("nan")))
        lines.append("| MiB moved (out + in) | - | %.0f | %.0f | %.2f |" % (
            (pa["swapped_out"] + pa["swapped_in"]) / 2**20, (gu["swapped_out"] + gu["swapped_in"]) / 2**20,
            (gu["swapped_out"] + gu["swapped_in"]) / (pa["swapped_out"] + pa["swapped_in"])))
        lines.append("| checksum | %s | %s | %s | %s |" % (
            none["checksum"], pa["checksum"], gu["checksum"],
            "equal" if none["checksum"] == pa["checksum"] == gu["checksum"] else "DIFFER"))
        lines.append("")
        lines.append("Guided from iteration %s; %s guided iterations, %s planned evictions, %s prefetches, "
                     "%s late restores." % (gu["guided_from"], int(gu.get("guided_iterations", 0)),
                                            int(gu.get("planned_evictions", 0)), int(gu.get("prefetches", 0)),
                                            int(gu.get("late_restores", 0))))

    def fast_links(self, workloads, lines):
        """Half the peak on links fast enough that the simulator predicts a step near the ideal:
        the issue's "within 1.15x of the unconstrained step where the simulator predicts under
        1.05x"."""
        lines.append("")
        lines.append("### Fast links: where the simulator predicts a step near the ideal")
        lines.append("")
        lines.append("Each workload at 50% of its peak, its link unthrottled (simcuda copies at memcpy "
                     "speed) and throttled to 1 GB/s each way; 10 iterations. `simulated / ideal`: "
                     "`gswapctl simulate` on the trace gswapd captured, at the budget it planned for.")
        lines.append("")
        lines.append("| workload | link | no gswap | passive | guided | simulated / ideal | guided / none "
                     "(target <= 1.15 where simulated / ideal < 1.05) | guided / passive | checksums |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        for name, cmd in workloads:
            for bps in (0, 1e9):
                none = self.plain(cmd, bps)
                budget = none["peak"] // 2
                pa = self.passive(cmd, bps, budget)
                gu = self.guided(cmd, bps, budget)
                sim = gu["simulated"]
                ok = pa["checksum"] == none["checksum"] == gu["checksum"]
                t0, tp = none["steady_step_seconds"], pa["steady_step_seconds"]
                if gu.get("per_it") and sim:
                    tg = gu["steady_step_seconds"]
                    lines.append("| %s | %s | %.3f s | %.3f s | %.3f s | %.2f | %.2f | %.2f | %s |" % (
                        name, "unthrottled" if bps == 0 else "%.3g GB/s" % (bps / 1e9), t0, tp, tg,
                        sim["step_time_us"] / sim["ideal_step_time_us"], tg / t0, tg / tp,
                        "equal" if ok else "DIFFER"))
                else:
                    lines.append("| %s | %s | %.3f s | %.3f s | never guided | - | - | - | %s |" % (
                        name, "unthrottled" if bps == 0 else "%.3g GB/s" % (bps / 1e9), t0, tp,
                        "equal" if ok else "DIFFER"))
                sys.stderr.write("  %s on %s: done\n" % (name, bps or "unthrottled"))

    def launch_bench(self, lines):
        if not os.path.exists(self.lpb):
            lines.append("\n(gswap_launch_path_bench is not built: Google Benchmark missing)")
            return
        r = subprocess.run([self.lpb, "--benchmark_filter=BM_Launch(Passive|Numbered|Guided)",
                            "--benchmark_repetitions=5", "--benchmark_report_aggregates_only=true",
                            "--benchmark_format=json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           text=True, check=True)
        med = {}
        for b in json.loads(r.stdout)["benchmarks"]:
            if b.get("aggregate_name") == "median":
                med[b["run_name"]] = b["cpu_time"]
        lines.append("")
        lines.append("### Launch path: following a plan")
        lines.append("")
        lines.append("`gswap_launch_path_bench --benchmark_filter='BM_Launch(Passive|Numbered|Guided)' "
                     "--benchmark_repetitions=5` (median CPU time per launch, 8 pointer parameters, "
                     "10,000 regions):")
        lines.append("")
        lines.append("| threads | passive | numbered | guided | guided - numbered (target <= 30 ns) | guided - passive |")
        lines.append("|---|---|---|---|---|---|")
        for t in (1, 4, 16):
            p, n, g = (med.get("BM_Launch%s/threads:%d" % (m, t)) for m in ("Passive", "Numbered", "Guided"))
            if None in (p, n, g):
                continue
            lines.append("| %d | %.1f ns | %.1f ns | %.1f ns | %+.1f ns | %+.1f ns |" % (t, p, n, g, g - n, g - p))


def machine():
    model = platform.processor() or "?"
    try:
        for line in subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "%s, %d CPUs (nproc), load average %s" % (model, os.cpu_count(),
                                                    " ".join(open("/proc/loadavg").read().split()[:3]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--build", default=os.environ.get("GSWAP_BUILD_DIR", os.path.join(root, "build")))
    ap.add_argument("--quick", action="store_true", help="fewer iterations and one budget (a smoke run)")
    ap.add_argument("--no-launch-bench", action="store_true")
    ap.add_argument("--only", choices=["minitrain", "shuffled", "issue", "fast", "launch"])
    a = ap.parse_args()
    b = Bench(os.path.abspath(a.build), a.quick)
    lines = ["## Guided execution on the simulated GPU (scripts/bench-guided.py)", "",
             "%s; %s." % (datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), machine())]
    fractions = [0.5] if a.quick else [0.7, 0.5, 0.33]
    try:
        if a.only in (None, "minitrain"):
            L, W, B = 12, 256, 4096
            b.workload("minitrain (activations swapped; weights below the 2 MiB region size)",
                       lambda n: [b.minitrain, "--layers", str(L), "--width", str(W), "--batch", str(B),
                                  "--iters", str(n)],
                       h100_minitrain(L, W, B), 8 if a.quick else 10, fractions, lines)
        if a.only in (None, "shuffled"):
            dims = [1024] * 5
            b.workload("shuffled_train, 1024-wide layers (weights and gradients are regions too)",
                       lambda n: [b.shuffled, "--dims", ",".join(map(str, dims)), "--batch", "512",
                                  "--iters", str(n)],
                       h100_shuffled(dims, 512), 8 if a.quick else 10, fractions, lines)
        if a.only in (None, "issue") and not a.quick:
            b.issue_config(lines)
        if a.only in (None, "fast") and not a.quick:
            b.fast_links([("minitrain", [b.minitrain, "--layers", "12", "--width", "256", "--batch", "4096",
                                         "--iters", "10"]),
                          ("shuffled_train", [b.shuffled, "--dims", "1024,1024,1024,1024,1024", "--batch",
                                              "512", "--iters", "10"])], lines)
        if a.only in (None, "launch") and not a.no_launch_bench:
            b.launch_bench(lines)
    finally:
        b.close()
    lines.append("")
    lines.append("Load average at the end: %s." % " ".join(open("/proc/loadavg").read().split()[:3]))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
