"""The Python API's Hive errors are one-line DalErrors: a closed thrift port, something that is not a metastore on
the port, malformed URIs (refused before anything is read). No metastore is needed; the unknown-table answer of a
real one is in test_hive.py."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import dal
from dal.catalog import Catalog
from dal.errors import DalError
from tests.conftest import use_catalog

pytest.importorskip("hive_metastore_client")


@pytest.fixture
def cat(sqlite_or_served: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Catalog:
    """dal's default catalog for the test: SQLite, and through ``dal serve`` (SQLite and PostgreSQL behind it)."""
    return use_catalog(sqlite_or_served, tmp_path, monkeypatch)


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def not_a_metastore() -> Iterator[int]:
    """A TCP server that accepts and hangs up at once (a wrong port: a web server, a proxy)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield int(srv.getsockname()[1])
    stop.set()
    t.join(timeout=5)
    srv.close()


def one_line_error(excinfo: pytest.ExceptionInfo[DalError]) -> str:
    message = str(excinfo.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_unreachable_metastore(cat: Catalog, closed_port: int) -> None:
    dal.write(pd.DataFrame({"id": [1, 2]}), "hv.t")
    uri = f"thrift://127.0.0.1:{closed_port}"
    with pytest.raises(DalError) as e:
        dal.hive.sync(["hv.t"], uri=uri)
    assert one_line_error(e).startswith(f"cannot reach the Hive Metastore at {uri}: ")
    with pytest.raises(DalError) as e:
        dal.hive.import_table("db.tbl", uri=uri, name="hv.imported")
    assert one_line_error(e).startswith(f"cannot reach the Hive Metastore at {uri}: ")
    assert [d.name for d in cat.list_datasets()] == ["hv.t"]  # nothing registered


def test_the_error_is_the_only_report(cat: Catalog, closed_port: int) -> None:
    """A program with no logging set up: thrift's own "Could not connect" ERROR log is not printed as well."""
    code = (
        "import dal\n"
        "try:\n"
        f"    dal.hive.import_table('db.tbl', uri='thrift://127.0.0.1:{closed_port}')\n"
        "except dal.DalError as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("DalError cannot reach the Hive Metastore at thrift://127.0.0.1:")
    assert proc.stderr == ""


def test_a_port_that_is_not_a_metastore(cat: Catalog, not_a_metastore: int) -> None:
    dal.write(pd.DataFrame({"id": [1, 2]}), "hv.t")
    uri = f"thrift://127.0.0.1:{not_a_metastore}"
    with pytest.raises(DalError) as e:
        dal.hive.import_table("db.tbl", uri=uri)
    message = one_line_error(e)
    # a broken connection is not reported as a missing table
    assert message.startswith(f"the Hive Metastore at {uri} failed looking up db.tbl: ") and "not found" not in message
    with pytest.raises(DalError) as e:
        dal.hive.sync(["hv.t"], uri=uri)
    assert one_line_error(e).startswith(f"the Hive Metastore at {uri} dropped the connection: ")
    assert [d.name for d in cat.list_datasets()] == ["hv.t"]


@pytest.mark.parametrize(
    "uri",
    ["thrift://127.0.0.1:99999", "thrift://127.0.0.1:port", "thrift://[::1", "http://127.0.0.1:9083", "thrift://"],
)
def test_malformed_uris_are_refused_before_anything_is_read(cat: Catalog, uri: str) -> None:
    # the dataset does not exist: the URI is checked first
    with pytest.raises(DalError) as e:
        dal.hive.sync(["hv.missing"], uri=uri)
    assert one_line_error(e).startswith("Hive Metastore URI must look like thrift://host:9083")
    with pytest.raises(DalError) as e:
        dal.hive.import_table("db.tbl", uri=uri)
    assert one_line_error(e).startswith("Hive Metastore URI must look like thrift://host:9083")


def test_table_name_is_checked(cat: Catalog, closed_port: int) -> None:
    for bad in ("tbl", ".tbl", "db."):
        with pytest.raises(DalError, match="name the table as DB.TABLE"):
            dal.hive.import_table(bad, uri=f"thrift://127.0.0.1:{closed_port}")
