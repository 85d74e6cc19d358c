"""W6, Recently Deleted: deleting is forgiving and must stay cheap: a delete and a restore are
one transaction however many albums hold the photo; Recently Deleted lists as fast as any
directory; a file manager's Empty Trash of many items is quick. Plain's counterpart of a delete
is a move into a trash directory and back."""
import os

from .harness import log, q


def run(bench):
    log("W6 Recently Deleted")
    n = min(500, bench.photos)
    names = sorted(os.listdir(os.path.join(bench.plain, "Albums", "Import")))[:n]
    plain_trash = os.path.join(bench.work, "plain-trash")
    os.makedirs(plain_trash, exist_ok=True)
    script = os.path.join(bench.work, "w6.py")
    with open(script, "w") as f:
        f.write("import os, sys\n"
                "side, roll, trash, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]\n"
                "for n in names:\n"
                "    if side == 'albumfs':\n"
                "        os.unlink(os.path.join(roll, n))\n"
                "    else:\n"
                "        os.rename(os.path.join(roll, n), os.path.join(trash, n))\n"
                "    os.rename(os.path.join(trash, n), os.path.join(roll, n))\n")
    trash = {"plain": plain_trash, "albumfs": os.path.join(bench.mnt, "Recently Deleted")}
    for albums in (1, 20):
        for side, root in bench.sides.items():
            # The photos are in Albums/Import; add them to more albums (not timed).
            for k in range(1, albums):
                album = os.path.join(root, "Albums", f"W6-{k}")
                if not os.path.isdir(album):
                    os.mkdir(album)
                    for name in names:
                        os.link(os.path.join(root, "Albums", "Import", name), os.path.join(album, name))
        bench.measure(f"W6 rm + restore of {n} photos, each in {albums} album{'s' if albums > 1 else ''} "
                     f"(plain: mv to a trash dir and back)",
                     {side: f"python3 {q(script)} {side} {q(os.path.join(root, 'Camera Roll'))} "
                            f"{q(trash[side])} " + " ".join(q(x) for x in names)
                      for side, root in bench.sides.items()})
    # Every photo is back where it was, in every album (not timed).
    for name in names:
        if os.lstat(os.path.join(bench.mnt, "Camera Roll", name)).st_nlink != 21:
            bench.problem(f"W6: {name} is not back in its 20 albums after the restores")
            break

    # Delete the big album's assets (not timed): Recently Deleted and the trash fill up.
    big = {side: os.path.join(root, "Albums", "Big") for side, root in bench.sides.items()}
    count = len(os.listdir(big["albumfs"]))
    for side, root in bench.sides.items():
        for name in os.listdir(big[side]):
            if side == "albumfs":
                os.unlink(os.path.join(root, "Camera Roll", name))
            else:
                os.rename(os.path.join(root, "Camera Roll", name), os.path.join(plain_trash, name))
                os.unlink(os.path.join(big[side], name))
    listings = {side: f"ls -l {q(trash[side])} > /dev/null" for side in bench.sides}
    bench.measure(f"W6 warm ls -l Recently Deleted of {count} (plain: a dir of {count})", listings,
                 before=lambda side: bench.sh(listings[side]), bar="≤ 1.5")
    # Empty Trash of (at most) 10,000 of them: every item unlinked from the trash's files/, as
    # a file manager's Empty Trash does item by item (each purges a photo for good).
    files = {"plain": plain_trash, "albumfs": os.path.join(bench.mnt, f".Trash-{os.getuid()}", "files")}
    emptied = sorted(os.listdir(files["albumfs"]))[:10_000]
    listing = os.path.join(bench.work, "w6-empty.txt")
    with open(listing, "w") as f:
        f.write("\n".join(emptied))
    empty = ("import os, sys\n"
             "for n in open(sys.argv[2]).read().split('\\n'): os.unlink(os.path.join(sys.argv[1], n))\n")
    with open(script, "w") as f:
        f.write(empty)
    bench.measure(f"W6 Empty Trash of {len(emptied)} photos deleted with rm (unlink in the trash's files/)",
                 {side: f"python3 {q(script)} {q(files[side])} {q(listing)}" for side in bench.sides},
                 rounds=1, bar="< 10 s")
    left = len(os.listdir(trash["albumfs"]))
    if left != count - len(emptied):
        bench.problem(f"W6: Recently Deleted holds {left} after emptying {len(emptied)} of {count} from the trash")
