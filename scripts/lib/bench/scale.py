"""Scale (--scale, --scale-only): a store of many assets made by scripts/make-store; fsck
of it, mount times (first, cold, warm), the roll's first entry, warm listings of its big album,
the daemon's memory after the mount, the listings and the reading of every asset's facts."""
import os
import time

from .harness import REPO, Mount, log, median, q


def run(bench):
    n, k = bench.scale_assets, bench.scale_album
    log(f"scale: generating a store of {n} assets with an album of {k}")
    store = os.path.join(bench.work, "scale-store")
    mnt = os.path.join(bench.work, "scale-mnt")
    plain_album = os.path.join(bench.work, "scale-plain", "Big")
    seconds, out = bench.sh(f"ALBUMFS_BIN={q(bench.binary)} {q(os.path.join(REPO, 'scripts', 'make-store'))} "
                           f"{q(store)} --assets {n} --album-size {k}", capture=True,
                           timeout=max(bench.timeout, 1800))
    log("  " + out.strip())
    lines = [f"store of {n} assets, album Albums/Big of {k} (made by scripts/make-store in {seconds:.1f} s)"]
    os.makedirs(plain_album)
    for i in range(k):
        os.close(os.open(os.path.join(plain_album, f"IMG_{i:07d}.JPG"), os.O_WRONLY | os.O_CREAT, 0o644))
    fsck_seconds, fsck = bench.sh(f"{q(bench.binary)} fsck --store {q(store)}", capture=True, check=False,
                                 timeout=max(bench.timeout, 600))
    lines.append(f"albumfs fsck --store STORE: {fsck_seconds:.2f} s: {fsck.strip()}")
    if "consistent" not in fsck:
        bench.problem(f"scale: fsck of the generated store: {fsck.strip()}")

    mount = Mount(bench.binary, store, mnt, bench.mount_options)
    bench.mounts.append(mount)
    rounds = max(bench.rounds, 3)
    times = {"first": [], "cold": [], "warm": []}
    entry = {"cold": [], "warm": []}
    for r in range(rounds + 1):
        for kind in ("cold", "warm"):
            if kind == "cold":
                bench.drop_caches()
            else:
                bench.sh("sync")
            seconds = mount.mount(timeout=120)
            if r > 0:
                entry[kind].append(first_entry_seconds(os.path.join(mnt, "Camera Roll")))
            mount.unmount()
            times["first" if r == 0 and kind == "cold" else kind].append(seconds)
    lines.append(f"mount (albumfs mount … returns, live): first after generation {times['first'][0]:.3f} s; "
                 f"cold cache median {median(times['cold']):.3f} s; warm median {median(times['warm']):.3f} s "
                 f"(bar < 1 s)")
    lines.append(f"  cold: {' '.join(f'{t:.3f}' for t in times['cold'])}; "
                 f"warm: {' '.join(f'{t:.3f}' for t in times['warm'])}")
    lines.append(f"the roll's first entry right after the mount (opendir to the first getdents): cold median "
                 f"{median(entry['cold']):.3f} s, warm median {median(entry['warm']):.3f} s (bar ≤ 0.2 s)")
    if max(median(entry["cold"]), median(entry["warm"])) > 0.2:
        bench.problem(f"scale: the roll's first entry takes {median(entry['cold']):.3f} s cold (bar ≤ 0.2 s)")

    mount.mount(timeout=120)
    bench.active = mount
    mounted_rss = mount.status("VmRSS")
    start_rows = len(bench.rows)
    for name, template in (("ls", "ls {} > /dev/null"), ("ls -l", "ls -l {} > /dev/null")):
        commands = {"plain": template.format(q(plain_album)),
                    "albumfs": template.format(q(os.path.join(mnt, "Albums", "Big")))}
        bench.measure(f"scale: warm {name}, album of {k} (store of {n})", commands,
                     before=lambda side, c=commands: bench.sh(c[side]), bar="≤ 1.5", rounds=rounds)
    _, count = bench.sh(f"ls {q(os.path.join(mnt, 'Albums', 'Big'))} | wc -l", capture=True)
    if count.strip() != str(k):
        bench.problem(f"scale: the album lists {count.strip()} entries, expected {k}")
    rss, hwm = mount.status("VmRSS"), mount.status("VmHWM")
    lines.append(f"daemon VmRSS right after the mount {mib(mounted_rss)}, after the listings {mib(rss)} "
                 f"(VmHWM {mib(hwm)}; bar ≤ 64 MiB)")
    for value in (mounted_rss, rss):
        if value and value > 64 * 1024:
            bench.problem(f"scale: the daemon's VmRSS is {mib(value)} with {n} assets (bar ≤ 64 MiB)")
    local_rss = browsed_rss(bench, mount, mnt)
    # Every asset's facts read (make-store's are unread): the backlog a library of millions
    # brings to its first mount, which must not set the daemon's memory either.
    index_seconds, _ = bench.sh(f"{q(bench.binary)} index --wait --timeout 7200 {q(mnt)}",
                                timeout=max(bench.timeout, 7200))
    indexed_rss = mount.status("VmRSS")
    lines.append(f"daemon VmRSS after reading the facts of every asset ({index_seconds:.0f} s): {mib(indexed_rss)} "
                 f"(bar ≤ 64 MiB)")
    if indexed_rss and indexed_rss > 64 * 1024:
        bench.problem(f"scale: the daemon's VmRSS is {mib(indexed_rss)} after reading the backlog (bar ≤ 64 MiB)")
    mount.unmount()
    lines += remote_only_memory(bench, n, k, local_rss)
    bench.scale_rows = bench.rows[start_rows:]
    del bench.rows[start_rows:]
    bench.scale_lines = lines


def mib(kib) -> str:
    return f"{kib / 1024:.1f} MiB" if kib else "unknown"


def first_entry_seconds(directory) -> float:
    """Seconds from opening `directory` to its first entry (the first getdents64 that returns
    any): what a file manager opening it waits for before it can draw anything."""
    start = time.monotonic()
    with os.scandir(directory) as entries:
        next(entries)
    return time.monotonic() - start


def browsed_rss(bench, mount, mnt) -> int | None:
    """The daemon's VmRSS (KiB) after one of each browse of the whole library: ls -l of the album
    and of the roll, du -s of the roll (every asset looked up and stat'ed)."""
    for command in ("ls -l {}/Albums/Big", "ls -l {}/'Camera Roll'", "du -s {}/'Camera Roll'"):
        bench.sh(command.format(q(mnt)) + " > /dev/null", timeout=max(bench.timeout, 600))
    return mount.status("VmRSS")


def remote_only_memory(bench, n, k, local_rss) -> list[str]:
    """The same library with every original only in a bucket (make-store --remote-only: recorded
    as uploaded and evicted, no content file; the endpoint is a closed port, as browsing needs
    no network): the daemon's VmRSS after the same browses, against the local library's (bar
    ≤ 1.2 ×)."""
    store = os.path.join(bench.work, "scale-remote-store")
    mnt = os.path.join(bench.work, "scale-remote-mnt")
    seconds, out = bench.sh(f"ALBUMFS_BIN={q(bench.binary)} {q(os.path.join(REPO, 'scripts', 'make-store'))} "
                           f"{q(store)} --assets {n} --album-size {k} --remote-only s3://albumfs-scale/lib "
                           f"--endpoint http://127.0.0.1:9", capture=True, timeout=max(bench.timeout, 1800))
    log("  " + out.strip())
    mount = Mount(bench.binary, store, mnt, bench.mount_options, create=False)
    mount.env.update({"AWS_ACCESS_KEY_ID": "albumfs-scale", "AWS_SECRET_ACCESS_KEY": "albumfs-scale"})
    bench.mounts.append(mount)
    mount.mount(timeout=120)
    try:
        remote_rss = browsed_rss(bench, mount, mnt)
    finally:
        mount.unmount()
    if not (local_rss and remote_rss):
        return ["daemon RSS, remote-only against local: unknown"]
    ratio = remote_rss / local_rss
    if ratio > 1.2:
        bench.problem(f"scale: the remote-only library's daemon has {ratio:.2f} × the local one's VmRSS (bar ≤ 1.2)")
    return [f"daemon VmRSS after ls -l of the album and the roll and du -s of the roll: {n} remote-only assets "
            f"(made in {seconds:.1f} s) {remote_rss / 1024:.1f} MiB, the same library local {local_rss / 1024:.1f} MiB: "
            f"{ratio:.2f} × (bar ≤ 1.2)"]
