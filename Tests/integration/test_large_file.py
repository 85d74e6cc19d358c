"""A 2 GiB file through the mount with flat daemon memory (issue 2 item 11)."""

import hashlib
import os
import subprocess
import threading

import pytest

from albumfs_testlib import GiB, MiB, run, sha256, vm_hwm_kib

CHUNK = 64 * MiB
CHUNKS = 32                      # 32 x 64 MiB = 2 GiB
PEAK_RSS_LIMIT_KIB = 200 * 1024  # whole-file buffering would need > 2 GiB


def write_with_dd(dst, chunk: bytes, count: int) -> str:
    """Stream count chunks (each tagged with its index) through `dd of=dst bs=1M`; return their sha256."""
    expected = hashlib.sha256()
    dd = subprocess.Popen(["dd", f"of={dst}", "bs=1M", "iflag=fullblock", "status=none"],
                          stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    killer = threading.Timer(600, dd.kill)
    killer.daemon = True
    killer.start()
    try:
        body = memoryview(chunk)[8:]
        for i in range(count):
            tag = i.to_bytes(8, "little")  # every chunk differs: a misplaced chunk cannot go unseen
            dd.stdin.write(tag)
            dd.stdin.write(body)
            expected.update(tag)
            expected.update(body)
        dd.stdin.close()
        rc = dd.wait(timeout=600)
    except BrokenPipeError:
        rc = dd.wait(timeout=60)
    finally:
        killer.cancel()
        if dd.poll() is None:
            dd.kill()
            dd.wait(timeout=30)
    err = dd.stderr.read().decode(errors="replace")
    assert rc == 0, f"dd into the mount failed ({rc}): {err}"
    return expected.hexdigest()


@pytest.mark.mount_timeout(1200)
def test_2gib_file_round_trip_with_flat_memory(mount):
    """Item 11: a 2 GiB file copied in and read back is identical; the daemon's peak RSS stays flat."""
    start_kib = vm_hwm_kib(mount.proc.pid)
    dst = mount.roll / "big.bin"
    expected = write_with_dd(dst, os.urandom(CHUNK), CHUNKS)
    assert os.stat(dst).st_size == 2 * GiB
    write_kib = vm_hwm_kib(mount.proc.pid)
    assert write_kib < PEAK_RSS_LIMIT_KIB, \
        f"daemon peak RSS {write_kib} KiB after writing 2 GiB (was {start_kib} KiB at mount)"

    mount.remount()  # read from the store, not from the kernel's page cache
    assert os.stat(dst).st_size == 2 * GiB
    assert sha256(dst) == expected, "the 2 GiB file read back differs from what was written"
    read_kib = vm_hwm_kib(mount.proc.pid)
    assert read_kib < PEAK_RSS_LIMIT_KIB, f"daemon peak RSS {read_kib} KiB after reading 2 GiB"

    run(["rm", dst])  # give the disk space back (not a check of item 6)
