"""An asset whose content file is gone (SEMANTICS.md § Durability and safety): its name is still
listed, so opening it is an I/O error (EIO), never "no such file" (ENOENT), and the daemon logs a
line naming the asset; a detached daemon (no -f) sends that line to syslog, where the journal picks
it up.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import socket
import stat
import subprocess
import time

import pytest

from albumfs_testlib import albumfs, content_files, expect_errno, ino, stop_background_mount, write


@contextlib.contextmanager
def syslog_messages():
    """Yields a function returning the syslog lines sent so far: from our own /dev/log socket where
    the machine has none, else from the journal."""
    if not os.path.exists("/dev/log"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind("/dev/log")
        sock.setblocking(False)
        seen: list[str] = []

        def read() -> list[str]:
            with contextlib.suppress(BlockingIOError):
                while True:
                    seen.append(sock.recv(65536).decode(errors="replace"))
            return seen
        try:
            yield read
        finally:
            sock.close()
            os.unlink("/dev/log")
    else:
        if shutil.which("journalctl") is None:
            pytest.fail("/dev/log exists but there is no journalctl to read what was logged")
        since = time.strftime("%Y-%m-%d %H:%M:%S")

        def read() -> list[str]:
            p = subprocess.run(["journalctl", "-q", "-o", "cat", "-t", "albumfs", "--since", since],
                               capture_output=True, text=True, timeout=30)
            return p.stdout.splitlines()
        yield read


def remove_content_of(store, asset_id: int) -> None:
    [path] = [f for f in content_files(store) if int(os.path.basename(f), 16) == asset_id]
    os.unlink(path)


def test_missing_content_file_is_eio_and_logged(mount):
    """SEMANTICS.md § Durability and safety: a listed asset without data opens with EIO, logged."""
    write(mount.roll / "photo.jpg", b"data")
    asset = ino(mount.roll / "photo.jpg")
    remove_content_of(mount.store, asset)
    for flags in (os.O_RDONLY, os.O_RDWR):
        expect_errno(errno.EIO, os.open, mount.roll / "photo.jpg", flags)
    assert f"asset {asset}" in mount.log_text(), mount.log_text()


def test_detached_daemon_logs_to_syslog(tmp_path):
    """SEMANTICS.md § Durability and safety: without -f the daemon's log goes to syslog."""
    store, mp = tmp_path / "store", tmp_path / "mnt"
    mp.mkdir()
    albumfs("init", store)
    with syslog_messages() as messages:
        try:
            albumfs("mount", "--store", store, mp, timeout=30)
            write(mp / "Camera Roll" / "photo.jpg", b"data")
            asset = ino(mp / "Camera Roll" / "photo.jpg")
            remove_content_of(store, asset)
            expect_errno(errno.EIO, os.open, mp / "Camera Roll" / "photo.jpg", os.O_RDONLY)
            deadline = time.monotonic() + 30   # the journal takes the line in when it gets to it
            while not any(f"asset {asset}" in m for m in messages()) and time.monotonic() < deadline:
                time.sleep(0.05)
            logged = [m for m in messages() if f"asset {asset}" in m]
        finally:
            left = stop_background_mount(mp, store)
    assert logged, f"no syslog line names asset {asset}: {messages()}"
    assert "albumfs" in logged[0], logged
    assert not left
