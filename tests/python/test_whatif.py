"""What-if on a tiny model: the recorded trace is a valid gswap-trace that gswapctl simulates, and
`gswap whatif` prints its table and its batch search."""

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from gswap.whatif import budget_table, parse_gpu, record  # noqa: E402
from gswap.whatif.models import gpt_workload  # noqa: E402

# Small enough to record in a second, large enough that activations reach the 2 MiB below which
# gswap never swaps an allocation.
TINY = "gpt:layers=2,hidden=512,heads=8,seq=256,vocab=8192"
TINY_ARGS = dict(layers=2, hidden=512, heads=8, seq=256, vocab=8192)


def tiny_trace(**kw):
    w = gpt_workload(**TINY_ARGS)
    return record(w.model, w.make_batch, w.loss, batch_size=4, gpu="h100", progress=False, **kw)


def test_trace_is_a_gswap_trace_of_one_iteration():
    t = tiny_trace()
    doc = t.to_json()
    assert doc["format"] == "gswap-trace" and doc["version"] == 1
    launches, regions = doc["launches"], doc["regions"]
    ids = {r["id"] for r in regions}
    assert [l["seq"] for l in launches] == list(range(len(launches)))
    assert all(set(l["regions"]) <= ids for l in launches)
    assert doc["iterations"] == [{"first_seq": 0, "last_seq": len(launches) - 1}]
    kernels = {l["kernel"] for l in launches}
    # Fused attention as on a GPU, AdamW's foreach kernels, the embedding's backward.
    assert "aten._scaled_dot_product_efficient_attention.default" in kernels
    assert "aten._foreach_addcdiv_.ScalarList" in kernels
    assert "aten.embedding_dense_backward.default" in kernels
    # Weights and optimizer state outlive the iteration; activations are freed in it and some
    # are recomputable from their producer.
    assert any(r["free_seq"] is None for r in regions)
    assert any(r["free_seq"] is not None for r in regions)
    assert any("recompute" in r for r in regions)
    assert all(l["dur_us"] >= 3.0 for l in launches)


def test_durations_follow_the_gpu():
    fast = tiny_trace()
    w = gpt_workload(**TINY_ARGS)
    slow = record(w.model, w.make_batch, w.loss, batch_size=4, progress=False,
                  gpu=parse_gpu("h100:hbm_tbps=0.1,bf16_tflops=10,tf32_tflops=5,fp32_tflops=1"))
    assert fast.launches == slow.launches
    assert slow.step_time_us > fast.step_time_us


def test_bf16_halves_the_activations():
    fp32 = tiny_trace()
    bf16 = tiny_trace(dtype=torch.bfloat16)
    assert bf16.peak_bytes < 0.75 * fp32.peak_bytes


def test_trace_simulates(tool_env, tmp_path):
    t = tiny_trace()
    path = tmp_path / "tiny.json"
    t.save(str(path))
    p = subprocess.run(["gswapctl", "simulate", "--trace", str(path), "--budget", "60%",
                        "--policy", "capuchin", "--json"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    j = json.loads(p.stdout)
    assert j["feasible"] and j["launches"] == t.launches
    assert j["trace_peak_bytes"] == t.peak_bytes
    assert j["step_time_us"] >= j["ideal_step_time_us"]
    rows = budget_table(t, ["100%", "50%"], progress=False, search_ms=0)
    assert rows[0].hybrid.slowdown == pytest.approx(1.0)
    assert rows[1].swap_only.swapped_out_bytes > 0


def test_whatif_prints_its_table(tool_env, tmp_path):
    trace = tmp_path / "t.json"
    p = subprocess.run([sys.executable, "-m", "gswap", "whatif", "--model", TINY, "--batch", "2",
                        "--gpu", "a100", "--budgets", "100%,50%", "--search-ms", "0",
                        "--fit", "256MiB", "--max-slowdown", "3", "--trace", str(trace)],
                       capture_output=True, text=True, env=dict(os.environ))
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "batch 2, fp32, adamw" in out and "A100 SXM" in out
    assert "    100%" in out and "     50%" in out and "1.00x" in out
    assert "largest batch in 256.0 MiB within 3.00x:" in out
    for mode in ("without gswap", "swap-only", "hybrid"):
        assert f"{mode}:" in out
    # Progress bars (tqdm, on stderr) while recording, simulating and searching batches.
    for bar in ("recording:", "simulating:", "batch search:", "recording batch "):
        assert bar in p.stderr, bar
    # The kept trace is one gswapctl simulates.
    assert json.loads(trace.read_text())["format"] == "gswap-trace"
    # (75%: AdamW's foreach step touches every weight and its state, half of the peak here.)
    sim = subprocess.run(["gswapctl", "simulate", "--trace", str(trace), "--budget", "75%",
                          "--json"], capture_output=True, text=True)
    assert sim.returncode == 0, sim.stderr
    assert json.loads(sim.stdout.strip().splitlines()[-1])["feasible"]


def test_no_progress_means_no_bars(tool_env):
    p = subprocess.run([sys.executable, "-m", "gswap", "whatif", "--model", TINY, "--batch", "1",
                        "--budgets", "100%", "--search-ms", "0", "--no-progress"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "recording" not in p.stderr and "simulating" not in p.stderr


def test_whatif_json_and_errors(tool_env):
    p = subprocess.run([sys.executable, "-m", "gswap", "whatif", "--model", TINY, "--batch", "2",
                        "--budgets", "100%", "--search-ms", "0", "--json", "--no-progress",
                        "--dtype", "bf16", "--gpu", "h200"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    j = json.loads(p.stdout)
    assert j["budgets"][0]["hybrid"]["feasible"] and j["peak_bytes"] > 0
    assert j["dtype"] == "bf16" and j["gpu"] == "H200 SXM"
    bad = subprocess.run([sys.executable, "-m", "gswap", "whatif", "--model", "torchvision:nope",
                          "--batch", "2"], capture_output=True, text=True)
    assert bad.returncode == 2 and "no classification model 'nope'" in bad.stderr


def test_gpu_presets_and_a_custom_gpu():
    from gswap.whatif import PRESETS
    assert {"h100", "h200", "a100"} <= set(PRESETS)
    h100, h200, a100 = (parse_gpu(n) for n in ("h100", "H200", "a100"))
    assert h100.memory_bytes == 80 << 30 and h200.memory_bytes == 141 * 10**9
    assert h200.hbm_tbps > h100.hbm_tbps > a100.hbm_tbps and a100.link_gbps < h100.link_gbps
    changed = parse_gpu("h100:link_gbps=25,memory=40GiB")
    assert changed.link_gbps == 25 and changed.memory_bytes == 40 << 30
    assert changed.bf16_tflops == h100.bf16_tflops and "modified" in changed.name
    custom = parse_gpu("custom:name=L4,memory=24GiB,bf16_tflops=121,tf32_tflops=60,"
                       "fp32_tflops=30,hbm_tbps=0.3,link_gbps=25")
    assert custom.name == "L4" and custom.memory_bytes == 24 << 30 and custom.hbm_tbps == 0.3
    with pytest.raises(ValueError, match="custom needs"):
        parse_gpu("custom:memory=24GiB")
    with pytest.raises(ValueError, match="unknown GPU"):
        parse_gpu("v100")
    with pytest.raises(ValueError, match="not FIELD=VALUE"):
        parse_gpu("h100:clock=2")
    # The same iteration costs more on a slower card, launch for launch.
    w = gpt_workload(**TINY_ARGS)
    times = [record(w.model, w.make_batch, w.loss, batch_size=2, gpu=g, progress=False)
             for g in (h100, a100, custom)]
    assert len({t.launches for t in times}) == 1
    assert times[0].step_time_us < times[1].step_time_us < times[2].step_time_us


def test_sizes_read_as_gswapctl_reads_them_and_gpu_figures_checked():
    from gswap.whatif.gpus import parse_size
    # Bare letters and binary units are powers of 1024, decimal units of 1000 (proto/settings.h).
    assert parse_size("256M") == parse_size("256MiB") == 256 << 20
    assert parse_size("80G") == 80 << 30 and parse_size("80GB") == 80 * 10**9
    assert parse_gpu("h100:memory=80G").memory_bytes == 80 << 30
    for bad in ("hbm_tbps=0", "link_gbps=-1", "fp32_tflops=nan", "bf16_tflops=inf",
                "hbm_tbps=1e308", "fp32_tflops=1e-320", "link_gbps=1e-9"):
        with pytest.raises(ValueError, match="must be a number above 0"):
            parse_gpu(f"h100:{bad}")
    with pytest.raises(ValueError, match="more than the reserve"):
        parse_gpu("h100:reserved=100GiB")
    # Exact: no float rounding of whole bytes, and what does not fit in 64 bits is refused.
    assert parse_size("18446744073709551615") == 2**64 - 1
    assert parse_size("9007199254740993") == 2**53 + 1
    assert parse_size("1.5KiB") == 1536 and parse_size("0.3B") == 0
    with pytest.raises(ValueError, match="more than 2"):
        parse_size("18446744073709551616")
    with pytest.raises(TypeError):
        parse_size(1024)


# A foreach optimizer op is launched on a GPU per group of tensors (multi_tensor_apply: at most 320
# chunks of 65536 elements, 48 tensors for three lists), not as one kernel over every parameter:
# eight 2048x2048 layers' addcdiv_ (parameters, moments, denominators) is two launches, the first
# over five weights and four biases of each list. Before, one launch touched all 48 tensors and
# every budget below it was called impossible.
def test_a_foreach_op_is_launched_per_group_of_tensors_as_on_a_gpu():
    import torch.nn.functional as F

    def net():
        return torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(8)])

    t = record(net, lambda b, d: (torch.randn(b, 2048, device=d), torch.randn(b, 2048, device=d)),
               F.mse_loss, batch_size=8, progress=False)
    rec = t.recording
    step = [ln for ln in rec.launches if ln.kernel.startswith("aten._foreach_addcdiv_")]
    assert len(step) == 2, [len(ln.regions) for ln in step]
    weight = 2048 * 2048 * 4
    sizes = sorted(rec.regions[r].bytes for r in step[0].regions)
    assert sizes.count(weight) == 3 * 5 and len(sizes) == 3 * 9, sizes
    touched = {r for ln in step for r in ln.regions}
    assert len(touched) == 3 * 16
    assert sum(ln.dur_us for ln in step) > 0


# On the CPU with GPU kernel choices, attention takes PyTorch's own (fused) CPU path: the GPU's
# fused kernels have no CPU form, and recording failed.
def test_gpu_kernel_choices_on_the_cpu_record_attention():
    t = record(lambda: torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True), 1,
        enable_nested_tensor=False),
        lambda b, d: (torch.randn(b, 16, 64, device=d), torch.randn(b, 16, 64, device=d)),
        torch.nn.functional.mse_loss, batch_size=2, device="cpu", gpu_kernels=True,
        progress=False)
    assert t.launches > 0


# Without PyTorch, `gswap whatif --help` still prints its usage (the package imports PyTorch only
# where it records), and a real run says what is missing.
def test_whatif_help_needs_no_pytorch():
    hide = "import sys; sys.modules['torch'] = None; from gswap.cli import main; "
    p = subprocess.run([sys.executable, "-c", hide + "sys.exit(main(['whatif', '--help']))"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "usage: gswap whatif" in p.stdout, p.stderr
    p = subprocess.run([sys.executable, "-c", hide + "sys.exit(main(['whatif', '--model', 'gpt:',"
                        " '--batch', '1']))"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "needs PyTorch" in p.stderr, p.stderr


def test_slowdown_of_an_iteration_that_takes_no_time():
    from gswap.whatif.predict import Prediction
    assert Prediction(1, True, 0.0, 0.0).slowdown == 1.0
    assert Prediction(1, True, 5.0, 0.0).slowdown == float("inf")
    assert Prediction(1, False, 5.0, 2.0).slowdown == float("inf")
    assert Prediction(1, True, 5.0, 2.0).slowdown == 2.5


# record() names a wrong argument before it records anything.
def test_record_refuses_wrong_arguments():
    w = gpt_workload(**TINY_ARGS)
    for kw, kind in ((dict(batch_size=0), ValueError), (dict(batch_size=2.0), ValueError),
                     (dict(batch_size=2, gpu=None), TypeError),
                     (dict(batch_size=2, dtype="bf16"), TypeError)):
        with pytest.raises(kind, match="batch_size|gpu|dtype"):
            record(w.model, w.make_batch, w.loss, progress=False, **kw)


# The prediction API checks its budgets before it simulates anything, and leaves no file behind.
def test_budgets_given_to_the_api_are_checked_and_no_file_is_left(tool_env, tmp_path):
    import glob
    import tempfile

    from gswap.whatif import predict

    t = tiny_trace()
    for bad, kind in (("100", TypeError), (50, TypeError), ([0.5], TypeError), ([True], TypeError),
                      ([-1], ValueError)):
        with pytest.raises(kind):
            predict.budget_table(t, bad, progress=False)
    rows = predict.budget_table(t, [t.peak_bytes, "50%"], search_ms=0, progress=False)
    assert rows[0].budget == str(t.peak_bytes) and rows[0].hybrid.budget_bytes == t.peak_bytes
    with pytest.raises(TypeError, match="budget_bytes"):
        predict.largest_batch(lambda b: t, "1GiB", 2.0, 1, progress=False)
    # A trace that cannot be written: the temporary file goes too.
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "gswap-whatif-*")))
    t.info["bad"] = object()
    with pytest.raises(TypeError):
        predict.budget_table(t, ["50%"], search_ms=0, progress=False)
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "gswap-whatif-*"))) == before


# Recording chooses kernels as on a GPU (fused attention, foreach optimizers) by replacing two
# module attributes of PyTorch. Before, another thread's CPU attention failed while a recording
# ran, and recordings in several threads at once left a replacement installed for good.
def test_recordings_in_threads_leave_other_threads_and_pytorch_as_they_were():
    import threading

    import torch.nn.functional as F
    import torch.optim.optimizer as optim_mod

    before = (F.scaled_dot_product_attention, optim_mod._get_foreach_kernels_supported_devices)
    q = torch.randn(1, 2, 8, 16)
    want = F.scaled_dot_product_attention(q, q, q)
    errors, stop = [], threading.Event()

    def attend():
        while not stop.is_set():
            try:
                assert torch.equal(F.scaled_dot_product_attention(q, q, q), want)
            except Exception as e:  # noqa: BLE001 - any failure is the finding
                errors.append(e)
                return

    def work():
        try:
            tiny_trace()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    watcher = threading.Thread(target=attend)
    watcher.start()
    recorders = [threading.Thread(target=work) for _ in range(3)]
    try:
        for t in recorders:
            t.start()
        for t in recorders:
            t.join()
    finally:
        stop.set()
        watcher.join()
    assert not errors, errors[0]
    assert (F.scaled_dot_product_attention,
            optim_mod._get_foreach_kernels_supported_devices) == before
    assert "meta" not in optim_mod._get_foreach_kernels_supported_devices()


def test_record_leaves_the_callers_module_as_it_was():
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    model.eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}

    def make_batch(batch, device):
        return (torch.randn(batch, 64, device=device, dtype=torch.bfloat16),
                torch.randint(0, 8, (batch,), device=device))

    record(model, make_batch, torch.nn.functional.cross_entropy, batch_size=4, gpu="h100",
           device="cpu", dtype=torch.bfloat16, progress=False)
    assert not model.training
    assert all(p.grad is None for p in model.parameters())
    after = model.state_dict()
    assert all(after[k].dtype == v.dtype and torch.equal(after[k], v) for k, v in before.items())


# Ctrl-C while gswapctl simulates: one line, exit status 130, and the trace file is gone.
def test_an_interrupt_is_one_line_and_leaves_no_file(tool_env):
    import glob
    import signal
    import tempfile
    import time

    pattern = os.path.join(tempfile.gettempdir(), "gswap-whatif-*")
    before = set(glob.glob(pattern))
    p = subprocess.Popen([sys.executable, "-m", "gswap", "whatif", "--model", TINY, "--batch", "2",
                          "--no-progress", "--search-ms", "1000"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not set(glob.glob(pattern)) - before and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert p.poll() is None, "whatif ended before its trace was written"
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert err == "gswap whatif: interrupted\n", err
    assert set(glob.glob(pattern)) == before


def test_bad_arguments_are_one_line_before_recording(tool_env):
    for args, want in ((["--max-slowdown", "nan"], "--max-slowdown must be a finite number"),
                       (["--max-slowdown", "0.5"], "--max-slowdown must be a finite number"),
                       (["--image-size", "0"], "--image-size must be at least 1"),
                       (["--search-ms", "-1"], "--search-ms must be a finite number"),
                       (["--trace", "/"], "--trace /: not a file in an existing directory"),
                       (["--budgets", "0%"], "'0%' is not a percentage above 0"),
                       (["--budgets", "1e2%"], "'1e2%' is not a percentage above 0"),
                       (["--budgets", "+50%"], "'+50%' is not a percentage above 0"),
                       (["--budgets", "1_0%"], "'1_0%' is not a percentage above 0"),
                       (["--budgets", "abc"], "'abc' is not a size"),
                       (["--budgets", "1" + "0" * 400 + "GiB"], "more than 2^64 - 1 bytes"),
                       (["--fit", "1" + "0" * 400], "more than 2^64 - 1 bytes"),
                       (["--gpu", "h100:memory=1" + "0" * 400], "more than 2^64 - 1 bytes"),
                       (["--gpu", "h100:hbm_tbps=0"], "must be a number above 0"),
                       (["--model", "gpt:layers=0"], "layers=0 must be at least 1"),
                       (["--model", "gpt:seq=-1"], "seq=-1 must be at least 1"),
                       (["--model", "gpt:layers=abc"], "layers=abc is not a whole number"),
                       (["--model", "gpt:dropout=5"], "dropout=5 must be at least 0 and below 1"),
                       (["--model", "gpt:hidden=65"], "hidden=65 is not a multiple of heads=12"),
                       (["--fit", "gpu", "--gpu", "h100:reserved=90GiB"], "more than the reserve")):
        p = subprocess.run([sys.executable, "-m", "gswap", "whatif", "--model", TINY, "--batch",
                            "2", "--no-progress", *args], capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.count("\n") == 1 and want in p.stderr, (args, p.stderr)
    # What only the model can refuse is one line too.
    p = subprocess.run([sys.executable, "-m", "gswap", "whatif", "--model",
                        "gpt:layers=1,hidden=64,heads=5,seq=32,vocab=100", "--batch", "2",
                        "--no-progress"], capture_output=True, text=True, timeout=120)
    assert p.returncode in (1, 2) and p.stderr.count("\n") == 1, p.stderr
    assert "Traceback" not in p.stderr


def test_largest_batch_says_when_it_stopped_at_its_limit():
    from gswap.whatif.predict import largest_batch

    class Fake:
        launches = 1

        def __init__(self, batch):
            self.peak_bytes = batch  # one byte a sample: everything below the budget fits

    fit = largest_batch(Fake, budget_bytes=1 << 40, max_slowdown=1.1, start=100_000, limit=1 << 16,
                        progress=False)
    assert fit["without gswap"].batch >= 100_000 and fit["without gswap"].at_limit
