"""The command line: scripts/bench [options] (see --help)."""
import argparse
import os
import signal
import sys

from albumfs_mount import MountError

from .core import Bench
from .harness import BenchError, Terminated, log
from .privilege import run_as_user


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
    parser.add_argument("--uring", action="store_true",
                        help="mount with -o uring: requests through FUSE over io_uring (Linux 6.14+; root must "
                             "first turn on /sys/module/fuse/parameters/enable_uring)")
    parser.add_argument("--as-user", metavar="NAME",
                        help="mount and run every timed command as this unprivileged user (root only drops "
                             "the caches); a user's mount never has passthrough")
    parser.add_argument("--photos", type=int, help="photos W1 imports (default 2,000; --quick: 200)")
    parser.add_argument("--big-mib", type=int, help="size of the big file in MiB (default 2048; --quick: 64)")
    parser.add_argument("--only", metavar="W1,W2,...",
                        help="only these workloads (W2, W4 and W7 read what W1 imported; W3, W6 and W7 need the big album; "
                             "W8 is on its own)")
    parser.add_argument("--remote", action="store_true",
                        help="also W8: albumfs with its originals in an S3 bucket (a radosgw on loopback started "
                             "for the run) against rclone mount --vfs-cache-mode full, curl and a local-only albumfs; "
                             "opt-in (`--only W8` runs it alone)")
    parser.add_argument("--remote-photos", type=int, help="W8: photos of 1 MiB copied in (default 300; --quick: 50)")
    parser.add_argument("--remote-files", type=int,
                        help="W8: 4 KiB files of the remote-only album listed (default 10,000; --quick: 1,000)")
    parser.add_argument("--remote-big-mib", type=int,
                        help="W8: MiB of the remote-only file read cold (default 512; --quick: 128)")
    parser.add_argument("--json", metavar="FILE",
                        help="also write the results (every row's rounds, medians and ratio, the notes and problems) "
                             "as JSON to FILE")
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
