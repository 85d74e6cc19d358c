"""The Bench: its settings, the work dir and its data, the run of the workloads, the clean-up."""
import os
import shutil
import time

from albumfs_mount import mount_points_below, run_bounded

from . import (scale, w1_import, w2_cold_read, w3_browse, w4_backup, w5_random, w6_recently_deleted, w7_views,
               w8_remote)
from .harness import GiB, MARKER, REPO, BenchError, MiB, Mount, Runner, Watchdog, human_bytes, log, q
from .measure import Measurements
from .peer import PassthroughLL


class Bench(Measurements):
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
        if args.remote:
            self.workloads.add("W8")
        unknown = self.workloads - {"W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8"}
        if unknown:
            raise BenchError(f"--only: no workload {', '.join(sorted(unknown))}")
        # W8 (--remote): originals in an S3 bucket, against rclone mount on the same radosgw.
        self.remote = w8_remote.Settings(args, self.quick)
        if "W8" in self.workloads and args.as_user:
            raise BenchError("--remote (W8) does not run with --as-user: it starts a radosgw and rclone as root")
        # --data-path daemon: every read and write through the daemon, as on a kernel
        # without FUSE passthrough (a user's mount takes that path whatever it asks).
        self.mount_options = ["nopassthrough"] if args.data_path == "daemon" else []
        # --uring: requests through FUSE over io_uring, where the kernel offers it (its switch is
        # root's to turn, never the bench's: a run that cannot have the ring stops here).
        if args.uring:
            switch = "/sys/module/fuse/parameters/enable_uring"
            if not os.path.exists(switch) or open(switch).read().strip() != "Y":
                raise BenchError(f"--uring: the kernel offers no FUSE over io_uring ({switch} is not Y: "
                                 f"as root, echo Y > {switch}; Linux 6.14+)")
            self.mount_options.append("uring")
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
        self.services = []     # what W8 started besides mounts (radosgw): each .stop() at clean-up
        self.runner = Runner(on_stuck=self.kill_daemons)
        self.watchdog = Watchdog(on_expire=self.kill_daemons)
        self.rows = []         # (label, plain values, albumfs values, kind, bar)
        self.floors = {}       # label: times of the row's floor command (see measure)
        self.peers = {}        # label: times of the row's command on passthrough_ll (see measure, peer.py)
        self.peer = PassthroughLL(self.work)
        self.peer_root = None  # its mount, while it is mounted
        self.notes = []        # lines printed under the table
        self.problems = []     # correctness failures: exit 1

        self.src = os.path.join(self.work, "src")
        self.plain = os.path.join(self.work, "plain")
        self.store = os.path.join(self.work, "store")
        self.mnt = os.path.join(self.work, "mnt")
        self.sides = {"plain": self.plain, "albumfs": self.mnt}

    def roots(self):
        """The trees a row of W1 and W2 measures: the plain tree, albumfs's mount, and
        passthrough_ll's (peer.py) while it is mounted."""
        return dict(self.sides, **({"peer": self.peer_root} if self.peer_root else {}))

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
        if "W8" in self.workloads and not scale_only:
            data += self.remote.disk_bytes()
            inodes += 4 * self.remote.files
        if not scale_only and self.workloads - {"W8"}:
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

    def purge_trash(self, side):
        """Empties Recently Deleted (once it exists), so deleting frees the data."""
        if side != "albumfs":
            return
        trash = os.path.join(self.mnt, "Recently Deleted")
        if os.path.isdir(trash):
            for name in os.listdir(trash):
                os.unlink(os.path.join(trash, name))

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
        self.rss_line = None
        if not scale_only and self.workloads - {"W8"}:
            self.make_data()
            self.mount = Mount(self.binary, self.store, self.mnt, self.mount_options)
            self.mounts.append(self.mount)
            self.active = self.mount
            seconds = self.mount.mount()
            self.notes.append(f"mount of the new, empty bench store: {seconds:.3f} s")
            self.notes.append(self.describe_data_path())
            if "uring" in self.mount_options:
                # The ring is made when INIT is answered, which the mount command does not wait for.
                deadline = time.monotonic() + 10
                while (rings := self.mount.io_uring_count()) == 0 and time.monotonic() < deadline:
                    time.sleep(0.05)
                if rings == 0:
                    self.problem("--uring: the daemon has no io_uring: its requests come through /dev/fuse")
                else:
                    self.notes.append(f"requests through FUSE over io_uring: the daemon has {rings} io_urings")
            if self.workloads & {"W3", "W6", "W7"}:
                self.build_album()
            if self.workloads & {"W1", "W2"}:
                why = self.peer.start()
                if why:
                    self.notes.append(f"passthrough_ll (libfuse 3.14) not measured: {why}")
                else:
                    self.peer_root = self.peer.root
            after_setup = self.mount.status("VmHWM")
            reset = self.mount.reset_peak()
            for name, workload in (("W1", w1_import), ("W2", w2_cold_read), ("W3", w3_browse),
                                   ("W4", w4_backup)):
                if name in self.workloads:
                    workload.run(self)
            peak = self.mount.status("VmHWM")
            rss = self.mount.status("VmRSS")
            self.peer.stop()
            self.peer_root = None
            if "W7" in self.workloads:
                w7_views.run(self)
            if "W5" in self.workloads:
                w5_random.run(self)
            if "W6" in self.workloads:
                w6_recently_deleted.run(self)
            peak_all = self.mount.status("VmHWM")
            self.mount.unmount()
            self.rss_line = (f"daemon peak RSS (VmHWM) over W1–W4: {peak / 1024:.1f} MiB (bar ≤ 100 MiB)"
                             + ("" if reset else " — includes the set-up: VmHWM could not be reset")
                             + f"; VmRSS after W4 {rss / 1024:.1f} MiB; VmHWM after the set-up "
                             f"{after_setup / 1024:.1f} MiB, after W5 {peak_all / 1024:.1f} MiB")
            _, fsck = self.sh(f"{q(self.binary)} fsck --store {q(self.store)}", capture=True, check=False)
            if "consistent" not in fsck:
                self.problem(f"fsck of the bench store after the run: {fsck.strip()}")
        if "W8" in self.workloads and not scale_only:
            w8_remote.run(self)
        if self.args.scale or scale_only:
            scale.run(self)
        self.elapsed = time.monotonic() - started
        self.report(scale_only)
        if self.args.json:
            self.write_json(self.args.json, scale_only)

    def describe_data_path(self):
        """Who runs the mount and the timed commands, and the data path the daemon took
        (it logs a refused passthrough; a user's mount is refused by the kernel: EPERM)."""
        who = f"uid {os.getuid()}" + (" (root)" if os.getuid() == 0 else f" ({self.args.as_user})")
        asked = ("-o " + ",".join(self.mount_options) if self.mount_options
                 else "default options (passthrough where the kernel allows)")
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
        self.peer.stop()
        for mount in self.mounts:
            try:
                mount.unmount()
            except Exception as error:  # keep cleaning up
                log(f"unmounting {mount.mp}: {error}")
        for service in reversed(self.services):
            try:
                service.stop()
            except Exception as error:  # keep cleaning up
                log(f"stopping {service}: {error}")
        if not self.args.keep and os.path.exists(os.path.join(self.work, MARKER)):
            if any(mount.is_mounted() for mount in self.mounts) or self.peer.is_mounted():
                log(f"not removing {self.work}: something is still mounted there")
            else:
                shutil.rmtree(self.work, ignore_errors=True)
        elif self.args.keep:
            log(f"kept {self.work}")
