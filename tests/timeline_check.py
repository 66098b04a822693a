#!/usr/bin/env python3
"""timeline_check.py: checks gswap timelines against the Chrome trace event format, for every test
that writes one (libgswap's GSWAP_TIMELINE, `gswapctl trace dump --timeline`, `gswapctl simulate
--timeline`).

  timeline_check.py FILE                 validate; print a summary (tracks, copies, bytes) as JSON
  timeline_check.py --same-tracks A B    validate both; their device tracks and counters must match
  timeline_check.py --covers A B         validate both; A has every device track of B (and maybe
                                         more), and the same counters

Rules checked: the file is UTF-8 JSON; the document is {"traceEvents": [...]} (plus optional
fields); every event has name, ph and pid; every event but metadata has ts; every event but
metadata and counters has tid (a counter belongs to its process: libgswap's writer leaves tid out
there, as the format allows); X events have a non-negative dur; B and E events match per track;
timestamps never go back on a track (pid, tid), nor on a counter (pid, name); counter args are
numbers; every track that holds events is named by a thread_name metadata event.

Host threads (process "host") are named by OS thread ids, which a simulation cannot know, so
--same-tracks compares the device process's tracks and the counters only.
"""
import json
import numbers
import sys


def fail(msg):
    print(f"timeline_check: {msg}", file=sys.stderr)
    sys.exit(1)


def validate(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: not JSON: {e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail(f"{path}: no traceEvents array")
    errors = []
    last_ts = {}
    open_b = {}
    names = {}  # (pid, tid) -> track name
    processes = {}
    used = set()
    counters = {}  # (pid, name) -> set of series
    summary = {"events": 0, "kernels": 0, "swap_outs": 0, "restores": 0, "swap_out_bytes": 0,
               "restore_bytes": 0, "late_restores": 0, "planned_copies": 0, "device_waits": 0,
               "host_waits": 0, "recomputes": 0, "counter_samples": 0}
    for i, e in enumerate(doc["traceEvents"]):
        where = f"{path}: traceEvents[{i}]"
        if not isinstance(e, dict):
            errors.append(f"{where}: not an object")
            continue
        ph = e.get("ph")
        for k in ("name", "ph", "pid"):
            if k not in e:
                errors.append(f"{where}: no '{k}'")
        if ph == "M":
            args = e.get("args", {})
            if e.get("name") == "thread_name":
                names[(e.get("pid"), e.get("tid"))] = args.get("name")
            elif e.get("name") == "process_name":
                processes[e.get("pid")] = args.get("name")
            continue
        summary["events"] += 1
        if not isinstance(e.get("ts"), numbers.Number):
            errors.append(f"{where}: no numeric 'ts'")
            continue
        ts = e["ts"]
        if ph == "C":
            key = ("counter", e.get("pid"), e.get("name"))
            args = e.get("args")
            if not isinstance(args, dict) or not args:
                errors.append(f"{where}: counter without args")
            else:
                for k, v in args.items():
                    if not isinstance(v, numbers.Number) or isinstance(v, bool):
                        errors.append(f"{where}: counter {k} = {v!r} is not a number")
                counters.setdefault((e.get("pid"), e.get("name")), set()).update(args)
            summary["counter_samples"] += 1
        else:
            if "tid" not in e:
                errors.append(f"{where}: no 'tid'")
                continue
            key = (e.get("pid"), e.get("tid"))
            if ph in ("X", "B", "E"):
                used.add(key)
        if key in last_ts and ts < last_ts[key]:
            errors.append(f"{where}: ts {ts} goes back on track {key} (after {last_ts[key]})")
        last_ts[key] = ts
        if ph == "X":
            dur = e.get("dur")
            if not isinstance(dur, numbers.Number) or dur < 0:
                errors.append(f"{where}: X event without a non-negative dur")
            cat, args = e.get("cat"), e.get("args", {})
            if cat == "kernel":
                summary["kernels"] += 1
            elif cat in ("swap_out", "restore"):
                for k in ("region", "bytes", "planned"):
                    if k not in args:
                        errors.append(f"{where}: {cat} without args.{k}")
                n = "swap_outs" if cat == "swap_out" else "restores"
                summary[n] += 1
                summary["swap_out_bytes" if cat == "swap_out" else "restore_bytes"] += args.get("bytes", 0)
                summary["planned_copies"] += bool(args.get("planned"))
                summary["late_restores"] += bool(args.get("late"))
            elif cat == "device_stall":
                summary["device_waits"] += 1
            elif cat == "host_stall":
                summary["host_waits"] += 1
            elif cat == "recompute":
                summary["recomputes"] += 1
        elif ph == "B":
            open_b.setdefault(key, []).append(e.get("name"))
        elif ph == "E":
            if not open_b.get(key):
                errors.append(f"{where}: E without a B on track {key}")
            else:
                open_b[key].pop()
        elif ph not in ("C", "i", "I", "n", "s", "t", "f"):
            errors.append(f"{where}: unexpected ph {ph!r}")
    for key, stack in open_b.items():
        if stack:
            errors.append(f"{path}: B without E on track {key}: {stack}")
    for key in used:
        if key not in names:
            errors.append(f"{path}: track {key} holds events but has no thread_name")
    if errors:
        fail("\n".join(errors[:20]) + (f"\n... {len(errors)} errors" if len(errors) > 20 else ""))
    device = [p for p, n in processes.items() if n == "device"]
    summary["device_tracks"] = sorted(n for (p, _), n in names.items() if p in device)
    summary["host_tracks"] = sorted(n for (p, _), n in names.items() if p not in device)
    summary["counters"] = sorted(f"{n}.{s}" for (_, n), series in counters.items() for s in series)
    summary["producer"] = doc.get("otherData", {}).get("producer")
    return summary


def main(argv):
    if len(argv) == 4 and argv[1] in ("--same-tracks", "--covers"):
        a, b = validate(argv[2]), validate(argv[3])
        for what in ("device_tracks", "counters"):
            ok = (set(a[what]) >= set(b[what]) if argv[1] == "--covers" and what == "device_tracks"
                  else a[what] == b[what])
            if not ok:
                fail(f"{what} differ:\n  {argv[2]}: {a[what]}\n  {argv[3]}: {b[what]}")
        print(json.dumps({"device_tracks": a["device_tracks"], "counters": a["counters"]}))
        return 0
    if len(argv) == 2:
        print(json.dumps(validate(argv[1]), indent=1))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
