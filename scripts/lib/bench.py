#!/usr/bin/env python3
"""albumfs against a plain directory on the same disk. Run through scripts/bench,
which builds the release binary and passes it in $ALBUMFS_BIN.

Each workload runs the same shell command on a plain tree and on an albumfs
mount of the same shape, interleaved (plain, albumfs, plain, albumfs, ...),
for --rounds rounds; the table gives the medians and the ratio albumfs/plain
(for W5: albumfs IOPS / plain IOPS). Cold runs follow
`sync; echo 3 > /proc/sys/vm/drop_caches`; warm runs follow one untimed run of
the same command.

Layout of the work dir ($ALBUMFS_BENCH_DIR, default /var/tmp/albumfs-bench):
  src/photos/IMG_0000.JPG ...  the photos to import (1 MiB random bytes each)
  src/big.MOV                  the big file (2 GiB random bytes)
  plain/Albums/Big/            the big album (4 KiB random files)
  plain/Albums/Import/         W1's copy of src/photos
  plain/Camera Roll/           hard links of everything in plain/Albums, and big.MOV
  store/, mnt/                 the albumfs store and its mount, same tree
  out-plain/, out-albumfs/     W4's rsync targets
"""
import argparse
import contextlib
import os
import shlex
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time

from albumfs_mount import Mount as AlbumfsMount, MountError, kill_group, mount_points_below, run_bounded

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MARKER = ".albumfs-bench"
MiB = 1 << 20
GiB = 1 << 30


class BenchError(Exception):
    pass


class Terminated(BaseException):
    pass


def log(message):
    sys.stderr.write(f"[bench {time.strftime('%H:%M:%S')}] {message}\n")
    sys.stderr.flush()


def q(path):
    return shlex.quote(path)


def median(values):
    return statistics.median(values) if values else float("nan")


def human_bytes(n):
    if n >= GiB and n % GiB == 0:
        return f"{n // GiB} GiB"
    if n >= MiB and n % MiB == 0:
        return f"{n // MiB} MiB"
    return f"{n // 1024} KiB"


class Runner:
    """Runs shell commands in their own session with a timeout; a command that
    does not end in time is killed with its whole process group."""

    def __init__(self, on_stuck):
        self.current = None
        self.on_stuck = on_stuck

    def run(self, command, timeout, capture=False, check=True):
        """Runs `command` under bash; returns (seconds, stdout or None)."""
        start = time.perf_counter()
        process = subprocess.Popen(["bash", "-c", "set -o pipefail; " + command], start_new_session=True,
                                   stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
        self.current = process
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill(process)
            raise BenchError(f"timed out after {timeout} s: {command}")
        finally:
            self.current = None
        seconds = time.perf_counter() - start
        if check and process.returncode != 0:
            raise BenchError(f"failed (exit {process.returncode}): {command}\n{err.strip()}")
        return seconds, out

    def kill(self, process):
        kill_group(process, 15, on_stuck=self.on_stuck, log=log)

    def kill_current(self):
        if self.current is not None and self.current.poll() is None:
            self.kill(self.current)


class Watchdog:
    """Bounds the bench's own file operations on the mount, which no subprocess
    timeout covers: when a phase overruns, `on_expire` kills the daemons, so
    every request waiting on them fails (ENOTCONN) instead of hanging."""

    def __init__(self, on_expire):
        self.on_expire = on_expire
        self.deadline = None
        self.what = None
        self.expired = None
        self.lock = threading.Lock()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self):
        while True:
            time.sleep(0.5)
            with self.lock:
                overdue = self.deadline is not None and time.monotonic() > self.deadline
                what = self.what
                if overdue:
                    self.deadline = None
            if overdue:
                self.expired = what
                log(f"HUNG: {what} did not finish in time: stopping the daemons")
                self.on_expire()

    @contextlib.contextmanager
    def phase(self, what, seconds):
        with self.lock:
            self.deadline, self.what = time.monotonic() + seconds, what
        try:
            yield
        except OSError as error:
            if self.expired == what:
                raise BenchError(f"{what} hung (the daemon was stopped after {seconds:.0f} s): {error}")
            raise
        finally:
            with self.lock:
                self.deadline = None


class Mount(AlbumfsMount):
    """One albumfs mount made with `albumfs mount --store STORE --create MOUNTPOINT` (the bench's
    stores are its own, made on first mount); the supervisor is albumfs_mount's, shared with the
    tests. Here ending a mount is a best effort that logs what went wrong."""

    def __init__(self, binary, store, mountpoint, options=()):
        super().__init__(binary, store, mountpoint, options=options, create=True)

    def kill(self):
        """The last resort for a hung mount: the daemon dies, the kernel fails every request
        waiting on it, and the mount can be unmounted."""
        if self.daemon_alive():
            log(f"killing the albumfs daemon {self.pid}")
        self.break_loose()

    def unmount(self):
        """fusermount3 -u (a few tries), then -uz; waits for the daemon to end, then kills it."""
        for problem in self.cleanup(tries=3):
            log(f"{self.mp}: {problem}")


class Bench:
    def __init__(self, args, dropper=None):
        self.args = args
        self.quick = args.quick
        self.binary = os.environ.get("ALBUMFS_BIN") or shutil.which("albumfs")
        if not self.binary or not os.access(self.binary, os.X_OK):
            raise BenchError("set ALBUMFS_BIN to the albumfs binary (scripts/bench does)")
        self.work = os.path.realpath(os.environ.get("ALBUMFS_BENCH_DIR", "/var/tmp/albumfs-bench"))
        if self.quick:
            self.photos, self.photo_size, self.big_size, self.album_size = 200, MiB, 64 * MiB, 5_000
            self.rounds, self.random_seconds, self.timeout = 1, 2.0, 60
            self.scale_assets, self.scale_album = 100_000, 10_000
        else:
            self.photos, self.photo_size, self.big_size, self.album_size = 2_000, MiB, 2 * GiB, 100_000
            self.rounds, self.random_seconds, self.timeout = 3, 10.0, 900
            self.scale_assets, self.scale_album = 1_000_000, 100_000
        if args.rounds:
            self.rounds = args.rounds
        if args.photos:
            self.photos = args.photos
        if args.big_mib:
            self.big_size = args.big_mib * MiB
        self.workloads = set(args.only.split(",")) if args.only else {"W1", "W2", "W3", "W4", "W5", "W6", "W7"}
        # --data-path daemon: every read and write through the daemon, as on a kernel
        # without FUSE passthrough (a user's mount takes that path whatever it asks).
        self.mount_options = ["nopassthrough"] if args.data_path == "daemon" else []
        if os.environ.get("ALBUMFS_BENCH_STEP_TIMEOUT"):
            self.timeout = int(os.environ["ALBUMFS_BENCH_STEP_TIMEOUT"])
        if args.scale_assets:
            self.scale_assets = args.scale_assets
            self.scale_album = min(self.scale_album, self.scale_assets)
        # As another user (--as-user), root's helper process drops the caches (see drop_caches).
        self.dropper = dropper
        self.can_drop = dropper is not None or (
            os.geteuid() == 0 and os.access("/proc/sys/vm/drop_caches", os.W_OK))
        self.mounts = []
        self.runner = Runner(on_stuck=self.kill_daemons)
        self.watchdog = Watchdog(on_expire=self.kill_daemons)
        self.rows = []         # (label, plain values, albumfs values, kind, bar)
        self.floors = {}       # label: times of the row's floor command (see measure)
        self.notes = []        # lines printed under the table
        self.problems = []     # correctness failures: exit 1

        self.src = os.path.join(self.work, "src")
        self.plain = os.path.join(self.work, "plain")
        self.store = os.path.join(self.work, "store")
        self.mnt = os.path.join(self.work, "mnt")
        self.sides = {"plain": self.plain, "albumfs": self.mnt}

    # ----- helpers

    def kill_daemons(self):
        for mount in self.mounts:
            mount.kill()

    def sh(self, command, timeout=None, capture=False, check=True):
        return self.runner.run(command, timeout or self.timeout, capture=capture, check=check)

    def drop_caches(self):
        self.sh("sync", timeout=self.timeout)
        if self.dropper is not None:
            self.dropper.drop()
        elif self.can_drop:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")

    def check_side(self, side):
        if side == "albumfs":
            self.active.check()

    def problem(self, message):
        log("PROBLEM: " + message)
        self.problems.append(message)

    # ----- set-up

    def prepare_work_dir(self):
        if os.path.exists(self.work):
            if not os.path.exists(os.path.join(self.work, MARKER)) and os.listdir(self.work):
                raise BenchError(f"{self.work} exists and is not a bench work dir; set ALBUMFS_BENCH_DIR")
            self.unmount_leftovers()
            if mount_points_below(self.work):
                raise BenchError(f"something is still mounted in {self.work}")
            log(f"removing the previous run's {self.work}")
            shutil.rmtree(self.work)
        os.makedirs(self.work)
        open(os.path.join(self.work, MARKER), "w").close()

    def unmount_leftovers(self):
        for point in mount_points_below(self.work):
            log(f"unmounting a leftover mount {point}")
            if run_bounded(["fusermount3", "-u", point], 30)[0] != 0:
                run_bounded(["fusermount3", "-uz", point], 30)

    def check_space(self, scale_only):
        data = 0
        inodes = 0
        if not scale_only:
            imported = self.photos * self.photo_size + self.big_size
            album = self.album_size * 8192  # 4 KiB of data plus the inode's share
            # src, plain, store, and the two rsync targets of the photos
            data += 3 * imported + 2 * album + 2 * self.photos * self.photo_size
            inodes += 4 * self.album_size + 6 * self.photos
        if self.args.scale or scale_only:
            data += self.scale_assets * 600 + self.scale_album * 8192 + 64 * MiB
            inodes += self.scale_assets + self.scale_album + 1000
        need = int(data * 1.1) + 2 * GiB
        st = os.statvfs(self.work)
        free = st.f_bavail * st.f_frsize
        log(f"disk: need about {need / GiB:.1f} GiB, {free / GiB:.1f} GiB free in {self.work}")
        if free < need:
            raise BenchError(f"not enough space in {self.work}: need {need / GiB:.1f} GiB, "
                             f"have {free / GiB:.1f} GiB (set ALBUMFS_BENCH_DIR)")
        if st.f_files and st.f_favail < inodes * 1.2:
            raise BenchError(f"not enough inodes in {self.work}: need {inodes}, have {st.f_favail}")

    def make_data(self):
        log(f"making data: {self.photos} × {human_bytes(self.photo_size)}, one {human_bytes(self.big_size)} file")
        photos = os.path.join(self.src, "photos")
        os.makedirs(photos)
        for i in range(self.photos):
            with open(os.path.join(photos, f"IMG_{i:04d}.JPG"), "wb") as f:
                f.write(os.urandom(self.photo_size))
        with open(os.path.join(self.src, "big.MOV"), "wb") as f:
            chunk = 16 * MiB
            for offset in range(0, self.big_size, chunk):
                f.write(os.urandom(min(chunk, self.big_size - offset)))
        os.makedirs(os.path.join(self.plain, "Camera Roll"))
        os.makedirs(os.path.join(self.plain, "Albums"))

    def build_album(self):
        with self.watchdog.phase("building the album through the mount", self.album_size / 100 + 2 * self.timeout):
            self._build_album()

    def _build_album(self):
        """The big album, once per run: plain/Albums/Big (+ roll hard links) and
        the same files created through the mount (not timed)."""
        log(f"building the album of {self.album_size} × 4 KiB (plain, and through the mount)")
        self.mount.check()
        plain_album = os.path.join(self.plain, "Albums", "Big")
        plain_roll = os.path.join(self.plain, "Camera Roll")
        mount_album = os.path.join(self.mnt, "Albums", "Big")
        os.mkdir(plain_album)
        os.mkdir(mount_album)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        start = time.perf_counter()
        for i in range(self.album_size):
            name = f"P{i:06d}.jpg"
            data = os.urandom(4096)
            for directory in (plain_album, mount_album):
                fd = os.open(os.path.join(directory, name), flags, 0o644)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
            os.link(os.path.join(plain_album, name), os.path.join(plain_roll, name))
            if i and i % 20_000 == 0:
                log(f"  {i} files ({i / (time.perf_counter() - start):.0f}/s through both)")
        self.sh("sync")
        seconds = time.perf_counter() - start
        count = len(os.listdir(mount_album))
        roll = len(os.listdir(os.path.join(self.mnt, "Camera Roll")))
        if count != self.album_size or roll != self.album_size:
            self.problem(f"after building the album: {count} entries in Albums/Big, {roll} in the roll, "
                         f"expected {self.album_size}")
        self.notes.append(f"set-up (not timed in the table): {self.album_size} creates through the mount and "
                          f"the plain dir took {seconds:.1f} s ({self.album_size / seconds:.0f} files/s)")

    # ----- measuring

    def measure(self, label, commands, kind="seconds", bar=None, before=None, after=None, rounds=None):
        """Runs commands['plain'] and commands['albumfs'] alternately, `rounds` times.
        before(side)/after(side, output) run untimed around each. kind 'seconds'
        times the command; kind 'iops' takes the command's 3rd output field.
        commands['floor'], if there, runs on the plain tree between the two (its
        hooks get side 'plain'); its times go to self.floors[label]."""
        values = {side: [] for side in commands}
        for r in range(rounds or self.rounds):
            with self.watchdog.phase(f"{label}, round {r + 1}", 4 * self.timeout):
                for side in [side for side in ("plain", "floor", "albumfs") if side in commands]:
                    tree = "plain" if side == "floor" else side
                    self.check_side(tree)
                    if before:
                        before(tree)
                    self.check_side(tree)
                    seconds, out = self.sh(commands[side], capture=True)
                    values[side].append(float(out.split()[2]) if kind == "iops" else seconds)
                    if after:
                        after(tree, out)
            digits = 0 if kind == "iops" else 3
            floor = f", floor {values['floor'][-1]:.3f}" if "floor" in values else ""
            log(f"  {label} round {r + 1}: plain {values['plain'][-1]:.{digits}f}{floor}, "
                f"albumfs {values['albumfs'][-1]:.{digits}f}")
        self.rows.append((label, values["plain"], values["albumfs"], kind, bar))
        if "floor" in values:
            self.floors.setdefault(label, []).extend(values["floor"])
        return values

    def w1_import(self):
        log("W1 import")
        photos = os.path.join(self.src, "photos")
        big = os.path.join(self.src, "big.MOV")

        def remove_import(side):
            root = self.sides[side]
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
                if side == "plain":
                    shutil.rmtree(album)
                else:
                    left = os.listdir(album)
                    if left:
                        self.problem(f"Albums/Import still holds {len(left)} entries after deleting them from the roll")
                        for name in left:
                            os.unlink(os.path.join(album, name))
                    os.rmdir(album)
            self.purge_trash(side)
            self.sh(f"sync; cat {q(photos)}/* > /dev/null")

        def link_import(side, _):
            if side == "plain":
                album = os.path.join(self.plain, "Albums", "Import")
                for name in os.listdir(album):
                    os.link(os.path.join(album, name), os.path.join(self.plain, "Camera Roll", name))

        def remove_big(side):
            path = os.path.join(self.sides[side], "Camera Roll", "big.MOV")
            if os.path.exists(path):
                os.unlink(path)
            self.purge_trash(side)
            self.sh(f"sync; cat {q(big)} > /dev/null")

        def copies(flags, source, where):
            """cp on each side; and its floor on the plain tree (full runs): cp into a
            FUSE mount cannot use copy_file_range (EXDEV across filesystems), so it
            copies with read and write; the same copy into the plain tree
            (--reflink=never) is what no FUSE filesystem can beat."""
            trees = [(side, root, "") for side, root in self.sides.items()]
            if not self.quick:
                trees.append(("floor", self.plain, "--reflink=never "))
            return {side: f"cp {flags}{extra}{q(source)} {q(os.path.join(root, where))} && sync"
                    for side, root, extra in trees}

        for r in range(self.rounds):
            # One round of each, so the photos and the 2 GiB file alternate too.
            self.measure_round_into(
                f"W1 import: cp -r {self.photos} × {human_bytes(self.photo_size)} into an album + sync",
                copies("-r ", photos, os.path.join("Albums", "Import")),
                before=remove_import, after=link_import, bar="≤ 1.5")
            self.measure_round_into(
                f"W1 import: cp {human_bytes(self.big_size)} file into the roll + sync",
                copies("", big, "Camera Roll/"),
                before=remove_big, bar="≤ 1.6")
            log(f"  W1 round {r + 1} done")

        # The imported data must be what was copied (not timed).
        album = os.path.join(self.mnt, "Albums", "Import")
        _, out = self.sh(f"diff -rq {q(photos)} {q(album)} && cmp {q(big)} {q(self.mnt)}/'Camera Roll/big.MOV' "
                         f"&& echo same", check=False, capture=True)
        if "same" not in (out or ""):
            self.problem("W1: the imported files differ from the originals")

    def measure_round_into(self, label, commands, bar, before=None, after=None):
        """One round of `measure`, accumulated into the row named `label`."""
        existing = next((row for row in self.rows if row[0] == label), None)
        values = self.measure(label, commands, bar=bar, before=before, after=after, rounds=1)
        if existing:
            self.rows.pop()
            existing[1].extend(values["plain"])
            existing[2].extend(values["albumfs"])

    def purge_trash(self, side):
        """Empties Recently Deleted (once it exists), so deleting frees the data."""
        if side != "albumfs":
            return
        trash = os.path.join(self.mnt, "Recently Deleted")
        if os.path.isdir(trash):
            for name in os.listdir(trash):
                os.unlink(os.path.join(trash, name))

    def w2_cold_read(self):
        log("W2 cold read")
        cold = "cold" if self.can_drop else "NOT cold (cannot drop caches)"
        self.measure(f"W2 {cold} read: cat {self.photos} × {human_bytes(self.photo_size)} > /dev/null",
                     {side: f"cat {q(os.path.join(root, 'Albums', 'Import'))}/* > /dev/null"
                      for side, root in self.sides.items()},
                     before=lambda side: self.drop_caches(), bar="≤ 1.3")
        self.measure(f"W2 {cold} read: cat {human_bytes(self.big_size)} > /dev/null",
                     {side: f"cat {q(os.path.join(root, 'Camera Roll', 'big.MOV'))} > /dev/null"
                      for side, root in self.sides.items()},
                     before=lambda side: self.drop_caches(), bar="≤ 1.2")

    def w3_browse(self):
        log("W3 browse (warm)")
        roll_size = self.album_size + self.photos + 1
        for where, count in (("Albums/Big", self.album_size), ("Camera Roll", roll_size)):
            dirs = {side: os.path.join(root, where) for side, root in self.sides.items()}
            what = f"album of {count}" if where.startswith("Albums") else f"roll of {count}"

            def warm(command):
                return lambda side: self.sh(command[side], capture=True)

            def expect_count(side, out):
                if out.strip() != str(count):
                    self.problem(f"W3: find in {dirs[side]} counted {out.strip()}, expected {count}")

            for name, template, check in (
                    ("ls -l", "ls -l {} > /dev/null", None),
                    ("find -type f | wc -l", "find {} -type f | wc -l", expect_count),
                    ("du -s", "du -s {}", None)):
                commands = {side: template.format(q(d)) for side, d in dirs.items()}
                self.measure(f"W3 warm {name}, {what}", commands, before=warm(commands), after=check, bar="≤ 1.5")

    def w4_backup(self):
        log("W4 backup")
        outs = {side: os.path.join(self.work, f"out-{side}") for side in self.sides}
        srcs = {side: os.path.join(root, "Albums", "Import") for side, root in self.sides.items()}
        full = {side: f"rsync -a {q(srcs[side])}/ {q(outs[side])}/" for side in self.sides}
        cold = "cold" if self.can_drop else "NOT cold"
        plain_values, albumfs_values = {"full": [], "again": []}, {"full": [], "again": []}
        for r in range(self.rounds):
            for side in ("plain", "albumfs"):
                self.check_side(side)
                if os.path.exists(outs[side]):
                    shutil.rmtree(outs[side])
                self.drop_caches()
                self.check_side(side)
                first, _ = self.sh(full[side])
                second, _ = self.sh(full[side])
                values = plain_values if side == "plain" else albumfs_values
                values["full"].append(first)
                values["again"].append(second)
                # A second run must have nothing to transfer (not timed).
                _, changes = self.sh(f"rsync -a -n -i {q(srcs[side])}/ {q(outs[side])}/", capture=True)
                if changes.strip():
                    self.problem(f"W4: a third rsync from {side} still has "
                                 f"{len(changes.splitlines())} changes, e.g. {changes.splitlines()[0]}")
            log(f"  W4 round {r + 1}: full plain {plain_values['full'][-1]:.3f}, albumfs "
                f"{albumfs_values['full'][-1]:.3f}; no change plain {plain_values['again'][-1]:.3f}, "
                f"albumfs {albumfs_values['again'][-1]:.3f}")
        self.rows.append((f"W4 rsync -a album of {self.photos} to a plain dir ({cold})",
                          plain_values["full"], albumfs_values["full"], "seconds", "≤ 1.3"))
        self.rows.append(("W4 rsync -a again, no change (warm, right after)",
                          plain_values["again"], albumfs_values["again"], "seconds", "≤ 1.5"))
        _, out = self.sh(f"diff -rq {q(os.path.join(self.src, 'photos'))} {q(outs['albumfs'])} && echo same",
                         capture=True, check=False)
        if "same" not in (out or ""):
            self.problem("W4: the rsync copy out of albumfs differs from the originals")

    def w5_random(self):
        log("W5 random reads")
        cold = "cold start" if self.can_drop else "NOT cold"
        program = os.path.join(HERE, "randread.py")
        self.measure(f"W5 random 4 KiB reads of the {human_bytes(self.big_size)} file, {self.random_seconds:g} s, "
                     f"1 thread ({cold}): IOPS",
                     {side: f"python3 {q(program)} {q(os.path.join(root, 'Camera Roll', 'big.MOV'))} "
                            f"{self.random_seconds} 42" for side, root in self.sides.items()},
                     kind="iops", before=lambda side: self.drop_caches(), bar="≥ 0.8")

    def w6_recently_deleted(self):
        """Deleting is forgiving and must stay cheap: a delete and a restore are one transaction
        however many albums hold the photo; Recently Deleted lists as fast as any directory; a
        file manager's Empty Trash of many items is quick. Plain's counterpart of a delete is a
        move into a trash directory and back."""
        log("W6 Recently Deleted")
        n = min(500, self.photos)
        names = sorted(os.listdir(os.path.join(self.plain, "Albums", "Import")))[:n]
        plain_trash = os.path.join(self.work, "plain-trash")
        os.makedirs(plain_trash, exist_ok=True)
        script = os.path.join(self.work, "w6.py")
        with open(script, "w") as f:
            f.write("import os, sys\n"
                    "side, roll, trash, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]\n"
                    "for n in names:\n"
                    "    if side == 'albumfs':\n"
                    "        os.unlink(os.path.join(roll, n))\n"
                    "    else:\n"
                    "        os.rename(os.path.join(roll, n), os.path.join(trash, n))\n"
                    "    os.rename(os.path.join(trash, n), os.path.join(roll, n))\n")
        trash = {"plain": plain_trash, "albumfs": os.path.join(self.mnt, "Recently Deleted")}
        for albums in (1, 20):
            for side, root in self.sides.items():
                # The photos are in Albums/Import; add them to more albums (not timed).
                for k in range(1, albums):
                    album = os.path.join(root, "Albums", f"W6-{k}")
                    if not os.path.isdir(album):
                        os.mkdir(album)
                        for name in names:
                            os.link(os.path.join(root, "Albums", "Import", name), os.path.join(album, name))
            self.measure(f"W6 rm + restore of {n} photos, each in {albums} album{'s' if albums > 1 else ''} "
                         f"(plain: mv to a trash dir and back)",
                         {side: f"python3 {q(script)} {side} {q(os.path.join(root, 'Camera Roll'))} "
                                f"{q(trash[side])} " + " ".join(q(x) for x in names)
                          for side, root in self.sides.items()})
        # Every photo is back where it was, in every album (not timed).
        for name in names:
            if os.lstat(os.path.join(self.mnt, "Camera Roll", name)).st_nlink != 21:
                self.problem(f"W6: {name} is not back in its 20 albums after the restores")
                break

        # Delete the big album's assets (not timed): Recently Deleted and the trash fill up.
        big = {side: os.path.join(root, "Albums", "Big") for side, root in self.sides.items()}
        count = len(os.listdir(big["albumfs"]))
        for side, root in self.sides.items():
            for name in os.listdir(big[side]):
                if side == "albumfs":
                    os.unlink(os.path.join(root, "Camera Roll", name))
                else:
                    os.rename(os.path.join(root, "Camera Roll", name), os.path.join(plain_trash, name))
                    os.unlink(os.path.join(big[side], name))
        listings = {side: f"ls -l {q(trash[side])} > /dev/null" for side in self.sides}
        self.measure(f"W6 warm ls -l Recently Deleted of {count} (plain: a dir of {count})", listings,
                     before=lambda side: self.sh(listings[side]), bar="≤ 1.5")
        # Empty Trash of (at most) 10,000 of them: every item unlinked from the trash's files/, as
        # a file manager's Empty Trash does item by item (each purges a photo for good).
        files = {"plain": plain_trash, "albumfs": os.path.join(self.mnt, f".Trash-{os.getuid()}", "files")}
        emptied = sorted(os.listdir(files["albumfs"]))[:10_000]
        listing = os.path.join(self.work, "w6-empty.txt")
        with open(listing, "w") as f:
            f.write("\n".join(emptied))
        empty = ("import os, sys\n"
                 "for n in open(sys.argv[2]).read().split('\\n'): os.unlink(os.path.join(sys.argv[1], n))\n")
        with open(script, "w") as f:
            f.write(empty)
        self.measure(f"W6 Empty Trash of {len(emptied)} photos deleted with rm (unlink in the trash's files/)",
                     {side: f"python3 {q(script)} {q(files[side])} {q(listing)}" for side in self.sides},
                     rounds=1, bar="< 10 s")
        left = len(os.listdir(trash["albumfs"]))
        if left != count - len(emptied):
            self.problem(f"W6: Recently Deleted holds {left} after emptying {len(emptied)} of {count} from the trash")

    def w7_views(self):
        """What albumfs knows of its files (issue 12): the daemon reads every file in the
        background; a By Date month lists like an album of its size; and the daemon's reading
        of every file of W1 against sha256sum + exiftool -fast over the same files."""
        log("W7 facts and views")
        with self.watchdog.phase("W7: waiting for every file to be read", 4 * self.timeout):
            self.sh(f"{q(self.binary)} index --wait --timeout {int(3 * self.timeout)} {q(self.mnt)}")
        by_date = os.path.join(self.mnt, "By Date")
        months = [os.path.join(by_date, y, m) for y in os.listdir(by_date) for m in os.listdir(os.path.join(by_date, y))]
        if not months:
            self.problem("W7: By Date is empty after every file was read")
            return
        month = max(months, key=lambda path: len(os.listdir(path)))
        count = len(os.listdir(month))
        album = os.path.join(self.mnt, "Albums", "Big")
        if os.path.isdir(album):
            listings = {"plain": f"ls -l {q(album)} > /dev/null", "albumfs": f"ls -l {q(month)} > /dev/null"}
            self.measure(f"W7 warm ls -l of a By Date month of {count} (plain column: Albums/Big of "
                         f"{len(os.listdir(album))}, same mount)", listings,
                         before=lambda side: self.sh(listings[side]), bar="≤ 1.5")
        # Reading every file again: a store holding W1's photos, its facts forgotten, mounted.
        photos = os.path.join(self.src, "photos")
        store, mnt = os.path.join(self.work, "w7-store"), os.path.join(self.work, "w7-mnt")
        os.makedirs(mnt, exist_ok=True)
        reader = Mount(self.binary, store, mnt, self.mount_options)
        self.mounts.append(reader)
        reader.mount()
        self.sh(f"cp -r {q(photos)}/. {q(os.path.join(mnt, 'Camera Roll'))}/")
        self.sh(f"{q(self.binary)} index --wait --timeout {int(3 * self.timeout)} {q(mnt)}")
        reader.unmount()

        def forget_facts(side):
            if side == "albumfs":
                with sqlite3.connect(os.path.join(store, "library.sqlite")) as db:
                    db.execute("DELETE FROM asset_facts")
                self.drop_caches()
            else:
                self.drop_caches()

        def unmount_reader(side, _out):
            if side == "albumfs":
                # albumfs unmount returns once the daemon let go of the store.
                self.sh(f"{q(self.binary)} unmount {q(mnt)}")

        exiftool = shutil.which("exiftool")
        # (exiftool exits 1 on files it has no tags for, as the bench's random bytes are.)
        plain = f"sha256sum {q(photos)}/* > /dev/null" + (f" && {{ exiftool -fast -q -j {q(photos)} > /dev/null 2>&1 || true; }}" if exiftool else "")
        daemon = (f"{q(self.binary)} mount --store {q(store)} {q(mnt)} && "
                  f"{q(self.binary)} index --wait --timeout {int(3 * self.timeout)} {q(mnt)}")
        n = len(os.listdir(photos))
        self.measure(f"W7 reading {n} photos ({human_bytes(n * self.photo_size)}), cold: albumfs mounts and reads every "
                     f"file's facts (plain column: sha256sum{' + exiftool -fast' if exiftool else ''})",
                     {"plain": plain, "albumfs": daemon}, before=forget_facts, after=unmount_reader, bar="≤ 1.5")
        self.mounts.remove(reader)

    # ----- scale

    def scale(self):
        n, k = self.scale_assets, self.scale_album
        log(f"scale: generating a store of {n} assets with an album of {k}")
        store = os.path.join(self.work, "scale-store")
        mnt = os.path.join(self.work, "scale-mnt")
        plain_album = os.path.join(self.work, "scale-plain", "Big")
        seconds, out = self.sh(f"ALBUMFS_BIN={q(self.binary)} python3 {q(os.path.join(REPO, 'scripts', 'make-store'))} "
                               f"{q(store)} --assets {n} --album-size {k}", capture=True,
                               timeout=max(self.timeout, 1800))
        log("  " + out.strip())
        lines = [f"store of {n} assets, album Albums/Big of {k} (made by scripts/make-store in {seconds:.1f} s)"]
        os.makedirs(plain_album)
        for i in range(k):
            os.close(os.open(os.path.join(plain_album, f"IMG_{i:07d}.JPG"), os.O_WRONLY | os.O_CREAT, 0o644))
        fsck_seconds, fsck = self.sh(f"{q(self.binary)} fsck --store {q(store)}", capture=True, check=False,
                                     timeout=max(self.timeout, 600))
        lines.append(f"albumfs fsck --store STORE: {fsck_seconds:.2f} s: {fsck.strip()}")
        if "consistent" not in fsck:
            self.problem(f"scale: fsck of the generated store: {fsck.strip()}")

        mount = Mount(self.binary, store, mnt, self.mount_options)
        self.mounts.append(mount)
        rounds = max(self.rounds, 3)
        times = {"first": [], "cold": [], "warm": []}
        for r in range(rounds + 1):
            for kind in ("cold", "warm"):
                if kind == "cold":
                    self.drop_caches()
                else:
                    self.sh("sync")
                seconds = mount.mount(timeout=120)
                mount.unmount()
                times["first" if r == 0 and kind == "cold" else kind].append(seconds)
        lines.append(f"mount (albumfs mount … returns, live): first after generation {times['first'][0]:.3f} s; "
                     f"cold cache median {median(times['cold']):.3f} s; warm median {median(times['warm']):.3f} s "
                     f"(bar < 1 s)")
        lines.append(f"  cold: {' '.join(f'{t:.3f}' for t in times['cold'])}; "
                     f"warm: {' '.join(f'{t:.3f}' for t in times['warm'])}")

        mount.mount(timeout=120)
        self.active = mount
        start_rows = len(self.rows)
        for name, template in (("ls", "ls {} > /dev/null"), ("ls -l", "ls -l {} > /dev/null")):
            commands = {"plain": template.format(q(plain_album)),
                        "albumfs": template.format(q(os.path.join(mnt, "Albums", "Big")))}
            self.measure(f"scale: warm {name}, album of {k} (store of {n})", commands,
                         before=lambda side, c=commands: self.sh(c[side]), bar="≤ 1.5", rounds=rounds)
        _, count = self.sh(f"ls {q(os.path.join(mnt, 'Albums', 'Big'))} | wc -l", capture=True)
        if count.strip() != str(k):
            self.problem(f"scale: the album lists {count.strip()} entries, expected {k}")
        rss, hwm = mount.status("VmRSS"), mount.status("VmHWM")
        lines.append(f"daemon after mount and the listings: VmRSS {rss / 1024:.1f} MiB, VmHWM {hwm / 1024:.1f} MiB "
                     f"(bar < 100 MiB)" if rss and hwm else "daemon RSS: unknown")
        mount.unmount()
        self.scale_rows = self.rows[start_rows:]
        del self.rows[start_rows:]
        self.scale_lines = lines

    # ----- the run

    def run(self):
        scale_only = self.args.scale_only
        self.prepare_work_dir()
        # One binary for the whole run, even if the checkout is rebuilt meanwhile.
        self.built = self.binary
        self.binary = os.path.join(self.work, "albumfs")
        shutil.copy2(self.built, self.binary)
        self.version = self.describe_checkout()
        self.check_space(scale_only)
        if not self.can_drop:
            self.notes.append("NOT root (or /proc/sys/vm/drop_caches not writable): the cold runs are not cold")
        self.scale_rows, self.scale_lines = [], []
        started = time.monotonic()
        if not scale_only:
            self.make_data()
            self.mount = Mount(self.binary, self.store, self.mnt, self.mount_options)
            self.mounts.append(self.mount)
            self.active = self.mount
            seconds = self.mount.mount()
            self.notes.append(f"mount of the new, empty bench store: {seconds:.3f} s")
            self.notes.append(self.describe_data_path())
            if self.workloads & {"W3", "W6", "W7"}:
                self.build_album()
            after_setup = self.mount.status("VmHWM")
            reset = self.mount.reset_peak()
            for name, workload in (("W1", self.w1_import), ("W2", self.w2_cold_read), ("W3", self.w3_browse),
                                   ("W4", self.w4_backup)):
                if name in self.workloads:
                    workload()
            peak = self.mount.status("VmHWM")
            rss = self.mount.status("VmRSS")
            if "W7" in self.workloads:
                self.w7_views()
            if "W5" in self.workloads:
                self.w5_random()
            if "W6" in self.workloads:
                self.w6_recently_deleted()
            peak_all = self.mount.status("VmHWM")
            self.mount.unmount()
            self.rss_line = (f"daemon peak RSS (VmHWM) over W1–W4: {peak / 1024:.1f} MiB (bar ≤ 100 MiB)"
                             + ("" if reset else " — includes the set-up: VmHWM could not be reset")
                             + f"; VmRSS after W4 {rss / 1024:.1f} MiB; VmHWM after the set-up "
                             f"{after_setup / 1024:.1f} MiB, after W5 {peak_all / 1024:.1f} MiB")
            _, fsck = self.sh(f"{q(self.binary)} fsck --store {q(self.store)}", capture=True, check=False)
            if "consistent" not in fsck:
                self.problem(f"fsck of the bench store after the run: {fsck.strip()}")
        if self.args.scale or scale_only:
            self.scale()
        self.elapsed = time.monotonic() - started
        self.report(scale_only)

    def describe_data_path(self):
        """Who runs the mount and the timed commands, and the data path the daemon took
        (it logs a refused passthrough; a user's mount is refused by the kernel: EPERM)."""
        who = f"uid {os.getuid()}" + (" (root)" if os.getuid() == 0 else f" ({self.args.as_user})")
        asked = "-o nopassthrough" if self.mount_options else "default options (passthrough where the kernel allows)"
        return f"mount and timed commands run as {who}, {asked}"

    def describe_checkout(self):
        _, version, _ = run_bounded([self.built, "--version"], 10)
        version = version.strip() or "unknown version"
        if os.environ.get("ALBUMFS_BENCH_BUILT") != "1":
            return f"given in ALBUMFS_BIN, {version}"
        status, out, _ = run_bounded(["git", "-C", REPO, "describe", "--always", "--dirty"], 10)
        return f"built from checkout {out.strip() if status == 0 else 'unknown'}, {version}"

    def cleanup(self):
        self.runner.kill_current()
        for mount in self.mounts:
            try:
                mount.unmount()
            except Exception as error:  # keep cleaning up
                log(f"unmounting {mount.mp}: {error}")
        if not self.args.keep and os.path.exists(os.path.join(self.work, MARKER)):
            if any(mount.is_mounted() for mount in self.mounts):
                log(f"not removing {self.work}: something is still mounted there")
            else:
                shutil.rmtree(self.work, ignore_errors=True)
        elif self.args.keep:
            log(f"kept {self.work}")

    # ----- the table

    def report(self, scale_only):
        mode = "quick" if self.quick else "full"
        print()
        print(f"albumfs bench ({mode}, {self.rounds} round{'s' if self.rounds != 1 else ''}, interleaved "
              f"plain/albumfs; {self.work} on the same disk; {os.cpu_count()} CPUs; {self.elapsed:.0f} s)")
        print(f"binary: {self.built} ({self.version}), copied to {self.binary} for the run")
        if not scale_only:
            self.print_table(self.rows)
            print(self.rss_line)
        if self.scale_lines:
            print()
            print("scale:")
            for line in self.scale_lines:
                print("  " + line)
            self.print_table(self.scale_rows)
        for note in self.notes:
            print("note: " + note)
        if self.problems:
            print()
            for problem in self.problems:
                print("PROBLEM: " + problem)

    def print_table(self, rows):
        width = max(len(row[0]) for row in rows) if rows else 20
        print()
        print(f"{'workload':<{width}}  {'plain':>9}  {'albumfs':>9}  {'ratio':>6}  {'bar':>6}  rounds plain | albumfs")
        for label, plain, albumfs, kind, bar in rows:
            p, a = median(plain), median(albumfs)
            ratio = a / p if p else float("nan")
            unit = "" if kind == "iops" else "s"
            digits = 0 if kind == "iops" else 3
            rounds = " ".join(f"{v:.{digits}f}" for v in plain) + " | " + " ".join(f"{v:.{digits}f}" for v in albumfs)
            print(f"{label:<{width}}  {p:>8.{digits}f}{unit or ' '}  {a:>8.{digits}f}{unit or ' '}  "
                  f"{ratio:>6.2f}  {bar or '':>6}  {rounds}")
        print("(medians; ratio = albumfs/plain — for IOPS, albumfs IOPS / plain IOPS)")
        for label, plain, albumfs, _, _ in rows:
            if label in self.floors:
                floor = self.floors[label]
                print(f"floor of \"{label}\": the same cp --reflink=never into the plain dir (read/write, as cp "
                      f"copies into any FUSE mount) {median(floor):.3f} s = {median(floor) / median(plain):.2f} × plain; "
                      f"albumfs {median(albumfs) / median(floor):.2f} × floor; rounds "
                      + " ".join(f"{v:.3f}" for v in floor))


class CacheDropper:
    """--as-user: the bench runs as that user in a child process, and root, in the parent,
    only drops the page cache when the child asks (one byte each way through two pipes)."""

    def __init__(self):
        self.requests = os.pipe()
        self.replies = os.pipe()

    def drop(self):
        """In the child: asks root to drop the caches and waits until it has."""
        os.write(self.requests[1], b"d")
        if os.read(self.replies[0], 1) != b"k":
            raise BenchError("root's helper could not drop the page cache")

    def serve(self, child):
        """In the parent: drops the caches on request until the child closes its end."""
        os.close(self.requests[1])
        os.close(self.replies[0])
        while os.read(self.requests[0], 1):
            try:
                os.sync()
                with open("/proc/sys/vm/drop_caches", "w") as f:
                    f.write("3\n")
                os.write(self.replies[1], b"k")
            except OSError:
                os.write(self.replies[1], b"!")
        return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])


def run_as_user(name, work, body):
    """Runs body(dropper) in a child process as user `name` (its uid and gid, no other
    groups, its HOME); this root process stays to drop the caches, and passes SIGTERM on."""
    import pwd
    if os.geteuid() != 0:
        raise BenchError("--as-user needs root (root drops the caches between rounds)")
    user = pwd.getpwnam(name)
    if user.pw_uid == 0:
        raise BenchError("--as-user: give an unprivileged user")
    # A previous run's work dir that the user cannot remove: root removes it first.
    if os.path.exists(os.path.join(work, MARKER)) and os.stat(work).st_uid != user.pw_uid:
        if mount_points_below(work):
            raise BenchError(f"something is still mounted in {work}")
        shutil.rmtree(work)
    dropper = CacheDropper()
    child = os.fork()
    if child == 0:
        status = 1
        try:
            os.close(dropper.requests[0])
            os.close(dropper.replies[1])
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            os.environ.update(HOME=user.pw_dir, USER=name, LOGNAME=name)
            status = body(dropper)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda number, _frame: os.kill(child, number))
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the child gets it from the terminal
    return dropper.serve(child)


def main():
    parser = argparse.ArgumentParser(prog="scripts/bench", description="albumfs against a plain directory")
    parser.add_argument("--quick", action="store_true", help="small data, 1 round: for CI (judges no time)")
    parser.add_argument("--rounds", type=int, help="rounds per workload (default 3; --quick: 1)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir")
    parser.add_argument("--scale", action="store_true",
                        help="also the scale test: a generated store of 1,000,000 assets (--quick: 100,000)")
    parser.add_argument("--scale-only", action="store_true", help="only the scale test")
    parser.add_argument("--scale-assets", type=int, help="assets in the scale store")
    parser.add_argument("--data-path", choices=("passthrough", "daemon"), default="passthrough",
                        help="daemon: mount with -o nopassthrough, every read and write through the daemon")
    parser.add_argument("--as-user", metavar="NAME",
                        help="mount and run every timed command as this unprivileged user (root only drops "
                             "the caches); a user's mount never has passthrough")
    parser.add_argument("--photos", type=int, help="photos W1 imports (default 2,000; --quick: 200)")
    parser.add_argument("--big-mib", type=int, help="size of the big file in MiB (default 2048; --quick: 64)")
    parser.add_argument("--only", metavar="W1,W2,...",
                        help="only these workloads (W2, W4 and W7 read what W1 imported; W3, W6 and W7 need the big album)")
    args = parser.parse_args()
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be at least 1")

    if args.as_user:
        work = os.path.realpath(os.environ.get("ALBUMFS_BENCH_DIR", "/var/tmp/albumfs-bench"))
        try:
            return run_as_user(args.as_user, work, lambda dropper: bench_main(args, dropper))
        except (BenchError, MountError, KeyError) as error:
            print(f"bench: --as-user {args.as_user}: {error}", file=sys.stderr)
            return 2
    return bench_main(args, None)


def bench_main(args, dropper):
    def terminate(signum, _frame):
        raise Terminated(f"signal {signum}")

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGHUP, terminate)
    try:
        bench = Bench(args, dropper)
    except BenchError as error:
        print(f"bench: {error}", file=sys.stderr)
        return 2
    status = 0
    try:
        bench.run()
        if bench.problems:
            status = 1
    except (BenchError, MountError) as error:
        log(f"FAILED: {error}")
        status = 1
    except (KeyboardInterrupt, Terminated) as error:
        log(f"interrupted ({error or 'SIGINT'})")
        status = 130
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        bench.cleanup()
    return status


if __name__ == "__main__":
    sys.exit(main())
