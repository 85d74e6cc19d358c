"""W7, what albumfs knows of its files (issue 12): the daemon reads every file in the
background; a By Date month lists like an album of its size; and the daemon's reading
of every file of W1 against sha256sum + exiftool -fast over the same files."""
import os
import shutil

from .harness import Mount, human_bytes, log, q


def run(bench):
    log("W7 facts and views")
    with bench.watchdog.phase("W7: waiting for every file to be read", 4 * bench.timeout):
        bench.sh(f"{q(bench.binary)} index --wait --timeout {int(3 * bench.timeout)} {q(bench.mnt)}")
    by_date = os.path.join(bench.mnt, "By Date")
    months = [os.path.join(by_date, y, m) for y in os.listdir(by_date) for m in os.listdir(os.path.join(by_date, y))]
    if not months:
        bench.problem("W7: By Date is empty after every file was read")
        return
    month = max(months, key=lambda path: len(os.listdir(path)))
    count = len(os.listdir(month))
    album = os.path.join(bench.mnt, "Albums", "Big")
    if os.path.isdir(album):
        listings = {"plain": f"ls -l {q(album)} > /dev/null", "albumfs": f"ls -l {q(month)} > /dev/null"}
        bench.measure(f"W7 warm ls -l of a By Date month of {count} (plain column: Albums/Big of "
                     f"{len(os.listdir(album))}, same mount)", listings,
                     before=lambda side: bench.sh(listings[side]), bar="≤ 1.5")
    # Reading every file again: a store holding W1's photos, its facts forgotten, mounted.
    photos = os.path.join(bench.src, "photos")
    store, mnt = os.path.join(bench.work, "w7-store"), os.path.join(bench.work, "w7-mnt")
    os.makedirs(mnt, exist_ok=True)
    reader = Mount(bench.binary, store, mnt, bench.mount_options)
    bench.mounts.append(reader)
    reader.mount()
    bench.sh(f"cp -r {q(photos)}/. {q(os.path.join(mnt, 'Camera Roll'))}/")
    bench.sh(f"{q(bench.binary)} index --wait --timeout {int(3 * bench.timeout)} {q(mnt)}")
    reader.unmount()

    def forget_facts(side):
        if side == "albumfs":
            # Through albumfs itself, never the schema from here (the hidden make-store command).
            bench.sh(f"{q(bench.binary)} make-store --forget-facts {q(store)}")
        bench.drop_caches()

    def unmount_reader(side, _out):
        if side == "albumfs":
            # albumfs unmount returns once the daemon let go of the store.
            bench.sh(f"{q(bench.binary)} unmount {q(mnt)}")

    exiftool = shutil.which("exiftool")
    # (exiftool exits 1 on files it has no tags for, as the bench's random bytes are.)
    plain = f"sha256sum {q(photos)}/* > /dev/null" + (f" && {{ exiftool -fast -q -j {q(photos)} > /dev/null 2>&1 || true; }}" if exiftool else "")
    daemon = (f"{q(bench.binary)} mount --store {q(store)} {q(mnt)} && "
              f"{q(bench.binary)} index --wait --timeout {int(3 * bench.timeout)} {q(mnt)}")
    n = len(os.listdir(photos))
    bench.measure(f"W7 reading {n} photos ({human_bytes(n * bench.photo_size)}), cold: albumfs mounts and reads every "
                 f"file's facts (plain column: sha256sum{' + exiftool -fast' if exiftool else ''})",
                 {"plain": plain, "albumfs": daemon}, before=forget_facts, after=unmount_reader, bar="≤ 1.5")
    bench.mounts.remove(reader)
