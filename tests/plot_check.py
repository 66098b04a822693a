#!/usr/bin/env python3
"""plot_check.py: checks a `gswapctl plot` SVG the way a reader would read it.

  plot_check.py FILE.svg BUDGET_BYTES PEAK_LIVE_BYTES

The file must parse as XML (SVG namespace) and hold the live and resident curves, the budget line,
the two swap traffic series, axis tick labels with units, a legend and a title. The memory axis's
labelled ticks give the scale; read through it, the budget line must sit at BUDGET_BYTES and the
highest point of the live curve at PEAK_LIVE_BYTES (each within half a percent of the axis), and
the resident curve may never rise above the budget line.
"""
import re
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def fail(msg):
    print(f"plot_check: {msg}", file=sys.stderr)
    sys.exit(1)


def points(el):
    return [tuple(float(v) for v in p.split(",")) for p in el.get("points").split()]


def main(path, budget, peak):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        fail(f"{path}: not well-formed XML: {e}")
    if root.tag != NS + "svg":
        fail(f"{path}: the root is {root.tag}, not svg")
    by_id = {el.get("id"): el for el in root.iter() if el.get("id")}
    for need in ("title", "legend", "live", "resident", "budget", "swap-out", "swap-in"):
        if need not in by_id:
            fail(f"{path}: no element with id '{need}'")
    if not (by_id["title"].text or "").strip():
        fail("empty title")
    legend = " ".join(t.text or "" for t in by_id["legend"].iter(NS + "text"))
    for word in ("live", "resident", "budget", "swap-out", "restore"):
        if word not in legend:
            fail(f"the legend does not mention {word}: {legend!r}")

    # The memory axis scale from its labelled ticks: value = a + b * y.
    ticks = []
    for t in root.iter(NS + "text"):
        if t.get("class") == "ytick":
            m = re.fullmatch(r"([0-9.]+) (B|KiB|MiB|GiB)", (t.text or "").strip())
            if not m:
                fail(f"a memory tick label without a unit: {t.text!r}")
            ticks.append((float(t.get("y")), float(m.group(1)) * UNITS[m.group(2)]))
    if len(ticks) < 3:
        fail(f"only {len(ticks)} memory ticks")
    (y0, v0), (y1, v1) = ticks[0], ticks[-1]
    scale = (v1 - v0) / (y1 - y0)
    value = lambda y: v0 + (y - y0) * scale
    axis_top = max(v for _, v in ticks)
    for y, v in ticks:
        if abs(value(y) - v) > 0.002 * axis_top:
            fail(f"memory ticks are not evenly spaced: {ticks}")
    xticks = [t.text for t in root.iter(NS + "text") if t.get("class") == "xtick"]
    if len(xticks) < 3 or not all(re.fullmatch(r"[0-9.]+ (µs|ms|s)", x or "") for x in xticks):
        fail(f"time ticks without units: {xticks}")

    tol = 0.005 * axis_top
    b = by_id["budget"]
    if b.get("y1") != b.get("y2"):
        fail("the budget line is not horizontal")
    got = value(float(b.get("y1")))
    if abs(got - budget) > tol:
        fail(f"the budget line reads {got:.0f} bytes, the budget is {budget}")
    live_top = min(y for _, y in points(by_id["live"]))
    got = value(live_top)
    if abs(got - peak) > tol:
        fail(f"the live curve peaks at {got:.0f} bytes, the trace's peak is {peak}")
    res_top = value(min(y for _, y in points(by_id["resident"])))
    if res_top > budget + tol:
        fail(f"the resident curve reaches {res_top:.0f} bytes, above the budget {budget}")
    bars = len(list(by_id["swap-out"].iter(NS + "rect"))) + len(list(by_id["swap-in"].iter(NS + "rect")))
    print(f"plot_check: {path}: ok (budget {budget}, peak live {peak}, resident up to "
          f"{res_top:.0f}, {bars} traffic bars)")
    return bars


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    bars = main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
    sys.exit(0)
