"""W8, originals in an S3 bucket (SEMANTICS.md § Remote storage), against the same bucket server
through other clients: a one-node Ceph radosgw on loopback (scripts/lib/radosgw, objects in RAM)
started for the run, `rclone mount --vfs-cache-mode full`, `rclone copy` and curl (a plain GET
signed with SigV4). Opt-in: `scripts/bench --remote`, or `--only W8`. Each row's plain column is
the peer its label names; ratio = albumfs / that peer (MiB/s rows: albumfs MiB/s / the peer's).

  a. `cp -r` of N × 1 MiB into an album + `sync`, three ways, interleaved in each round: a
     local-only albumfs, albumfs with a remote (a new store and prefix each round, every
     original kept local), `cp -r` into a new rclone mount. Bars ≤ 1.1 × local, ≤ rclone.
  b. then `albumfs sync --wait` (every original in the bucket) against `rclone copy` of the same
     files to the bucket; also the whole way, cp + sync + sync --wait. Bar ≤ 1.3.
  c. `ls -l` of an album of F 4 KiB photos that are all remote-only (the store mounted with
     -o cache_size=1: everything uploaded is evicted), cold (a new mount, caches dropped) and
     warm, against `ls -l` of the same F files in the bucket through a new rclone mount. Bar ≤ 0.2.
  d. a remote-only file of B MiB (-o cache_size=64M), after dropping caches: its first 4 KiB
     (`head -c 4096`) against a ranged GET of 4 KiB, and `cat` of all of it against one GET of
     its object (MiB/s; bar ≥ 0.8).
  e. during d, a thread samples the bytes of the store's content directory (its files' blocks,
     as du counts them, directories left out) every 0.1 s: while the file is read the bound is
     cache_size + the open file; after the reader closed, cache_size (it is evicted again).

Everything W8 starts is stopped by the bench's clean-up (radosgw by `radosgw stop`, rclone by its
pid after fusermount3 -u); scripts/bench's backstop also stops a leftover radosgw named in the
work dir and rclone processes serving a mount in it. The keys are the throw-away radosgw's; they
go to the daemons by their environment and to rclone and curl by config files in the work dir.
"""
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

from albumfs_mount import is_mounted, quiet, run_bounded

from .harness import HERE, MiB, BenchError, Mount, human_bytes, log, median, q

RADOSGW = os.path.join(HERE, "radosgw")
CACHE_SIZE = 64 * MiB          # d and e: -o cache_size=64M
RADOSGW_DIR_FILE = "radosgw.dir"   # in the work dir: the radosgw state dir, for scripts/bench's backstop


class Settings:
    def __init__(self, args, quick):
        self.photos = args.remote_photos or (50 if quick else 300)
        self.files = args.remote_files or (1_000 if quick else 10_000)
        self.big_size = (args.remote_big_mib or (128 if quick else 512)) * MiB
        if self.big_size <= CACHE_SIZE:
            # a file within cache_size is never evicted: it would not be remote-only
            raise BenchError(f"--remote-big-mib must be more than cache_size, {CACHE_SIZE // MiB}")

    def disk_bytes(self):
        # src + local store + remote store + rclone's cache, the small files twice, the big file
        # in src and in the store while it is read
        return 4 * self.photos * MiB + 3 * self.files * 8192 + 3 * self.big_size


class Gateway:
    """scripts/lib/radosgw started in a short temp dir (its admin sockets must fit a UNIX socket
    path); stop() always stops it by its pid files."""

    def __init__(self, work):
        self.dir = tempfile.mkdtemp(prefix="rgw-bench-", dir="/tmp")
        with open(os.path.join(work, RADOSGW_DIR_FILE), "w") as f:
            f.write(self.dir + "\n")
        self.work = work
        status, out, err = run_bounded([RADOSGW, "start", self.dir, "--json"],
                                       int(os.environ.get("ALBUMFS_RADOSGW_START_TIMEOUT", "90")) + 30)
        if status != 0:
            self.stop()
            raise BenchError(f"radosgw start failed ({'timed out' if status is None else f'exit {status}'}):\n"
                             + err[-3000:])
        info = json.loads(out)
        self.endpoint, self.access_key, self.secret_key = info["endpoint"], info["access_key"], info["secret_key"]
        self.region, self.s3cfg, self.seconds = info["region"], info["s3cfg"], float(info["start_seconds"])

    def stop(self):
        if self.dir and os.path.exists(self.dir):
            status, _, err = run_bounded([RADOSGW, "stop", self.dir], 90)
            if status != 0:
                log(f"radosgw stop {self.dir}: {'timed out' if status is None else f'exit {status}'}: {err.strip()}")
                return
        self.dir = None
        try:
            os.unlink(os.path.join(self.work, RADOSGW_DIR_FILE))
        except OSError:
            pass

    def __str__(self):
        return f"radosgw in {self.dir}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Rclone:
    """`rclone mount REMOTE MP --vfs-cache-mode full` in the foreground, in a session of its own,
    with its remote control on a loopback port (to see its uploads); ended by fusermount3 -u, then
    by its pid. Has what Bench.cleanup and kill_daemons ask of a mount."""

    def __init__(self, bench, remote, mp, cache_dir):
        self.bench, self.remote, self.mp, self.cache_dir = bench, remote, mp, cache_dir
        self.log_path = os.path.join(bench.work, "rclone.log")
        self.port = free_port()
        self.process = None

    def mount(self):
        os.makedirs(self.mp, exist_ok=True)
        command = ["rclone", "mount", self.remote, self.mp, "--vfs-cache-mode", "full",
                   "--cache-dir", self.cache_dir, "--rc", "--rc-addr", f"127.0.0.1:{self.port}", "--rc-no-auth"]
        with open(self.log_path, "ab") as out:
            out.write(f"\n===== {' '.join(command)}\n".encode())
            out.flush()
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        deadline = time.monotonic() + 30
        while not is_mounted(self.mp):
            if self.process.poll() is not None:
                raise BenchError(f"rclone mount exited {self.process.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise BenchError(f"rclone mount not mounted after 30 s:\n{self.log_tail()}")
            time.sleep(0.05)
        # Its remote control answers too (it starts before the mount).
        self.stats()

    def log_tail(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-3000:]
        except OSError:
            return "(no log)"

    def stats(self):
        status, out, err = run_bounded(["rclone", "rc", "--url", f"http://127.0.0.1:{self.port}/", "vfs/stats"], 30)
        if status != 0:
            raise BenchError(f"rclone rc vfs/stats: {'timed out' if status is None else err.strip()}")
        return json.loads(out)

    def wait_uploads(self, timeout):
        """Seconds until its cache has no upload queued or under way (they start 5 s after a
        close: --vfs-write-back's default)."""
        start = time.perf_counter()
        while True:
            cache = self.stats()["diskCache"]
            if cache["uploadsInProgress"] == 0 and cache["uploadsQueued"] == 0:
                return time.perf_counter() - start
            if cache.get("erroredFiles"):
                raise BenchError(f"rclone: {cache['erroredFiles']} uploads failed:\n{self.log_tail()}")
            if time.perf_counter() - start > timeout:
                raise BenchError(f"rclone's uploads not done after {timeout} s: {cache}")
            time.sleep(0.1)

    def is_mounted(self):
        return is_mounted(self.mp)

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def kill(self):
        if self.alive():
            log(f"killing rclone {self.process.pid}")
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def unmount(self):
        if self.process is None:
            return
        for flag in ("-u", "-u", "-u", "-uz"):
            if not is_mounted(self.mp):
                break
            if not quiet(["fusermount3", flag, self.mp]):
                time.sleep(1)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            log(f"rclone {self.process.pid} still running 15 s after its unmount: SIGTERM, then SIGKILL")
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
                try:
                    os.killpg(self.process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.process.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if is_mounted(self.mp):
            quiet(["fusermount3", "-uz", self.mp])
        self.process = None


class ContentSampler:
    """Samples the bytes of a store's content directory (files' st_blocks × 512, as du counts
    them, directories left out) every 0.1 s, on a thread, tagged with the phase the bench says."""

    def __init__(self, content):
        self.content = content
        self.phase = None
        self.samples = []        # (monotonic time, phase, bytes)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def bytes_now(self):
        total = 0
        for root, _, files in os.walk(self.content):
            for name in files:
                try:
                    total += os.lstat(os.path.join(root, name)).st_blocks * 512
                except OSError:
                    pass
        return total

    def _run(self):
        while not self.stopped.wait(0.1):
            phase = self.phase
            if phase is not None:
                self.samples.append((time.monotonic(), phase, self.bytes_now()))

    def stop(self):
        self.stopped.set()
        self.thread.join(5)

    def of(self, phase):
        return [(t, b) for t, p, b in self.samples if p == phase]


def storage(path):
    return os.getxattr(path, "user.albumfs.storage").decode()


def run(bench):
    settings = bench.remote
    log(f"W8 remote: starting a radosgw; {settings.photos} × 1 MiB, an album of {settings.files} × 4 KiB, "
        f"a {human_bytes(settings.big_size)} file")
    saved = {name: os.environ.get(name) for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                                     "AWS_CA_BUNDLE", "RCLONE_CONFIG")}
    gateway = Gateway(bench.work)
    bench.services.append(gateway)
    try:
        W8(bench, settings, gateway).run()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class W8:
    def __init__(self, bench, settings, gateway):
        self.bench, self.s, self.gw = bench, settings, gateway
        self.root = os.path.join(bench.work, "w8")
        os.makedirs(self.root)
        # The daemons and albumfs's commands take the keys from their environment (never a
        # command line). AWS_CA_BUNDLE (set on some machines for HTTPS proxies) makes rclone's S3
        # client fail at start ("LoadCustomCABundleError"); the gateway is plain HTTP.
        os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"] = gateway.access_key, gateway.secret_key
        os.environ.pop("AWS_CA_BUNDLE", None)
        os.environ["RCLONE_CONFIG"] = self.path("rclone.conf")
        with open(self.path("rclone.conf"), "w") as f:
            f.write(f"[rgw]\ntype = s3\nprovider = Ceph\nendpoint = {gateway.endpoint}\n"
                    f"access_key_id = {gateway.access_key}\nsecret_access_key = {gateway.secret_key}\n"
                    f"region = {gateway.region}\n")
        # curl 7.88 signs SigV4 itself but sends no x-amz-content-sha256, which radosgw wants.
        self.curl_config = self.path("curl.conf")
        with open(self.curl_config, "w") as f:
            f.write(f'user = "{gateway.access_key}:{gateway.secret_key}"\n'
                    f'aws-sigv4 = "aws:amz:{gateway.region}:s3"\n'
                    f'header = "x-amz-content-sha256: UNSIGNED-PAYLOAD"\n')
        os.chmod(self.curl_config, 0o600)
        self.sync_timeout = int(max(120, self.s.files / 20, self.s.big_size / (5 * MiB)))

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def sh(self, command, timeout=None, capture=False):
        return self.bench.sh(command, timeout=timeout, capture=capture)

    def albumfs(self, *words, timeout=None, capture=False):
        return self.sh(" ".join([q(self.bench.binary)] + [q(w) for w in words]), timeout=timeout, capture=capture)

    def remote_store(self, name, prefix):
        store = self.path(name, "store")
        os.makedirs(os.path.dirname(store))
        self.albumfs("init", "--remote", f"s3://albumfs/{prefix}", "--endpoint", self.gw.endpoint, store)
        return store

    def mount(self, store, mp, options=(), create=False):
        mount = Mount(self.bench.binary, store, mp, list(self.bench.mount_options) + list(options), create=create)
        self.bench.mounts.append(mount)
        mount.mount()
        return mount

    def unmount(self, mount):
        mount.unmount()
        self.bench.mounts.remove(mount)

    def rclone(self, remote, mp, cache):
        mount = Rclone(self.bench, remote, mp, cache)
        self.bench.mounts.append(mount)
        mount.mount()
        return mount

    def rclone_unmount(self, mount):
        mount.unmount()
        self.bench.mounts.remove(mount)

    def sync_wait(self, mp):
        return self.albumfs("sync", "--wait", "--timeout", str(self.sync_timeout), mp, timeout=self.sync_timeout + 60)[0]

    def stats(self, mp):
        return json.loads(self.albumfs("stats", "--json", mp, capture=True)[1])

    def run(self):
        bench = self.bench
        bench.notes.append(f"W8: radosgw (Ceph {self.ceph_version()}, memstore: objects in RAM) on loopback, "
                           f"started in {self.gw.seconds:.1f} s; rclone {self.rclone_version()}; "
                           f"the keys in the daemons' environment")
        self.make_data()
        self.sh("rclone mkdir rgw:rclone")
        self.copies()
        self.listings()
        self.reads()

    def ceph_version(self):
        _, out, _ = run_bounded(["radosgw", "--version"], 10)
        return (out.split() + ["?", "?", "?"])[2]

    def rclone_version(self):
        _, out, _ = run_bounded(["rclone", "version"], 10)
        return (out.split() + ["?", "?"])[1]

    def make_data(self):
        src = self.path("src")
        self.photos, self.small, self.big = self.path("src", "photos"), self.path("src", "small"), self.path("src", "big.MOV")
        os.makedirs(self.photos)
        os.makedirs(self.small)
        for i in range(self.s.photos):
            with open(os.path.join(self.photos, f"IMG_{i:04d}.JPG"), "wb") as f:
                f.write(os.urandom(MiB))
        for i in range(self.s.files):
            with open(os.path.join(self.small, f"P{i:06d}.jpg"), "wb") as f:
                f.write(os.urandom(4096))
        digest = hashlib.sha256()
        with open(self.big, "wb") as f:
            for offset in range(0, self.s.big_size, 16 * MiB):
                chunk = os.urandom(min(16 * MiB, self.s.big_size - offset))
                digest.update(chunk)
                f.write(chunk)
        self.big_sha256 = digest.hexdigest()
        log(f"  W8 data made in {src}")

    # -- a and b ------------------------------------------------------------------------------

    def copies(self):
        bench, n = self.bench, self.s.photos
        values = {k: [] for k in ("local", "remote", "rclone", "syncwait", "whole", "rclone-copy", "rclone-upload")}
        for r in range(bench.rounds):
            with bench.watchdog.phase(f"W8a/b round {r + 1}", 6 * bench.timeout):
                # A local-only albumfs.
                mp = self.path(f"a{r}-local", "mnt")
                mount = self.mount(self.path(f"a{r}-local", "store"), mp, create=True)
                seconds, _ = self.sh(f"cp -r {q(self.photos)} {q(mp)}/Albums/Import && sync")
                values["local"].append(seconds)
                self.unmount(mount)
                # albumfs with a remote: a new store and prefix; every original kept local.
                store = self.remote_store(f"a{r}-remote", f"a{r}")
                mp = self.path(f"a{r}-remote", "mnt")
                mount = self.mount(store, mp)
                seconds, _ = self.sh(f"cp -r {q(self.photos)} {q(mp)}/Albums/Import && sync")
                values["remote"].append(seconds)
                waited = self.sync_wait(mp)
                values["syncwait"].append(waited)
                values["whole"].append(seconds + waited)
                stats = self.stats(mp)
                if stats["objects"] != n or stats["uploads_pending"]["assets"] != 0:
                    bench.problem(f"W8b: after sync --wait the store records {stats['objects']} objects, "
                                  f"{stats['uploads_pending']['assets']} uploads waiting; expected {n}, 0")
                self.unmount(mount)
                # rclone mount --vfs-cache-mode full: a new mount of a new prefix, a new cache.
                mp, cache = self.path(f"a{r}-rclone", "mnt"), self.path(f"a{r}-rclone", "cache")
                mount = self.rclone(f"rgw:rclone/a{r}", mp, cache)
                seconds, _ = self.sh(f"cp -r {q(self.photos)} {q(mp)}/Import && sync")
                values["rclone"].append(seconds)
                values["rclone-upload"].append(mount.wait_uploads(self.sync_timeout))
                self.rclone_unmount(mount)
                # rclone copy straight to the bucket.
                seconds, _ = self.sh(f"rclone copy {q(self.photos)} rgw:rclone/b{r}")
                values["rclone-copy"].append(seconds)
                # What each put in the bucket (not timed), then the round's objects go.
                for prefix, expect in ((f"albumfs/a{r}/objects", n), (f"rclone/a{r}/Import", n), (f"rclone/b{r}", n)):
                    _, out = self.sh(f"rclone size --json rgw:{prefix}", capture=True)
                    size = json.loads(out)
                    if size["count"] != expect or size["bytes"] != expect * MiB:
                        bench.problem(f"W8a/b: rgw:{prefix} holds {size['count']} objects, {size['bytes']} bytes; "
                                      f"expected {expect}, {expect * MiB}")
                for prefix in (f"albumfs/a{r}", f"rclone/a{r}", f"rclone/b{r}"):
                    self.sh(f"rclone purge rgw:{prefix}")
                for side in ("local", "remote", "rclone"):
                    shutil.rmtree(self.path(f"a{r}-{side}"))
            log(f"  W8a/b round {r + 1}: cp + sync local {values['local'][-1]:.3f}, remote {values['remote'][-1]:.3f}, "
                f"rclone mount {values['rclone'][-1]:.3f}; sync --wait {values['syncwait'][-1]:.3f}, "
                f"rclone copy {values['rclone-copy'][-1]:.3f}")
        what = f"cp -r {n} × 1 MiB into an album + sync"
        bench.rows.append((f"W8a {what}, albumfs with a remote (plain column: local-only albumfs)",
                           values["local"], values["remote"], "seconds", "≤ 1.1"))
        bench.rows.append((f"W8a {what}, albumfs with a remote (plain column: into rclone mount "
                           f"--vfs-cache-mode full)", values["rclone"], values["remote"], "seconds", "≤ 1"))
        bench.rows.append((f"W8b then albumfs sync --wait: all {n} in the bucket (plain column: rclone copy of "
                           f"the {n} files to the bucket)", values["rclone-copy"], values["syncwait"], "seconds", "≤ 1.3"))
        bench.rows.append((f"W8b the whole way, cp -r + sync + sync --wait (plain column: rclone copy)",
                           values["rclone-copy"], values["whole"], "seconds", "≤ 1.3"))
        bench.notes.append(f"W8a: rclone mount's own uploads, after its cp + sync returned, took "
                           f"{median(values['rclone-upload']):.2f} s more (median; rounds "
                           + " ".join(f"{v:.2f}" for v in values["rclone-upload"])
                           + "; they start 5 s after a close, --vfs-write-back's default)")

    # -- c ------------------------------------------------------------------------------------

    def listings(self):
        bench, n = self.bench, self.s.files
        # The album: made through a mount (every original kept local), uploaded, then the store is
        # mounted with -o cache_size=1 so that everything the bucket holds is evicted.
        store = self.remote_store("c", "c")
        mp = self.path("c", "mnt")
        start = time.perf_counter()
        mount = self.mount(store, mp)
        with bench.watchdog.phase("W8c: making the album", bench.timeout):
            os.mkdir(os.path.join(mp, "Albums", "Big"))
        copied, _ = self.sh(f"cp -r {q(self.small)}/. {q(mp)}/Albums/Big/ && sync", timeout=max(bench.timeout, n / 20))
        waited = self.sync_wait(mp)
        self.unmount(mount)
        made = time.perf_counter() - start
        uploaded, _ = self.sh(f"rclone copy --transfers 16 --checkers 16 {q(self.small)} rgw:rclone/c/Big",
                              timeout=max(bench.timeout, n / 20))
        bench.notes.append(f"W8c set-up (not timed in the table): {n} × 4 KiB into the album through the mount "
                           f"{copied:.1f} s, albumfs sync --wait {waited:.1f} s ({n / waited:.0f} uploads/s), "
                           f"{made:.1f} s in all; rclone copy --transfers 16 of the same files {uploaded:.1f} s")
        album = os.path.join(mp, "Albums", "Big")
        values = {k: [] for k in ("albumfs-cold", "albumfs-warm", "rclone-cold", "rclone-warm")}
        listing = "ls -l {} > /dev/null"
        for r in range(bench.rounds):
            with bench.watchdog.phase(f"W8c round {r + 1}", 4 * bench.timeout):
                # rclone: a new mount (its directory cache empty), caches dropped.
                rmp, cache = self.path("c-rclone", "mnt"), self.path("c-rclone", f"cache{r}")
                rmount = self.rclone("rgw:rclone/c", rmp, cache)
                bench.drop_caches()
                values["rclone-cold"].append(self.sh(listing.format(q(os.path.join(rmp, "Big"))))[0])
                values["rclone-warm"].append(self.sh(listing.format(q(os.path.join(rmp, "Big"))))[0])
                listed = len(os.listdir(os.path.join(rmp, "Big")))
                self.rclone_unmount(rmount)
                shutil.rmtree(cache, ignore_errors=True)
                # albumfs: a new mount with -o cache_size=1; every photo remote-only.
                mount = self.mount(store, mp, ["cache_size=1"])
                self.wait_remote_only(mp, n)
                bench.drop_caches()
                values["albumfs-cold"].append(self.sh(listing.format(q(album)))[0])
                values["albumfs-warm"].append(self.sh(listing.format(q(album)))[0])
                names = os.listdir(album)
                if len(names) != n or listed != n:
                    bench.problem(f"W8c: the album lists {len(names)} photos, rclone {listed}; expected {n}")
                for name in names[:: max(1, n // 20)]:
                    if storage(os.path.join(album, name)) != "remote":
                        bench.problem(f"W8c: {name} is {storage(os.path.join(album, name))}, not remote")
                        break
                self.unmount(mount)
            log(f"  W8c round {r + 1}: ls -l cold albumfs {values['albumfs-cold'][-1]:.3f}, rclone "
                f"{values['rclone-cold'][-1]:.3f}; warm albumfs {values['albumfs-warm'][-1]:.3f}, "
                f"rclone {values['rclone-warm'][-1]:.3f}")
        bench.rows.append((f"W8c ls -l of an album of {n} remote-only photos, a new mount, caches dropped "
                           f"(plain column: the same {n} objects through a new rclone mount)",
                           values["rclone-cold"], values["albumfs-cold"], "seconds", "≤ 0.2"))
        bench.rows.append((f"W8c the same ls -l again, warm (plain column: rclone mount, warm)",
                           values["rclone-warm"], values["albumfs-warm"], "seconds", "≤ 0.2"))
        shutil.rmtree(self.path("c-rclone"), ignore_errors=True)

    def wait_remote_only(self, mp, n):
        deadline = time.monotonic() + self.sync_timeout
        while True:
            remote = self.stats(mp)["remote_only"]["assets"]
            if remote >= n:
                return
            if time.monotonic() > deadline:
                raise BenchError(f"W8c: {remote} of {n} photos remote-only {self.sync_timeout} s after a mount "
                                 f"with -o cache_size=1")
            time.sleep(0.2)

    # -- d and e ------------------------------------------------------------------------------

    def reads(self):
        bench, size = self.bench, self.s.big_size
        store = self.remote_store("d", "d")
        mp = self.path("d", "mnt")
        mount = self.mount(store, mp, [f"cache_size={CACHE_SIZE // MiB}M"])
        self.sh(f"cp {q(self.big)} {q(mp)}/'Camera Roll'/ && sync")
        self.sync_wait(mp)
        photo = os.path.join(mp, "Camera Roll", "big.MOV")
        key = f"d/objects/{self.big_sha256[:2]}/{self.big_sha256}"
        url = f"{self.gw.endpoint}/albumfs/{key}"
        curl = f"curl -sS -f -K {q(self.curl_config)}"
        _, out = self.sh(f"{curl} -r 0-9 {q(url)} | wc -c", capture=True)
        if out.strip() != "10":
            raise BenchError(f"W8d: no object {key} in the bucket (a ranged GET gave {out.strip()} bytes)")
        sampler = ContentSampler(os.path.join(store, "content"))
        bench.services.append(sampler)
        values = {k: [] for k in ("first-albumfs", "first-curl", "read-albumfs", "read-curl", "evicted-after")}
        read_max, closed_max = [], []
        try:
            for r in range(bench.rounds):
                with bench.watchdog.phase(f"W8d round {r + 1}", 4 * bench.timeout + 3 * self.sync_timeout):
                    self.wait_storage(photo, "remote")
                    self.drop_caches_but_tools()
                    values["first-curl"].append(self.sh(f"{curl} -r 0-4095 {q(url)} > /dev/null")[0])
                    values["first-albumfs"].append(self.sh(f"head -c 4096 {q(photo)} > /dev/null")[0])
                    # The download goes on after head's close; the copy is evicted again once it came.
                    self.wait_storage(photo, "remote")
                    self.drop_caches_but_tools()
                    values["read-curl"].append(size / MiB / self.sh(f"{curl} {q(url)} > /dev/null")[0])
                    sampler.phase = f"read {r}"
                    seconds, _ = self.sh(f"cat {q(photo)} > /dev/null")
                    values["read-albumfs"].append(size / MiB / seconds)
                    sampler.phase = f"closed {r}"
                    values["evicted-after"].append(self.wait_storage(photo, "remote"))
                    time.sleep(0.3)   # a sample or two after the eviction
                    sampler.phase = None
                    read_max.append(max([b for _, b in sampler.of(f"read {r}")] + [0]))
                    closed_max.append(max([b for _, b in sampler.of(f"closed {r}")] + [0]))
                log(f"  W8d round {r + 1}: first 4 KiB albumfs {values['first-albumfs'][-1] * 1000:.1f} ms, "
                    f"curl {values['first-curl'][-1] * 1000:.1f} ms; cold read albumfs {values['read-albumfs'][-1]:.0f} "
                    f"MiB/s, curl {values['read-curl'][-1]:.0f} MiB/s; content max {read_max[-1] / MiB:.1f} MiB "
                    f"while read, {closed_max[-1] / MiB:.1f} MiB after the close, remote again "
                    f"{values['evicted-after'][-1]:.1f} s after it")
            # The data read through the mount is the file's (not timed): one more cold read.
            with bench.watchdog.phase("W8d: reading the file back", 2 * bench.timeout + 2 * self.sync_timeout):
                self.wait_storage(photo, "remote")
                bench.drop_caches()
                _, out = self.sh(f"cmp {q(self.big)} {q(photo)} && echo same", capture=True)
                if "same" not in out:
                    bench.problem("W8d: the remote-only file read through the mount differs from the original")
                self.wait_storage(photo, "remote")
        finally:
            sampler.stop()
            bench.services.remove(sampler)
        self.unmount(mount)
        _, fsck = self.sh(f"{q(bench.binary)} fsck --store {q(store)}", capture=True)
        if "consistent" not in fsck:
            bench.problem(f"W8: fsck of the remote store after d: {fsck.strip()}")
        big = human_bytes(size)
        bench.rows.append((f"W8d first 4 KiB of a remote-only {big} file, caches dropped: head -c 4096 (plain "
                           f"column: a ranged GET of 4 KiB, curl)", values["first-curl"], values["first-albumfs"],
                           "seconds", None))
        bench.rows.append((f"W8d cold read of the remote-only {big} file, cat, MiB/s (plain column: one GET of "
                           f"its object, curl)", values["read-curl"], values["read-albumfs"], "mibps", "≥ 0.8"))
        bound = (CACHE_SIZE + size) / MiB
        bench.rows.append((f"W8e the store's content while cat reads it, max sampled, MiB (plain column: the "
                           f"bound, cache_size 64 MiB + the open file)", [bound] * len(read_max),
                           [b / MiB for b in read_max], "mib", "≤ 1"))
        bench.rows.append((f"W8e the store's content after cat closed it until it is evicted, max sampled, MiB "
                           f"(plain column: the bound, cache_size 64 MiB)", [CACHE_SIZE / MiB] * len(closed_max),
                           [b / MiB for b in closed_max], "mib", "≤ 1"))
        over = values["evicted-after"]
        bench.notes.append(f"W8e: after cat closed the file, it stayed local (storage both, the content above "
                           f"cache_size with no file open) for {median(over):.1f} s (median; rounds "
                           + " ".join(f"{v:.1f}" for v in over) + ") before it was evicted")

    def drop_caches_but_tools(self):
        """Cold data, warm programs: curl's libraries would otherwise come from the disk in its
        timed run and head's and cat's would not (or the other way round)."""
        self.bench.drop_caches()
        self.sh("curl --version > /dev/null && head --version > /dev/null && cat --version > /dev/null")

    def wait_storage(self, photo, want):
        """Seconds until the photo's user.albumfs.storage is `want` (bounded; the caller's watchdog
        phase bounds the getxattr itself)."""
        start = time.monotonic()
        deadline = start + self.sync_timeout
        while True:
            state = storage(photo)
            if state == want:
                return time.monotonic() - start
            if time.monotonic() > deadline:
                raise BenchError(f"W8: {photo} is {state}, not {want}, {self.sync_timeout} s on")
            time.sleep(0.05)
