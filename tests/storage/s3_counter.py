"""A counting HTTP proxy in front of an S3 server (moto): every request that reaches storage, with its method,
key and the bytes of the response body — what a cloud bill counts (GETs, bytes out). Used by the file-cache
tests and ``benchmarks/cache_bench.py``.

The proxy runs in its own process (``python -m tests.storage.s3_counter UPSTREAM PORT LOG``): delta-rs holds
the GIL while it waits for S3, so a proxy thread in the reading process would never answer it. Each request
is one JSON line in LOG, written before the response is sent."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade", "content-length"}
DATA_SUFFIX = ".parquet"


@dataclass(frozen=True)
class Request:
    method: str
    bucket: str
    key: str
    query: dict[str, list[str]]
    status: int
    body_bytes: int  # response body (what a GET downloads)

    @property
    def is_list(self) -> bool:
        return self.method == "GET" and not self.key

    @property
    def is_data_get(self) -> bool:
        """A GET of a data file (Parquet) — the requests a cache must save."""
        return self.method == "GET" and self.key.endswith(DATA_SUFFIX)


class Counter:
    """The requests the proxy process logged (read from its log file)."""

    def __init__(self, log: Path) -> None:
        self.log = log

    @property
    def requests(self) -> list[Request]:
        try:
            lines = self.log.read_text().splitlines()
        except FileNotFoundError:
            return []
        return [Request(**json.loads(line)) for line in lines if line.endswith("}")]

    def mark(self) -> int:
        return len(self.requests)

    def since(self, mark: int) -> list[Request]:
        return self.requests[mark:]

    @staticmethod
    def summary(requests: list[Request]) -> dict[str, int]:
        data = [r for r in requests if r.is_data_get]
        return {
            "data_gets": len(data),
            "data_bytes": sum(r.body_bytes for r in data),
            "other_gets": sum(1 for r in requests if r.method == "GET" and not r.is_data_get and not r.is_list),
            "lists": sum(1 for r in requests if r.is_list),
            "heads": sum(1 for r in requests if r.method == "HEAD"),
            "bytes": sum(r.body_bytes for r in requests if r.method == "GET"),
        }


def _handler(upstream: str, log: Path) -> type[BaseHTTPRequestHandler]:
    target = urlsplit(upstream)
    local = threading.local()
    lock = threading.Lock()
    out = open(log, "a", buffering=1)

    def record(r: Request) -> None:
        with lock:
            out.write(json.dumps(asdict(r)) + "\n")
            out.flush()

    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                out = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return out
                    out += self.rfile.read(size)
                    self.rfile.readline()
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def _conn(self) -> http.client.HTTPConnection:
            conn = getattr(local, "conn", None)
            if conn is None:
                conn = local.conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
            return conn

        def _forward(self) -> None:
            body = self._body()
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
            if body or self.command in ("PUT", "POST"):
                headers["Content-Length"] = str(len(body))
            for attempt in range(2):
                conn = self._conn()
                try:
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    break
                except (http.client.HTTPException, OSError):
                    conn.close()
                    local.conn = None
                    if attempt:
                        raise
            parts = urlsplit(self.path)
            bucket, _, key = unquote(parts.path).lstrip("/").partition("/")
            record(Request(self.command, bucket, key, parse_qs(parts.query), resp.status, len(data)))
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in HOP:
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)) if self.command != "HEAD" else
                             resp.getheader("Content-Length", "0"))  # fmt: skip
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    return Proxy


@contextmanager
def counting_proxy(upstream: str, log: Path) -> Iterator[tuple[str, Counter]]:
    """A proxy process to ``upstream`` on a free loopback port, logging to ``log``: (its endpoint, the counter)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "tests.storage.s3_counter", upstream, str(port), str(log)], env=env,
                            cwd=root)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the counting proxy did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}", Counter(log)
    finally:
        proc.kill()
        proc.wait(timeout=30)


def serve(upstream: str, port: int, log: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(upstream, log))
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]))
