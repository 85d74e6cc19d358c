"""A Samba share of a mounted library, configured with the README's own lines ("Sharing the
library with Samba"): smbd on a loopback port, checked with smbclient (SEMANTICS.md § Files that
are not photos: side files; § What each operation does)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from albumfs_testlib import REPO_ROOT, names, payload, read, write

pytestmark = pytest.mark.skipif(shutil.which("smbd") is None or shutil.which("smbclient") is None,
                                reason="samba and smbclient are not installed (scripts/test installs them)")


def readme_share_lines() -> tuple[list[str], list[str]]:
    """The README's [global] lines and [photos] lines, as written there."""
    text = (REPO_ROOT / "README.md").read_text()
    section = text[text.index("## Sharing the library with Samba"):]
    block = re.search(r"```ini\n(.*?)```", section, re.S).group(1)
    global_part, share_part = block.split("[photos]")
    keep = lambda part: [l for l in part.splitlines() if l.strip() and not l.strip().startswith("#")]
    return keep(global_part), keep(share_part)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def share(mount, tmp_path):
    """smbd serving the mount on 127.0.0.1 (guest access as root), stopped by its pid."""
    global_lines, share_lines = readme_share_lines()
    state = tmp_path / "smb"
    dirs = {name: state / name for name in ("private", "lock", "state", "cache", "pid", "ncalrpc")}
    for d in dirs.values():
        d.mkdir(parents=True)
    port = free_port()
    share_lines = [l for l in share_lines if not l.strip().startswith(("path", "valid users"))]
    conf = "\n".join([
        "[global]", "    server role = standalone server", "    interfaces = 127.0.0.1",
        "    bind interfaces only = yes", f"    smb ports = {port}", "    disable netbios = yes",
        "    map to guest = Bad User", "    guest account = root", "    load printers = no",
        "    printcap name = /dev/null", "    disable spoolss = yes",
        f"    log file = {state}/log.%m",
        *[f"    {name} directory = {path}" for name, path in dirs.items() if name not in ("private", "ncalrpc")],
        f"    private dir = {dirs['private']}", f"    ncalrpc dir = {dirs['ncalrpc']}",
        *global_lines,
        "[photos]", f"    path = {mount.mp}", "    guest ok = yes", "    force user = root", *share_lines,
    ]) + "\n"
    (state / "smb.conf").write_text(conf)
    log = open(state / "smbd.log", "wb")
    proc = subprocess.Popen(["smbd", "--foreground", "--no-process-group", f"--configfile={state / 'smb.conf'}",
                             "--debug-stdout"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, f"smbd exited: {(state / 'smbd.log').read_text()[-2000:]}"
            assert time.monotonic() < deadline, "smbd did not listen within 30 s"
            time.sleep(0.1)

        def smbclient(commands: str) -> str:
            p = subprocess.run(["smbclient", f"//127.0.0.1/photos", "-p", str(port), "-N", "-c", commands],
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, f"smbclient {commands!r}: {p.stdout}{p.stderr}"
            return p.stdout
        yield smbclient
    finally:
        pid_file = dirs["pid"] / "smbd.pid"
        pid = int(pid_file.read_text()) if pid_file.exists() else proc.pid
        for target in {pid, proc.pid}:
            try:
                os.kill(target, signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        subprocess.run(["pkill", "-KILL", "-s", str(proc.pid)], stdin=subprocess.DEVNULL, timeout=30)
        log.close()


def test_samba_share_round_trip_albums_and_side_files(share, mount, tmp_path):
    """Through smbclient: a photo put into an album comes back identical and is in the roll; an
    album is made and renamed; deleting the entry keeps the photo in the roll; ._x, .DS_Store and
    Thumbs.db written there are side files: the roll does not change."""
    (mount.albums / "Trip").mkdir()
    photo = tmp_path / "photo.jpg"
    write(photo, payload(300_000, "smb photo"))
    share(f'cd Albums/Trip; put "{photo}" beach.jpg; get beach.jpg "{tmp_path / "back.jpg"}"')
    assert read(tmp_path / "back.jpg") == read(photo)
    assert names(mount.roll) == ["beach.jpg"] and read(mount.roll / "beach.jpg") == read(photo)
    share("cd Albums; mkdir Paris; rename Paris Lyon")
    assert sorted(names(mount.albums)) == ["Lyon", "Trip"]
    side = tmp_path / "side"
    write(side, b"not a photo")
    share(f'cd Albums/Trip; put "{side}" ._beach.jpg; put "{side}" .DS_Store; put "{side}" Thumbs.db')
    assert sorted(names(mount.albums / "Trip")) == [".DS_Store", "._beach.jpg", "Thumbs.db", "beach.jpg"]
    assert names(mount.roll) == ["beach.jpg"], "side files written through Samba must not become photos"
    share("cd Albums/Trip; del beach.jpg; del ._beach.jpg")
    assert names(mount.roll) == ["beach.jpg"], "deleting in an album keeps the photo in the roll"
    assert sorted(names(mount.albums / "Trip")) == [".DS_Store", "Thumbs.db"]
