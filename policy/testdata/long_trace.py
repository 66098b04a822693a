#!/usr/bin/env python3
"""long_trace.py N OUT: writes a gswap-trace of N launches over 64 regions of 4 MiB, each launch
allocating a 4 MiB region freed two launches later (a memory curve that changes at every launch),
for the tests of what long traces draw."""
import json
import sys

n, out = int(sys.argv[1]), sys.argv[2]
regions = [{"id": i, "bytes": 4 << 20, "alloc_seq": 0, "free_seq": None} for i in range(64)]
launches = []
for s in range(n):
    seq = 3 * s + 1
    temp = 1000 + s
    regions.append({"id": temp, "bytes": 4 << 20, "alloc_seq": seq - 1, "free_seq": seq + 5})
    launches.append({"seq": seq, "start_us": 2 * s, "dur_us": 1.5, "stream": 0,
                     "regions": [s % 64, (7 * s + 3) % 64, temp], "kernel": "k%d" % (s % 50)})
trace = {"format": "gswap-trace", "version": 1,
         "device": {"capacity_bytes": 85899345920, "h2d_bytes_per_s": 5e10,
                    "d2h_bytes_per_s": 5e10},
         "regions": regions, "launches": launches}
with open(out, "w") as f:
    json.dump(trace, f)
