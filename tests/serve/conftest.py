"""A real ``dal serve`` process on a free loopback port, over a catalog with datasets in two namespaces and
principals of every kind (see ``PRINCIPALS``)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

import dal
from dal.catalog.auth import AuthStore

ALLOWED_DS = "weather.radar"  # every principal with a grant may read it
FORBIDDEN_DS = "sales.orders"  # only the owner may
MISSING_DS = "sales.ordres"  # no such dataset
# principal -> its grants (privilege, target)
PRINCIPALS: dict[str, list[tuple[str, str]]] = {
    "owner": [("MANAGE", "*")],
    "ns_reader": [("READ", "weather.*")],
    "one_reader": [("READ", "weather.radar")],
    "writer": [("WRITE", "weather.*")],
    "ns_manager": [("MANAGE", "weather.*")],  # manages a namespace: reads it, but is no catalog admin
    "nobody": [],
}
BAD_TOKENS = ("revoked", "expired", "none", "malformed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def populate(db_url: str, root: Path) -> dict[str, str | None]:
    """Three datasets written by dal, the principals and their grants; returns a token per caller."""
    from dal import lineage

    lineage.clear_read_log()  # reads earlier tests in this process made must not become these writes' upstream
    for name, n in (("weather.radar", 5), ("weather.wind", 3), ("sales.orders", 4)):
        data = pa.table({"id": list(range(n)), "v": [f"{name}-{i}" for i in range(n)]})
        dal.write(data, name, path=str(root / name), catalog=db_url)
    dal.write(pa.table({"id": [9], "v": ["more"]}), "weather.radar", catalog=db_url, tags=["prod"])
    store = AuthStore(db_url)
    tokens: dict[str, str | None] = {}
    for who, grants in PRINCIPALS.items():
        store.create_principal(who, "service" if who == "writer" else "user")
        for privilege, target in grants:
            store.grant(who, privilege, target)
        tokens[who] = store.create_token(who, expires_in=timedelta(days=1))[0]
    revoked, token = store.create_token("ns_reader")
    store.revoke_token(token.token_id)
    tokens["revoked"] = revoked
    tokens["expired"] = store.create_token("ns_reader", expires_in=timedelta(seconds=-1))[0]
    tokens["none"] = None
    tokens["malformed"] = "dal_nothex_" + "x" * 43
    store.close()
    return tokens


@dataclass
class Served:
    url: str
    db: str
    tokens: dict[str, str | None]
    proc: subprocess.Popen[str]

    def request(
        self,
        method: str,
        path: str,
        who: str | None = None,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, bytes, dict[str, str]]:
        return http(method, self.url + path, self.tokens.get(who) if who else None, body, headers)


def http(
    method: str,
    url: str,
    token: str | None = None,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    context: object = None,
) -> tuple[int, bytes, dict[str, str]]:
    h = dict(headers or {})
    if token:
        h["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=body, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=30, context=context) as r:  # type: ignore[arg-type]
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def start(
    db_url: str, args: Sequence[str] = (), scheme: str = "http", wait: bool = True
) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dal.cli", "--catalog", db_url, "serve", "--port", str(port), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    base = f"{scheme}://127.0.0.1:{port}"
    if wait:
        wait_ready(proc, port)
    return proc, base


def wait_ready(proc: subprocess.Popen[str], port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"dal serve exited: {proc.stdout.read() if proc.stdout else ''}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError("dal serve did not start in 60 s")


def stop(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    try:
        out, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out or ""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("served")
    db_url = f"sqlite:///{root}/catalog.db"
    old = os.environ.get("DAL_HOME")
    os.environ["DAL_HOME"] = str(root / "home")
    try:
        tokens = populate(db_url, root)
    finally:
        if old is None:
            os.environ.pop("DAL_HOME", None)
        else:
            os.environ["DAL_HOME"] = old
    proc, base = start(db_url)
    try:
        yield Served(base, db_url, tokens, proc)
    finally:
        out = stop(proc)
        for token in tokens.values():  # never printed or logged
            assert not token or token not in out


def body_json(raw: bytes) -> object:
    return json.loads(raw)
