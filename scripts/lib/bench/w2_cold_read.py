"""W2: reading the imported files cold."""
import os

from .harness import human_bytes, log, q


def run(bench):
    log("W2 cold read")
    cold = "cold" if bench.can_drop else "NOT cold (cannot drop caches)"
    # passthrough_ll (peer.py) reads what W1 copied into it too.
    roots = bench.roots()
    bench.measure(f"W2 {cold} read: cat {bench.photos} × {human_bytes(bench.photo_size)} > /dev/null",
                 {side: f"cat {q(os.path.join(root, 'Albums', 'Import'))}/* > /dev/null"
                  for side, root in roots.items()},
                 before=lambda side: bench.drop_caches(), bar="≤ 1.3")
    bench.measure(f"W2 {cold} read: cat {human_bytes(bench.big_size)} > /dev/null",
                 {side: f"cat {q(os.path.join(root, 'Camera Roll', 'big.MOV'))} > /dev/null"
                  for side, root in roots.items()},
                 before=lambda side: bench.drop_caches(), bar="≤ 1.2")
