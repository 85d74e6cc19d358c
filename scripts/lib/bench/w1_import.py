"""W1: importing photos and a big file with cp, into an album and the roll."""
import os
import shutil

from .harness import human_bytes, log, q


def run(bench):
    log("W1 import")
    photos = os.path.join(bench.src, "photos")
    big = os.path.join(bench.src, "big.MOV")

    # passthrough_ll's mount (peer.py) is a plain tree behind FUSE: it is handled as the plain tree.
    roots = bench.roots()

    def remove_import(side):
        root = roots[side]
        album = os.path.join(root, "Albums", "Import")
        roll = os.path.join(root, "Camera Roll")
        if os.path.isdir(album):
            # In albumfs, deleting from the roll deletes the asset (and its album
            # entries) and frees its data; the plain tree mirrors it.
            for name in os.listdir(album):
                try:
                    os.unlink(os.path.join(roll, name))
                except FileNotFoundError:
                    pass
            if side != "albumfs":
                shutil.rmtree(album)
            else:
                left = os.listdir(album)
                if left:
                    bench.problem(f"Albums/Import still holds {len(left)} entries after deleting them from the roll")
                    for name in left:
                        os.unlink(os.path.join(album, name))
                os.rmdir(album)
        bench.purge_trash(side)
        bench.sh(f"sync; cat {q(photos)}/* > /dev/null")

    def link_import(side, _):
        if side != "albumfs":
            album = os.path.join(roots[side], "Albums", "Import")
            for name in os.listdir(album):
                os.link(os.path.join(album, name), os.path.join(roots[side], "Camera Roll", name))

    def remove_big(side):
        path = os.path.join(roots[side], "Camera Roll", "big.MOV")
        if os.path.exists(path):
            os.unlink(path)
        bench.purge_trash(side)
        bench.sh(f"sync; cat {q(big)} > /dev/null")

    def copies(flags, source, where):
        """cp on each side; and its floor on the plain tree (full runs): cp into a
        FUSE mount cannot use copy_file_range (EXDEV across filesystems), so it
        copies with read and write; the same copy into the plain tree
        (--reflink=never) is what no FUSE filesystem can beat."""
        trees = [(side, root, "") for side, root in roots.items()]
        if not bench.quick:
            trees.append(("floor", bench.plain, "--reflink=never "))
        return {side: f"cp {flags}{extra}{q(source)} {q(os.path.join(root, where))} && sync"
                for side, root, extra in trees}

    for r in range(bench.rounds):
        # One round of each, so the photos and the 2 GiB file alternate too.
        bench.measure_round_into(
            f"W1 import: cp -r {bench.photos} × {human_bytes(bench.photo_size)} into an album + sync",
            copies("-r ", photos, os.path.join("Albums", "Import")),
            before=remove_import, after=link_import, bar="≤ 1.5")
        bench.measure_round_into(
            f"W1 import: cp {human_bytes(bench.big_size)} file into the roll + sync",
            copies("", big, "Camera Roll/"),
            before=remove_big, bar="≤ 1.6")
        log(f"  W1 round {r + 1} done")

    # The imported data must be what was copied (not timed).
    album = os.path.join(bench.mnt, "Albums", "Import")
    _, out = bench.sh(f"diff -rq {q(photos)} {q(album)} && cmp {q(big)} {q(bench.mnt)}/'Camera Roll/big.MOV' "
                     f"&& echo same", check=False, capture=True)
    if "same" not in (out or ""):
        bench.problem("W1: the imported files differ from the originals")
