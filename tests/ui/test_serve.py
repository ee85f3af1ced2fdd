"""``dal ui`` start-up: the install hint without the extra, one-line errors for a taken port, loopback detection."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from dal.catalog import Catalog
from dal.errors import DalError, MissingDependency
from dal.ui import is_loopback, serve
from tests.test_layers import uninstall


def test_without_the_extra_names_the_pip_command(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    uninstall(monkeypatch, "starlette")
    with pytest.raises(MissingDependency, match=r"pip install 'dal-catalog\[ui\]'"):
        serve(Catalog(f"sqlite:///{tmp_path}/c.db"), port=0)


def test_a_taken_port_is_one_line(tmp_path: object) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(DalError, match=rf"cannot listen on 127.0.0.1:{port}: .*--port"):
            serve(Catalog(f"sqlite:///{tmp_path}/c.db"), port=port)
        Catalog(f"sqlite:///{tmp_path}/c.db").close()  # dal ui reads a catalog: it creates none
        proc = subprocess.run(
            [sys.executable, "-m", "dal.cli", "--catalog", f"sqlite:///{tmp_path}/c.db", "ui", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 1 and proc.stderr.startswith("dal: error: dal ui cannot listen on")
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_loopback_hosts() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.10", "example.com"))
