#!/usr/bin/env python3
"""stress-traces.py: writes gswap-trace files of shapes that once made gswapctl slow, for
docs/benchmarks.md ("Stress traces").

  stress-traces.py long N       N launches, each reading one 4 MiB region (17.6 MB at 200,000)
  stress-traces.py wide N M     M regions of 4 MiB; launch i reads every region r with
                                (r + i) % 3 == 0, so each launch touches M/3 of them

The trace goes to standard output.
"""
import json
import sys

MIB = 1 << 20


def trace(regions, launches):
    device = {"capacity_bytes": 1 << 40, "h2d_bytes_per_s": 1e10, "d2h_bytes_per_s": 1e10}
    return json.dumps({"format": "gswap-trace", "version": 1, "device": device,
                       "regions": regions, "launches": launches}, separators=(",", ":"))


def region(i):
    return {"id": i, "bytes": 4 * MIB, "alloc_seq": 0, "free_seq": None}


def launch(seq, regions):
    return {"seq": seq, "start_us": float(seq * 10), "dur_us": 10.0, "stream": 0,
            "regions": regions, "kernel": f"k{seq % 7}"}


def main(argv):
    if len(argv) == 3 and argv[1] == "long":
        n = int(argv[2])
        print(trace([region(0)], [launch(i, [0]) for i in range(n)]))
    elif len(argv) == 4 and argv[1] == "wide":
        n, m = int(argv[2]), int(argv[3])
        print(trace([region(r) for r in range(m)],
                    [launch(i, [r for r in range(m) if (r + i) % 3 == 0]) for i in range(n)]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
