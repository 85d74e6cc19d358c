"""libfuse 3.14's passthrough_ll beside albumfs (W1 and W2), in the same rounds: the daemon path's
peer, a FUSE daemon that passes each request straight to the disk. Compiled at bench time from
the source Debian's libfuse3-dev ships, into the bench's work dir (never kept), and mounted over a
plain directory laid out as the plain tree is, by the same user, with albumfs's cache options:
entries and attributes kept long and the page cache kept across opens (-o cache=always), no
writeback cache. libfuse 3.14 has no FUSE passthrough: this peer always takes the daemon path."""
import os
import shlex
import subprocess
import time

from albumfs_mount import run_bounded

from .harness import log

SOURCE = "/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c"


class PassthroughLL:
    def __init__(self, work):
        self.binary = os.path.join(work, "peer-bin", "passthrough_ll")
        self.under = os.path.join(work, "peer-under")
        self.root = os.path.join(work, "peer")
        self.log = os.path.join(work, "peer-bin", "passthrough_ll.log")
        self.process = None

    def start(self):
        """Compiles and mounts it; returns why it could not (None: mounted at self.root)."""
        if not os.path.exists(SOURCE):
            return f"{SOURCE} is missing (libfuse3-dev)"
        os.makedirs(os.path.dirname(self.binary), exist_ok=True)
        command = (f"cc -O2 -I{shlex.quote(os.path.dirname(SOURCE))} {shlex.quote(SOURCE)} "
                   f"$(pkg-config --cflags --libs fuse3) -o {shlex.quote(self.binary)}")
        status, _, err = run_bounded(["sh", "-c", command], 120)
        if status != 0:
            return f"compiling passthrough_ll failed: {err.strip()[-300:]}"
        for sub in ("Albums", "Camera Roll"):
            os.makedirs(os.path.join(self.under, sub), exist_ok=True)
        os.makedirs(self.root, exist_ok=True)
        with open(self.log, "w") as errors:
            self.process = subprocess.Popen([self.binary, "-f", "-o", f"source={self.under},cache=always", self.root],
                                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors)
        deadline = time.monotonic() + 30
        while not os.path.ismount(self.root):
            if self.process.poll() is not None:
                with open(self.log) as errors:
                    err = errors.read().strip()
                self.process = None
                return f"passthrough_ll exited at mount: {err[-300:]}"
            if time.monotonic() > deadline:
                self.stop()
                return "passthrough_ll was not mounted within 30 s"
            time.sleep(0.05)
        log(f"passthrough_ll (libfuse 3.14's example) mounted at {self.root}, over {self.under}")
        return None

    def stop(self):
        if self.process is None:
            return
        if os.path.ismount(self.root):
            if run_bounded(["fusermount3", "-u", self.root], 30)[0] != 0:
                run_bounded(["fusermount3", "-uz", self.root], 30)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        self.process = None

    def is_mounted(self):
        return os.path.ismount(self.root)
