"""Smoke tests of the S3 test harness (objectstore.py, scripts/lib/radosgw): a real radosgw on
loopback answers s3cmd, refuses what is not signed with the user's keys, and leaves nothing
behind (no process, no listening port, no state dir) once stopped."""

from __future__ import annotations

import os
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from objectstore import RADOSGW, object_store, running_object_store  # noqa: F401  (object_store: fixture)


def http_status(method: str, url: str, data: bytes | None = None) -> int:
    request = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_bucket_and_object_round_trip(object_store, tmp_path):
    print(f"radosgw answered S3 {object_store.start_seconds} s after start, at {object_store.endpoint}")
    assert object_store.endpoint == f"http://127.0.0.1:{object_store.port}"
    bucket = "s3://albumfs-smoke"
    object_store.s3cmd("mb", bucket)
    assert bucket in object_store.s3cmd("ls").stdout

    original = tmp_path / "photo.jpg"
    original.write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    object_store.s3cmd("put", str(original), f"{bucket}/originals/photo.jpg")
    listing = object_store.s3cmd("ls", "--recursive", bucket).stdout
    assert f"{bucket}/originals/photo.jpg" in listing
    assert str(original.stat().st_size) in listing

    copy = tmp_path / "copy.jpg"
    object_store.s3cmd("get", f"{bucket}/originals/photo.jpg", str(copy))
    assert copy.read_bytes() == original.read_bytes()

    object_store.s3cmd("del", f"{bucket}/originals/photo.jpg")
    assert "photo.jpg" not in object_store.s3cmd("ls", "--recursive", bucket).stdout
    gone = object_store.s3cmd("get", f"{bucket}/originals/photo.jpg", str(tmp_path / "gone"),
                              check=False)
    assert gone.returncode != 0, gone
    assert "404" in gone.stderr or "does not exist" in gone.stderr, gone   # s3cmd HEADs first
    object_store.s3cmd("rb", bucket)


def test_unsigned_and_wrongly_signed_requests_are_refused(object_store, tmp_path):
    bucket = "albumfs-private"
    object_store.s3cmd("mb", f"s3://{bucket}")
    secret = tmp_path / "secret"
    secret.write_bytes(b"not for everyone\n")
    object_store.s3cmd("put", str(secret), f"s3://{bucket}/secret")

    # No signature at all.
    url = f"{object_store.endpoint}/{bucket}/secret"
    assert http_status("GET", url) == 403
    assert http_status("PUT", f"{object_store.endpoint}/{bucket}/anonymous", b"x") == 403
    assert http_status("DELETE", url) == 403

    # Signed with the wrong secret, and with a key id the server does not know.
    # (a GET: its error body names the reason; s3cmd's get HEADs first, and HEAD has no body)
    wrong_secret = object_store.s3cmd("ls", f"s3://{bucket}", check=False, secret_key="W" * 40)
    assert wrong_secret.returncode != 0, wrong_secret
    assert "403" in wrong_secret.stderr and "SignatureDoesNotMatch" in wrong_secret.stderr, wrong_secret
    unknown_key = object_store.s3cmd("ls", f"s3://{bucket}", check=False, access_key="AKNOTAUSER0000000000")
    assert unknown_key.returncode != 0, unknown_key
    assert "403" in unknown_key.stderr and "InvalidAccessKeyId" in unknown_key.stderr, unknown_key

    # Nothing of that touched the object; the right keys still read it.
    object_store.s3cmd("get", f"s3://{bucket}/secret", str(tmp_path / "b"))
    assert (tmp_path / "b").read_bytes() == secret.read_bytes()


def processes_naming(text: str) -> list[str]:
    """Live (non-zombie) processes whose command line contains text."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if text in cmdline and state not in ("Z", "X"):
            found.append(f"{entry.name}: {cmdline}")
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def listening(port: int) -> bool:
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.read().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    return True
    return False


def can_listen(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as every server binds
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
        except OSError:
            return False
    return True


def test_stop_leaves_no_process_port_or_state():
    with running_object_store() as store:
        state_dir, pids, ports = store.state_dir, dict(store.pids), (store.port, store.mon_port)
        assert set(pids) == {"mon.a", "osd.0", "rgw.a"}, pids
        assert all(alive(pid) for pid in pids.values()), pids
        assert listening(store.port) and listening(store.mon_port)
        assert processes_naming(str(state_dir))
        assert http_status("GET", store.endpoint + "/") == 200   # anonymous list: S3 is up
    # running_object_store's exit ran `radosgw stop`; it raises if a daemon outlived SIGKILL.
    assert "not in any pid file" not in store.stop_report, store.stop_report
    assert not [name for name, pid in pids.items() if alive(pid)], pids
    assert processes_naming(str(state_dir)) == []
    for port in ports:
        assert not listening(port), f"port {port} still has a listener"
        assert can_listen(port), f"port {port} cannot be bound"
    assert not state_dir.exists()


def test_a_failing_body_still_stops_everything():
    with pytest.raises(RuntimeError, match="the test failed"):
        with running_object_store() as store:
            state_dir, pids = store.state_dir, dict(store.pids)
            raise RuntimeError("the test failed")
    assert not [name for name, pid in pids.items() if alive(pid)], pids
    assert processes_naming(str(state_dir)) == []
    assert not listening(store.port) and not state_dir.exists()


def test_start_refuses_a_dir_in_use_and_stop_refuses_a_foreign_dir(tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep").write_text("someone's file\n")
    start = subprocess.run([str(RADOSGW), "start", str(foreign)], capture_output=True, text=True,
                           timeout=30)
    assert start.returncode != 0 and "not empty" in start.stderr, start
    stop = subprocess.run([str(RADOSGW), "stop", str(foreign)], capture_output=True, text=True,
                          timeout=30)
    assert stop.returncode != 0 and "not touching it" in stop.stderr, stop
    assert (foreign / "keep").read_text() == "someone's file\n"
