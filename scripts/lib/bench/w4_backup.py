"""W4: backing up an album with rsync -a, and a no-change run right after."""
import os
import shutil

from .harness import log, q


def run(bench):
    log("W4 backup")
    outs = {side: os.path.join(bench.work, f"out-{side}") for side in bench.sides}
    srcs = {side: os.path.join(root, "Albums", "Import") for side, root in bench.sides.items()}
    full = {side: f"rsync -a {q(srcs[side])}/ {q(outs[side])}/" for side in bench.sides}
    cold = "cold" if bench.can_drop else "NOT cold"
    plain_values, albumfs_values = {"full": [], "again": []}, {"full": [], "again": []}
    for r in range(bench.rounds):
        for side in ("plain", "albumfs"):
            bench.check_side(side)
            if os.path.exists(outs[side]):
                shutil.rmtree(outs[side])
            bench.drop_caches()
            bench.check_side(side)
            first, _ = bench.sh(full[side])
            second, _ = bench.sh(full[side])
            values = plain_values if side == "plain" else albumfs_values
            values["full"].append(first)
            values["again"].append(second)
            # A second run must have nothing to transfer (not timed).
            _, changes = bench.sh(f"rsync -a -n -i {q(srcs[side])}/ {q(outs[side])}/", capture=True)
            if changes.strip():
                bench.problem(f"W4: a third rsync from {side} still has "
                             f"{len(changes.splitlines())} changes, e.g. {changes.splitlines()[0]}")
        log(f"  W4 round {r + 1}: full plain {plain_values['full'][-1]:.3f}, albumfs "
            f"{albumfs_values['full'][-1]:.3f}; no change plain {plain_values['again'][-1]:.3f}, "
            f"albumfs {albumfs_values['again'][-1]:.3f}")
    bench.rows.append((f"W4 rsync -a album of {bench.photos} to a plain dir ({cold})",
                      plain_values["full"], albumfs_values["full"], "seconds", "≤ 1.3"))
    bench.rows.append(("W4 rsync -a again, no change (warm, right after)",
                      plain_values["again"], albumfs_values["again"], "seconds", "≤ 1.5"))
    _, out = bench.sh(f"diff -rq {q(os.path.join(bench.src, 'photos'))} {q(outs['albumfs'])} && echo same",
                     capture=True, check=False)
    if "same" not in (out or ""):
        bench.problem("W4: the rsync copy out of albumfs differs from the originals")
