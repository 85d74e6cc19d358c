#!/usr/bin/env python3
"""Random 4 KiB reads of one file for a fixed time, single thread, normal
(buffered) pread at 4 KiB-aligned offsets from a seeded generator, so two runs
on two copies of a file read the same offsets in the same order.

    randread.py FILE SECONDS [SEED]    prints: reads seconds iops
"""
import os
import random
import sys
import time

BLOCK = 4096


def main():
    path, seconds = sys.argv[1], float(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 42
    rng = random.Random(seed)
    fd = os.open(path, os.O_RDONLY)
    try:
        blocks = os.fstat(fd).st_size // BLOCK
        if blocks == 0:
            sys.exit(f"randread: {path} is smaller than {BLOCK} bytes")
        pread, randrange, clock = os.pread, rng.randrange, time.perf_counter
        reads = 0
        start = clock()
        deadline = start + seconds
        now = start
        while now < deadline:
            for _ in range(64):
                if len(pread(fd, BLOCK, randrange(blocks) * BLOCK)) != BLOCK:
                    sys.exit(f"randread: short read from {path}")
            reads += 64
            now = clock()
        elapsed = now - start
    finally:
        os.close(fd)
    print(f"{reads} {elapsed:.6f} {reads / elapsed:.1f}")


if __name__ == "__main__":
    main()
