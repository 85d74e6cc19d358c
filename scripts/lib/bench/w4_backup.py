"""W4: backing up an album with rsync -a, and a no-change run right after; and the same rsync of
an album just imported, while albumfs still reads its files' facts in the background, against
the same rsync once they are read (issue "Fast again": background work is invisible)."""
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

    right_after_import(bench)


def right_after_import(bench):
    """cp -r of the photos into a new album + sync (not timed), then at once rsync -a of it out
    (timed): on albumfs the facts worker reads the same 300 files meanwhile. The same again
    with `albumfs index --wait` between the copy and the rsync (the facts read): the two
    albumfs columns differ by what the background reading costs the user."""
    # Names of their own: the roll already holds IMG_*.JPG from W1, so a copy of those names
    # would be given other roll names, and deleting by the album's names would delete W1's
    # photos (which W6 and W7 go on to use).
    photos = os.path.join(bench.src, "fresh")
    if not os.path.isdir(photos):
        os.makedirs(photos)
        for name in sorted(os.listdir(os.path.join(bench.src, "photos"))):
            os.link(os.path.join(bench.src, "photos", name), os.path.join(photos, "FRESH" + name[3:]))
    out = os.path.join(bench.work, "out-fresh")
    values = {"plain": [], "during": [], "after": []}
    for r in range(bench.rounds):
        for case in ("plain", "during", "after"):
            side = "plain" if case == "plain" else "albumfs"
            root = bench.sides[side]
            album = os.path.join(root, "Albums", "Fresh")
            bench.check_side(side)
            shutil.rmtree(out, ignore_errors=True)
            bench.sh(f"cp -r {q(photos)} {q(album)} && sync")
            if case == "after":
                bench.sh(f"{q(bench.binary)} index --wait --timeout {int(3 * bench.timeout)} {q(bench.mnt)}")
            seconds, _ = bench.sh(f"rsync -a {q(album)}/ {q(out)}/")
            values[case].append(seconds)
            # Deleted from the roll (albumfs: every name, then Recently Deleted emptied).
            roll = os.path.join(root, "Camera Roll")
            for name in os.listdir(album):
                if side == "albumfs":
                    os.unlink(os.path.join(roll, name))
            shutil.rmtree(album)
            bench.purge_trash(side)
        log(f"  W4 right after an import, round {r + 1}: plain {values['plain'][-1]:.3f}, albumfs while its facts "
            f"are read {values['during'][-1]:.3f}, once they are read {values['after'][-1]:.3f}")
    bench.rows.append((f"W4 rsync -a of an album of {bench.photos} right after its cp -r + sync (warm; albumfs "
                       f"reads their facts meanwhile)", values["plain"], values["during"], "seconds", "≤ 1.3"))
    bench.rows.append((f"W4 the same rsync once the facts are read (index --wait first)",
                       values["plain"], values["after"], "seconds", "≤ 1.3"))
