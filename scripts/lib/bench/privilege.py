"""--as-user: the bench runs as that user in a child process; root, in the parent, only drops
the page cache when the child asks."""
import os
import shutil
import signal
import sys
import traceback

from albumfs_mount import mount_points_below

from .harness import MARKER, BenchError


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
        except BaseException:
            traceback.print_exc()   # os._exit below would end the child without a word
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda number, _frame: os.kill(child, number))
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the child gets it from the terminal
    return dropper.serve(child)
