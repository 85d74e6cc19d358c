"""W5: random 4 KiB reads of the big file (IOPS)."""
import os

from .harness import HERE, human_bytes, log, q


def run(bench):
    log("W5 random reads")
    cold = "cold start" if bench.can_drop else "NOT cold"
    program = os.path.join(HERE, "randread.py")
    bench.measure(f"W5 random 4 KiB reads of the {human_bytes(bench.big_size)} file, {bench.random_seconds:g} s, "
                 f"1 thread ({cold}): IOPS",
                 {side: f"python3 {q(program)} {q(os.path.join(root, 'Camera Roll', 'big.MOV'))} "
                        f"{bench.random_seconds} 42" for side, root in bench.sides.items()},
                 kind="iops", before=lambda side: bench.drop_caches(), bar="≥ 0.8")
