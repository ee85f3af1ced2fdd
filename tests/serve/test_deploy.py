"""Starting ``dal serve``: plain HTTP on loopback only, TLS with the admin's certificate (a self-signed one made
here), and PostgreSQL behind it."""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import dal
from dal.catalog import Catalog, CatalogUnavailable
from dal.catalog.remote import RemoteCatalog
from tests.serve.conftest import http, populate, start, stop


def _self_signed(folder: Path) -> tuple[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return str(cert_file), str(key_file)


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dal.cli", *args], capture_output=True, text=True, timeout=60)


def test_plain_http_beyond_loopback_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/c.db"
    Catalog(url).close()
    proc = _serve("--catalog", url, "serve", "--host", "0.0.0.0", "--port", "0")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("dal: error: dal serve: plain HTTP is only served on loopback")
    proc = _serve("--catalog", url, "serve", "--tls-cert", str(tmp_path / "c.db"))
    assert proc.returncode == 1 and "both --tls-cert and --tls-key" in proc.stderr
    proc = _serve("--catalog", url, "serve", "--tls-cert", str(tmp_path / "c.db"), "--tls-key", str(tmp_path / "c.db"))
    assert proc.returncode == 1 and proc.stderr.startswith("dal: error: dal serve: cannot use --tls-cert")
    assert proc.stdout == ""  # nothing said it was serving
    proc = _serve("--catalog", "https://example.invalid", "serve")
    assert proc.returncode == 1 and "needs the catalog's database URL" in proc.stderr
    proc = _serve("--catalog", f"sqlite:///{tmp_path}/missing.db", "serve", "--port", "0")
    assert proc.returncode == 1 and not (tmp_path / "missing.db").exists()


def test_tls_with_a_self_signed_certificate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = f"sqlite:///{tmp_path}/c.db"
    tokens = populate(db, tmp_path)
    cert, key = _self_signed(tmp_path)
    proc, base = start(db, ["--tls-cert", cert, "--tls-key", key], scheme="https")
    try:
        context = ssl.create_default_context(cafile=cert)
        assert http("GET", base + "/api/v1/health", context=context)[0] == 200
        with pytest.raises(CatalogUnavailable, match="CERTIFICATE_VERIFY_FAILED"):
            RemoteCatalog(base, tokens["owner"], attempts=1).list_datasets()  # not trusted without the CA
        monkeypatch.setenv("DAL_CA_FILE", cert)
        monkeypatch.setenv("DAL_TOKEN", str(tokens["one_reader"]))
        ds = dal.open("weather.radar", catalog=base)
        assert ds.to_arrow().equals(dal.open("weather.radar", catalog=db).to_arrow())
        with pytest.raises(CatalogUnavailable):  # plain HTTP to the TLS port gets no answer it can read
            RemoteCatalog(base.replace("https", "http"), tokens["owner"], attempts=1).list_datasets()
    finally:
        stop(proc)


@pytest.mark.postgres
def test_postgresql_behind_the_server(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tokens = populate(pg_url, tmp_path)
    proc, base = start(pg_url)
    try:
        monkeypatch.setenv("DAL_TOKEN", str(tokens["ns_reader"]))
        for ref in (None, 0, "prod"):
            served, direct = (
                dal.open("weather.radar", ref, catalog=base),
                dal.open("weather.radar", ref, catalog=pg_url),
            )
            assert served.version == direct.version and served.to_arrow().equals(direct.to_arrow())
        names = [d.name for d in RemoteCatalog(base).list_datasets()]
        assert names == ["weather.radar", "weather.wind"]
        extra = pa.table({"id": [1]})
        dal.write(extra, "weather.more", path=str(tmp_path / "more"), catalog=pg_url)  # written next to the database
        assert RemoteCatalog(base).pin("weather.more")[1].row_count == 1  # the namespace grant covers it at once
    finally:
        stop(proc)


def test_the_audit_keeps_its_retention(tmp_path: Path) -> None:
    import sqlalchemy as sa

    from dal.catalog.auth import AuthStore
    from dal.catalog.engine import make_engine

    db = f"sqlite:///{tmp_path}/c.db"
    Catalog(db).close()
    store = AuthStore(db)
    store.record("alice", "pin", "allowed", dataset="old.one", version=0)
    store.record("alice", "pin", "allowed", dataset="new.one", version=0)
    engine = make_engine(db)
    with engine.begin() as c:
        c.execute(sa.text("UPDATE dal_audit SET at = '2020-01-01 00:00:00' WHERE dataset = 'old.one'"))
    engine.dispose()
    proc, _ = start(db, ["--audit-retention-days", "30"])  # pruned as it starts
    stop(proc)
    assert [r.dataset for r in store.audit()] == ["new.one"]
    store.close()
