"""Tests of the fault-injecting proxy (faultproxy.py) itself, in front of a real radosgw: bytes go
through unchanged (SigV4 still verifies: the Host header is forwarded as sent), keep-alive holds,
and every fault does what it says, seen from an S3 client (s3cmd, or signed requests made here).

One radosgw for the module (a fresh one per test would cost ~3 s each); each test has its own
proxy and its own object names."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import http.client
import os
import select
import socket
import subprocess
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from faultproxy import FaultProxy, s3cfg_via
from objectstore import ObjectStore, running_object_store

BUCKET = "faultproxy"
TIMEOUT = 20          # every client wait
S3CMD_TIMEOUT = 60


# --- fixtures ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def store() -> Iterator[ObjectStore]:
    """One radosgw for the module, with the bucket BUCKET; always stopped."""
    with running_object_store() as s:
        s.s3cmd("mb", f"s3://{BUCKET}")
        yield s


@pytest.fixture
def proxy(store) -> Iterator[FaultProxy]:
    with FaultProxy(store.host, store.port) as p:
        yield p


@pytest.fixture
def s3cfg(proxy, store, tmp_path) -> Path:
    """s3cmd configuration that talks to the store through the proxy."""
    return s3cfg_via(store.s3cfg, tmp_path / "s3cfg", proxy.endpoint)


def s3cmd(config: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["s3cmd", "-c", str(config), *args], capture_output=True, text=True,
                            timeout=S3CMD_TIMEOUT, stdin=subprocess.DEVNULL)
    if check:
        assert result.returncode == 0, result
    return result


# --- a small SigV4 client ------------------------------------------------------------------------

def signed_headers(store: ObjectStore, host: str, method: str, path: str, body: bytes = b"",
                   query: dict[str, str] | None = None, headers: dict[str, str] | None = None
                   ) -> dict[str, str]:
    """The headers of a SigV4-signed S3 request (path style) for Host `host`."""
    amz_date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    day = amz_date[:8]
    payload = hashlib.sha256(body).hexdigest()
    all_headers = {k.lower(): v for k, v in (headers or {}).items()}
    all_headers.update({"host": host, "x-amz-date": amz_date, "x-amz-content-sha256": payload})
    names = sorted(all_headers)
    quote = lambda s: urllib.parse.quote(s, safe="-_.~")   # noqa: E731
    canonical = "\n".join([
        method, urllib.parse.quote(path, safe="/-_.~"),
        "&".join(f"{quote(k)}={quote(v)}" for k, v in sorted((query or {}).items())),
        "".join(f"{k}:{all_headers[k].strip()}\n" for k in names), ";".join(names), payload])
    scope = f"{day}/{store.region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + store.secret_key).encode()
    for part in (day, store.region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    all_headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={store.access_key}/{scope}, "
                                    f"SignedHeaders={';'.join(names)}, Signature={signature}")
    return all_headers


class S3:
    """Signed requests over one keep-alive connection (http.client)."""

    def __init__(self, store: ObjectStore, host: str, port: int):
        self.store, self.host_header = store, f"{host}:{port}"
        self.conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT)

    @classmethod
    def via(cls, proxy: FaultProxy, store: ObjectStore) -> "S3":
        return cls(store, proxy.host, proxy.port)

    @classmethod
    def direct(cls, store: ObjectStore) -> "S3":
        return cls(store, store.host, store.port)

    def request(self, method: str, path: str, body: bytes = b"", query: dict | None = None,
                headers: dict | None = None) -> tuple[int, dict[str, str], bytes]:
        all_headers = signed_headers(self.store, self.host_header, method, path, body, query, headers)
        url = path + ("?" + urllib.parse.urlencode(sorted(query.items())) if query else "")
        self.conn.request(method, url, body=body if body or method in ("PUT", "POST") else None,
                          headers=all_headers)
        response = self.conn.getresponse()
        data = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, data

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "S3":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def raw_connection(proxy: FaultProxy) -> socket.socket:
    sock = socket.create_connection((proxy.host, proxy.port), timeout=TIMEOUT)
    return sock


def send_signed(sock: socket.socket, store: ObjectStore, proxy: FaultProxy, method: str,
                path: str, body: bytes = b"") -> None:
    headers = signed_headers(store, f"{proxy.host}:{proxy.port}", method, path, body)
    headers["content-length"] = str(len(body))
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sock.sendall(head.encode() + b"\r\n" + body)


def read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    """(head, the bytes after it that came with it)"""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        assert piece, f"EOF inside the head: {data!r}"
        data += piece
    head, _, rest = data.partition(b"\r\n\r\n")
    return head + b"\r\n\r\n", rest


def content_length(head: bytes) -> int:
    for line in head.decode("latin-1").split("\r\n"):
        name, _, value = line.partition(":")
        if name.lower() == "content-length":
            return int(value)
    raise AssertionError(f"no Content-Length in {head!r}")


def read_response(sock: socket.socket) -> tuple[bytes, bytes]:
    head, body = read_head(sock)
    length = content_length(head)
    while len(body) < length:
        piece = sock.recv(65536)
        assert piece, f"EOF after {len(body)} of {length} body bytes"
        body += piece
    return head, body


def nothing_to_read(sock: socket.socket) -> bool:
    """No byte has arrived (and no EOF): the check does not wait."""
    readable, _, _ = select.select([sock], [], [], 0)
    return not readable


def put_direct(store: ObjectStore, key: str, body: bytes) -> None:
    with S3.direct(store) as s3:
        status, _, data = s3.request("PUT", f"/{BUCKET}/{key}", body)
        assert status == 200, data


def status_direct(store: ObjectStore, key: str) -> int:
    with S3.direct(store) as s3:
        return s3.request("HEAD", f"/{BUCKET}/{key}")[0]


def proxy_threads(proxy: FaultProxy) -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(f"faultproxy-{proxy.port}-")]


# --- forwarding --------------------------------------------------------------------------------

def test_s3cmd_put_and_get_round_trip_through_the_proxy(proxy, s3cfg, store, tmp_path):
    """An independent client signs for Host 127.0.0.1:PROXYPORT; radosgw accepts it as forwarded."""
    original = tmp_path / "photo.jpg"
    original.write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    s3cmd(s3cfg, "put", str(original), f"s3://{BUCKET}/round-trip/photo.jpg")
    copy = tmp_path / "copy.jpg"
    s3cmd(s3cfg, "get", str(f"s3://{BUCKET}/round-trip/photo.jpg"), str(copy))
    assert copy.read_bytes() == original.read_bytes()
    assert "round-trip/photo.jpg" in s3cmd(s3cfg, "ls", "--recursive", f"s3://{BUCKET}").stdout
    # ... and it went through the proxy, not around it
    assert proxy.count("PUT", "/round-trip/photo.jpg") == 1
    assert proxy.count("GET", "/round-trip/photo.jpg") == 1
    assert all(isinstance(r.status, int) and 200 <= r.status < 300 for r in proxy.requests), proxy.requests

    # Expect: 100-continue (libcurl sends it for large PUTs): the upstream's interim 100 is relayed.
    expecting = tmp_path / "s3cfg-expect"
    expecting.write_text(s3cfg.read_text() + "use_http_expect = True\n")
    result = s3cmd(expecting, "put", str(original), f"s3://{BUCKET}/round-trip/expect.jpg")
    assert "Expect Continue feature disabled" not in result.stderr, result   # the 100 came through
    s3cmd(s3cfg, "get", f"s3://{BUCKET}/round-trip/expect.jpg", str(tmp_path / "expect.jpg"))
    assert (tmp_path / "expect.jpg").read_bytes() == original.read_bytes()


def test_one_keep_alive_connection_carries_every_kind_of_response(proxy, store):
    body = os.urandom(2 * 1024 * 1024 + 5)
    key = f"/{BUCKET}/keep-alive/object"
    with S3.via(proxy, store) as s3:
        assert s3.request("PUT", key, body)[0] == 200
        status, _, data = s3.request("GET", key)
        assert (status, data == body) == (200, True)
        status, headers, data = s3.request("HEAD", key)       # a length, no body
        assert (status, int(headers["content-length"]), data) == (200, len(body), b"")
        status, _, data = s3.request("GET", key + "-missing")  # an error body
        assert status == 404 and b"NoSuchKey" in data
        status, headers, data = s3.request("GET", f"/{BUCKET}", query={"prefix": "keep-alive/"})
        assert headers.get("transfer-encoding") == "chunked", headers   # radosgw lists chunked
        assert status == 200 and b"<Key>keep-alive/object</Key>" in data
        assert s3.request("DELETE", key)[0] == 204                 # no body
        assert s3.request("HEAD", key)[0] == 404
    assert proxy.connections == 1
    assert [r.status for r in proxy.requests] == [200, 200, 200, 404, 200, 204, 404]


class _ChunkedUpstream(BaseHTTPRequestHandler):
    """A stand-in upstream that answers every POST with a chunked body (with chunk extensions and
    a trailer): the echo of the request's body (read as chunked or by Content-Length); GET /close
    answers and closes the connection."""
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b"ok")

    def do_POST(self):
        if self.headers.get("Transfer-Encoding") == "chunked":
            body = b""
            while (size := int(self.rfile.readline().split(b";")[0], 16)):
                body += self.rfile.read(size)
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b""):
                pass
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(0, len(body), 1000):
            piece = body[i:i + 1000]
            self.wfile.write(b"%x;ext=1\r\n%s\r\n" % (len(piece), piece))
        self.wfile.write(b"0\r\nX-Trailer: yes\r\n\r\n")

    def log_message(self, *args):
        pass


def test_chunked_bodies_both_ways_keep_the_connection_alive():
    """A stand-in upstream, not radosgw: chunked request bodies (albumfs sends none, radosgw
    takes them), chunk extensions and trailers, and an upstream that closes the connection."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChunkedUpstream)
    server.daemon_threads = True
    serving = threading.Thread(target=server.serve_forever, name="chunked-upstream", daemon=True)
    serving.start()
    try:
        with FaultProxy(*server.server_address[:2]) as proxy:
            conn = http.client.HTTPConnection(proxy.host, proxy.port, timeout=TIMEOUT)
            try:
                for size in (0, 1, 5000):
                    payload = os.urandom(size)
                    conn.request("POST", "/echo", body=payload)
                    response = conn.getresponse()
                    assert (response.status, response.read()) == (200, payload)
                    conn.request("POST", "/echo-chunked", body=iter([payload[:10], payload[10:]]),
                                 encode_chunked=True)
                    response = conn.getresponse()
                    assert (response.status, response.read()) == (200, payload)
                conn.request("GET", "/close")       # the upstream closes: so does the proxy
                response = conn.getresponse()
                assert (response.status, response.read()) == (200, b"ok")
                proxy.wait_until(lambda: proxy.open_connections == 0, timeout=TIMEOUT)
                conn.request("POST", "/echo", body=b"again")   # http.client opens a new one
                response = conn.getresponse()
                assert (response.status, response.read()) == (200, b"again")
            finally:
                conn.close()
            assert proxy.connections == 2
            assert [r.status for r in proxy.requests] == [200] * 8
    finally:
        server.shutdown()
        server.server_close()
        serving.join(TIMEOUT)


# --- faults ------------------------------------------------------------------------------------

def test_slowdown_is_answered_k_times_without_the_upstream_then_requests_pass(proxy, store):
    key = f"/{BUCKET}/slow/object"
    proxy.respond("PUT", status=503, code="SlowDown", times=2, path_contains="/slow/")
    with S3.via(proxy, store) as s3:
        for attempt in range(2):
            status, headers, data = s3.request("PUT", key, b"attempt %d" % attempt)
            assert status == 503
            assert data.startswith(b"<?xml") and b"<Error><Code>SlowDown</Code><Message>" in data
            assert int(headers["content-length"]) == len(data)
            assert status_direct(store, "slow/object") == 404     # the upstream never saw it
        assert s3.request("PUT", key, b"attempt 2")[0] == 200
        assert s3.request("GET", key)[2] == b"attempt 2"
    assert proxy.connections == 1                                # the 503s kept the connection
    assert [r.status for r in proxy.requests] == [503, 503, 200, 200]
    assert proxy.pending_faults == []


def test_s3cmd_retries_a_slowdown_and_succeeds(proxy, s3cfg, tmp_path):
    """s3cmd retries a 503 by itself, after 3 s (it has no option to shorten that)."""
    proxy.respond("PUT", times=1, path_contains="/s3cmd-slow")
    photo = tmp_path / "photo"
    photo.write_bytes(os.urandom(100_000))
    result = s3cmd(s3cfg, "put", str(photo), f"s3://{BUCKET}/s3cmd-slow/photo")
    assert "SlowDown" in result.stderr or "503" in result.stderr, result
    assert [r.status for r in proxy.requests if r.method == "PUT"] == [503, 200]


def test_a_reset_mid_response_breaks_the_get_after_exactly_that_many_body_bytes(proxy, store):
    body = os.urandom(1024 * 1024)
    put_direct(store, "reset/get", body)
    proxy.reset_mid_response("GET", after_bytes=65536, path_contains="/reset/get")

    with raw_connection(proxy) as sock:
        send_signed(sock, store, proxy, "GET", f"/{BUCKET}/reset/get")
        head, received = read_head(sock)
        assert head.startswith(b"HTTP/1.1 200") and content_length(head) == len(body)
        with pytest.raises(ConnectionResetError):
            while piece := sock.recv(65536):
                received += piece
    assert received == body[:65536]
    assert proxy.requests[-1].status == "fault"

    # an http.client user sees an error too; the next connection gets the whole object
    proxy.reset_mid_response("GET", after_bytes=1000)
    with S3.via(proxy, store) as s3, pytest.raises((http.client.HTTPException, OSError)):
        s3.request("GET", f"/{BUCKET}/reset/get")
    with S3.via(proxy, store) as s3:
        assert s3.request("GET", f"/{BUCKET}/reset/get")[2] == body
    assert [r.status for r in proxy.requests] == ["fault", "fault", 200]


def test_a_reset_mid_request_breaks_the_put_and_the_upstream_keeps_nothing(proxy, store):
    proxy.reset_mid_request("PUT", after_bytes=100_000)
    with S3.via(proxy, store) as s3, pytest.raises((http.client.HTTPException, OSError)):
        s3.request("PUT", f"/{BUCKET}/reset/put", os.urandom(1024 * 1024))
    assert proxy.requests == [("PUT", f"/{BUCKET}/reset/put", "fault")]
    assert status_direct(store, "reset/put") == 404
    with S3.via(proxy, store) as s3:
        assert s3.request("PUT", f"/{BUCKET}/reset/put", b"whole")[0] == 200
        assert s3.request("GET", f"/{BUCKET}/reset/put")[2] == b"whole"


def test_a_response_stalled_before_its_headers_waits_for_release(proxy, store):
    put_direct(store, "stall/headers", b"held")
    proxy.stall("GET", before="headers")
    with raw_connection(proxy) as sock:
        send_signed(sock, store, proxy, "GET", f"/{BUCKET}/stall/headers")
        proxy.wait_until(lambda: proxy.stalled == 1, timeout=TIMEOUT)
        assert nothing_to_read(sock)                       # not one byte of the response
        assert proxy.requests[-1].status is None           # in flight
        proxy.release()
        head, body = read_response(sock)
    assert head.startswith(b"HTTP/1.1 200") and body == b"held"
    assert proxy.stalled == 0 and proxy.requests[-1].status == 200


def test_a_response_stalled_before_its_body_sends_the_head_only(proxy, store):
    put_direct(store, "stall/body", b"held body")
    proxy.stall("GET", before="body")
    with raw_connection(proxy) as sock:
        send_signed(sock, store, proxy, "GET", f"/{BUCKET}/stall/body")
        head, early = read_head(sock)
        proxy.wait_until(lambda: proxy.stalled == 1, timeout=TIMEOUT)
        assert head.startswith(b"HTTP/1.1 200") and early == b"" and nothing_to_read(sock)
        proxy.release()
        body = b""
        while len(body) < content_length(head):
            body += sock.recv(65536)
    assert body == b"held body"


def test_a_stall_with_seconds_goes_on_by_itself(proxy, store):
    put_direct(store, "stall/seconds", b"late")
    proxy.stall("GET", before="headers", seconds=0.5)
    started = time.monotonic()
    with S3.via(proxy, store) as s3:
        assert s3.request("GET", f"/{BUCKET}/stall/seconds")[2] == b"late"
    assert time.monotonic() - started >= 0.5
    assert proxy.stalled == 0


def test_offline_resets_open_connections_and_refuses_new_ones_until_online(proxy, store, s3cfg):
    put_direct(store, "offline/object", b"there")
    with S3.via(proxy, store) as s3:
        assert s3.request("GET", f"/{BUCKET}/offline/object")[2] == b"there"
        assert proxy.open_connections == 1
        proxy.offline()
        proxy.wait_until(lambda: proxy.open_connections == 0, timeout=TIMEOUT)
        with pytest.raises((http.client.HTTPException, OSError)):
            s3.request("GET", f"/{BUCKET}/offline/object")      # the kept-alive connection is gone
    # The kernel completes the handshake, the proxy accepts and resets: connect() itself may see
    # the reset already (a timed connect is non-blocking + SO_ERROR), or the first recv does.
    with pytest.raises(ConnectionResetError):
        with raw_connection(proxy) as sock:
            send_signed(sock, store, proxy, "GET", f"/{BUCKET}/offline/object")
            sock.recv(1)
    failed = s3cmd(s3cfg, "get", f"s3://{BUCKET}/offline/object", "-", check=False)
    assert failed.returncode != 0, failed
    assert proxy.refused >= 2 and proxy.connections == 1        # s3cmd's counted as refused
    proxy.online()
    with S3.via(proxy, store) as s3:
        assert s3.request("GET", f"/{BUCKET}/offline/object")[2] == b"there"
    assert [r.status for r in proxy.requests] == [200, 200]      # refused ones never got a request in


def test_counters_and_matching_by_method_and_path(proxy, store):
    put_direct(store, "counted/other", b"x")
    proxy.respond("GET", status=500, code="InternalError", path_contains="/only-this", times=1)
    proxy.respond("HEAD", status=503, times=1)
    with S3.via(proxy, store) as s3:
        assert s3.request("GET", f"/{BUCKET}/counted/other")[0] == 200           # path differs
        status, _, data = s3.request("GET", f"/{BUCKET}/counted/only-this")
        assert status == 500 and b"<Code>InternalError</Code>" in data
        assert s3.request("GET", f"/{BUCKET}/counted/only-this")[0] == 404      # used up: upstream
        assert s3.request("HEAD", f"/{BUCKET}/counted/other")[:3:2] == (503, b"")  # no body
        assert s3.request("HEAD", f"/{BUCKET}/counted/other")[0] == 200          # same connection
    assert proxy.requests == [("GET", f"/{BUCKET}/counted/other", 200),
                              ("GET", f"/{BUCKET}/counted/only-this", 500),
                              ("GET", f"/{BUCKET}/counted/only-this", 404),
                              ("HEAD", f"/{BUCKET}/counted/other", 503),
                              ("HEAD", f"/{BUCKET}/counted/other", 200)]
    assert proxy.count() == 5 and proxy.count("GET") == 3 and proxy.count("PUT") == 0
    assert proxy.count("GET", path_contains="only-this") == 2
    assert proxy.count(path_contains="/counted/other") == 3
    assert proxy.applied_faults == [("respond", "GET", f"/{BUCKET}/counted/only-this"),
                                    ("respond", "HEAD", f"/{BUCKET}/counted/other")]
    assert proxy.pending_faults == [] and proxy.connections == 1


def test_close_resets_stalled_and_idle_connections_and_joins_its_threads(store):
    put_direct(store, "close/object", b"x")
    with contextlib.ExitStack() as cleanup:
        proxy = cleanup.enter_context(FaultProxy(store.host, store.port))
        idle = cleanup.enter_context(S3.via(proxy, store))
        assert idle.request("GET", f"/{BUCKET}/close/object")[0] == 200
        proxy.stall("GET")
        stalled = cleanup.enter_context(raw_connection(proxy))
        send_signed(stalled, store, proxy, "GET", f"/{BUCKET}/close/object")
        proxy.wait_until(lambda: proxy.stalled == 1, timeout=TIMEOUT)
        assert len(proxy_threads(proxy)) == 3       # the acceptor and two connections
        started = time.monotonic()
        proxy.close()
        assert time.monotonic() - started < 5
        assert proxy_threads(proxy) == []
        with pytest.raises(ConnectionResetError):
            stalled.recv(1)
        assert proxy.requests[-1].status == "fault"
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((proxy.host, proxy.port), timeout=TIMEOUT).close()
        proxy.close()                               # again: nothing to do
