"""A read-only catalog behind ``dal serve``: ``DAL_CATALOG_URL=https://host:port`` (the token in ``$DAL_TOKEN``).

``RemoteCatalog`` has the subset of the catalog's reading interface that ``dal.open`` and ``dal ls / show /
versions`` use (``CatalogReader`` and ``pin``), with the same frozen values and the same errors: the server's
404 is ``DatasetNotFound`` / ``VersionNotFound`` with the server's message, 400 ``InvalidName``, 401/403
``NotAuthorized``; connection failures and 502/503/504 are retried with backoff, then ``CatalogUnavailable``.
Writes through the server are not built yet: ``RemoteNotSupported`` says so. Standard library only (urllib).

The wire format of datasets and versions (``dataset_json`` / ``version_json`` and back) lives here too, so the
server and the client share one definition.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import urllib.parse
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from dal.catalog.errors import (
    CatalogError,
    CatalogUnavailable,
    DatasetNotFound,
    InvalidName,
    NotFound,
    VersionNotFound,
)
from dal.catalog.types import (
    DatasetInfo,
    Field,
    Label,
    Schema,
    VersionInfo,
    labels_from_dict,
    validate_name,
    version_ref,
)

ENV_TOKEN = "DAL_TOKEN"
ENV_TOKEN_FILE = "DAL_TOKEN_FILE"
ENV_CA_FILE = "DAL_CA_FILE"
API = "/api/v1"
TRANSIENT = frozenset({502, 503, 504})


class RemoteNotSupported(CatalogError):
    """An operation a ``dal serve`` catalog does not offer yet (writes, register, sync, tag, gc, ...)."""


def _not_authorized() -> type[CatalogError]:
    from dal.catalog.auth import NotAuthorized

    return NotAuthorized


def is_remote(url: object) -> bool:
    """Whether ``url`` names a ``dal serve`` catalog (http or https) rather than a database."""
    return isinstance(url, str) and url.lower().startswith(("http://", "https://"))


def not_supported(url: str, what: str = "writing") -> RemoteNotSupported:
    return RemoteNotSupported(
        f"{what} through a dal serve catalog ({url}) is not supported yet: only reads (dal.open, dal ls, show, "
        "versions) go through the server; run it against the catalog's database URL"
    )


# -- the wire format ------------------------------------------------------------------------------------------


def dataset_json(ds: DatasetInfo) -> dict[str, Any]:
    return ds.to_dict()


def version_json(v: VersionInfo) -> dict[str, Any]:
    return v.to_dict(with_schema=True)


def dataset_from(d: Mapping[str, Any]) -> DatasetInfo:
    return DatasetInfo(
        name=str(d["name"]),
        format=str(d["format"]),
        location=str(d["location"]),
        description=str(d["description"]),
        owner=str(d["owner"]),
        time_column=d.get("time_column"),
        created_at=datetime.fromisoformat(d["created_at"]),
        updated_at=datetime.fromisoformat(d["updated_at"]),
        latest_version=None if d.get("latest_version") is None else int(d["latest_version"]),
        properties=dict(d.get("properties") or {}),
    )


def version_from(d: Mapping[str, Any]) -> VersionInfo:
    return VersionInfo(
        dataset=str(d["dataset"]),
        number=int(d["version"]),
        created_at=datetime.fromisoformat(d["created_at"]),
        operation=str(d["operation"]),
        row_count=int(d["row_count"]),
        file_count=int(d["file_count"]),
        size_bytes=int(d["size_bytes"]),
        storage_version=None if d.get("storage_version") is None else int(d["storage_version"]),
        schema=Schema(tuple(Field.from_dict(f) for f in d.get("schema") or ())),
        partition_columns=tuple(d.get("partition_columns") or ()),
        tags=tuple(d.get("tags") or ()),
        properties=dict(d.get("properties") or {}),
    )


def ref_params(ref: object) -> dict[str, str]:
    """A version reference as query parameters: ``version`` (and ``time=1`` for a datetime or date object, which
    is always a time, never a tag)."""
    if isinstance(ref, date):  # datetime too
        return {"version": ref.isoformat(), "time": "1"}
    ref = version_ref(ref)
    return {} if ref is None else {"version": str(ref)}


def _error(status: int, body: bytes, where: str) -> CatalogError:
    """The DalError for an error answer of the server (its message as is)."""
    try:
        found = json.loads(body)
        message, kind = str(found["error"]), str(found.get("type", ""))
    except (ValueError, KeyError, TypeError):
        message, kind = f"{where}: HTTP {status}", ""
    if status in (401, 403):
        return _not_authorized()(message)
    if status == 404:
        cls: type[NotFound] = VersionNotFound if kind == "VersionNotFound" else DatasetNotFound
        if kind == "NotFound":
            cls = NotFound
        err = cls.__new__(cls)
        Exception.__init__(err, message)
        err.suggestions = ()
        return err
    if status == 400 and kind == "InvalidName":
        return InvalidName(message)
    if status >= 500:
        return CatalogUnavailable(f"the catalog server {where} failed: {message}")
    return CatalogError(message)


def _client_info() -> str:
    """Who is asking, for the server's audit: program, host, process, and rank when a launcher set one."""
    import socket

    parts = [
        os.path.basename(sys.argv[0] or "python") or "python",
        f"host={socket.gethostname()}",
        f"pid={os.getpid()}",
    ]
    for var in ("RANK", "LOCAL_RANK"):
        if os.environ.get(var):
            parts.append(f"{var.lower()}={os.environ[var][:10]}")
    return " ".join(parts)[:300]


def _read_token(path: str, where: str) -> str | None:
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as f:
            return f.readline().strip() or None
    except OSError as e:
        raise CatalogError(f"cannot read the token file {where} ({path}): {e.strerror or e}") from e


def _profile_token_file(url: str) -> str | None:
    """The ``token_file`` of the config file's profile whose URL is ``url`` (``dal.catalog.home``), if any."""
    from dal.catalog import home

    if not (os.environ.get(home.ENV_CONFIG) or home.config_path().is_file()):
        return None
    config = home.load_config()
    for name, entry in (config.get("catalogs") or {}).items():
        if not isinstance(entry, dict) or not isinstance(entry.get("token_file"), str):
            continue
        try:
            if home.profile_url(str(name), config).rstrip("/") == url.rstrip("/"):
                return str(entry["token_file"])
        except home.ProfileError:
            continue
    return None


def token_from_env(url: str | None = None) -> str | None:
    """``$DAL_TOKEN``, else the first line of the file ``$DAL_TOKEN_FILE``, else (for ``url``) the first line of the
    ``token_file`` of the config file's profile with that URL."""
    token = os.environ.get(ENV_TOKEN)
    if token:
        return token.strip()
    path = os.environ.get(ENV_TOKEN_FILE)
    if path:
        return _read_token(path, f"${ENV_TOKEN_FILE}")
    path = _profile_token_file(url) if url else None
    return _read_token(path, "of the profile") if path else None


class RemoteCatalog:
    """The read-only catalog a ``dal serve`` at ``url`` serves to the holder of ``token``."""

    def __init__(
        self, url: str, token: str | None = None, *, attempts: int = 4, timeout: float = 30.0, backoff: float = 0.2
    ) -> None:
        import ssl  # here, not at the top: a database URL's `dal ls` does not load ssl and urllib.request

        self.url = url.rstrip("/")
        self._token = token if token is not None else token_from_env(url)
        self._attempts = max(1, attempts)
        self._timeout = timeout
        self._backoff = backoff
        self._ssl = ssl.create_default_context(cafile=os.environ.get(ENV_CA_FILE) or None)
        self._client = _client_info()
        self._vended: dict[tuple[str, int], dict[str, Any]] = {}

    def __repr__(self) -> str:
        return f"RemoteCatalog({self.url!r})"  # never the token

    def close(self) -> None:
        """Nothing to close: each request is one connection."""

    def display(self) -> str:
        return self.url

    def _get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        import ssl
        import urllib.error
        import urllib.request

        query = {k: str(v) for k, v in (params or {}).items() if v is not None}
        url = self.url + API + path + ("?" + urllib.parse.urlencode(query) if query else "")
        headers = {"Accept": "application/json", "X-Dal-Client": self._client}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        last = ""
        for attempt in range(self._attempts):
            if attempt:
                time.sleep(self._backoff * 2 ** (attempt - 1))
            request = urllib.request.Request(url, headers=headers, method="GET")
            try:
                with urllib.request.urlopen(request, timeout=self._timeout, context=self._ssl) as answer:
                    return json.loads(answer.read())
            except urllib.error.HTTPError as e:
                body = e.read()
                if e.code in TRANSIENT:
                    last = f"HTTP {e.code}"
                    continue
                raise _error(e.code, body, self.url) from None
            except (urllib.error.URLError, OSError, ValueError) as e:
                reason = getattr(e, "reason", e)
                if isinstance(reason, ssl.SSLCertVerificationError):
                    raise CatalogUnavailable(f"the catalog server {self.url}: {reason} (${ENV_CA_FILE})") from None
                last = str(reason)
        raise CatalogUnavailable(f"the catalog server {self.url} cannot be reached ({self._attempts} tries): {last}")

    @staticmethod
    def _name(name: str) -> str:
        return urllib.parse.quote(validate_name(name), safe="")

    def list_datasets(self, pattern: str | None = None, *, limit: int | None = None) -> list[DatasetInfo]:
        found = self._get("/datasets", {"pattern": pattern, "limit": limit})
        return [dataset_from(d) for d in found["datasets"]]

    def latest_sizes(self, pattern: str | None = None, *, limit: int | None = None) -> dict[str, tuple[int, int]]:
        found = self._get("/datasets", {"pattern": pattern, "limit": limit})
        return {str(k): (int(v[0]), int(v[1])) for k, v in found["sizes"].items()}

    def get_dataset(self, name: str) -> DatasetInfo:
        return dataset_from(self._get(f"/datasets/{self._name(name)}"))

    def pin(self, name: str, ref: Any = None) -> tuple[DatasetInfo, VersionInfo]:
        """The dataset and its version ``ref`` (any reference ``Catalog.version`` resolves; audited). Storage
        credentials the server vended with it are kept for ``vended``."""
        found = self._get(f"/datasets/{self._name(name)}/pin", ref_params(ref))
        info, version = dataset_from(found["dataset"]), version_from(found["version"])
        credentials = found.get("credentials")
        if isinstance(credentials, dict) and isinstance(credentials.get("options"), dict):
            self._vended[(info.name, version.number)] = credentials
        else:
            self._vended.pop((info.name, version.number), None)
        return info, version

    def vended(self, name: str, number: int) -> Mapping[str, Any] | None:
        """The storage credentials the server vended with this process's last pin of ``name`` version ``number``
        (``{"options", "expires", "scope", "access"}``), or None."""
        return self._vended.get((name, number))

    def version(self, name: str, ref: Any = None) -> VersionInfo:
        return self.pin(name, ref)[1]

    def versions(self, name: str, *, limit: int | None = None) -> list[VersionInfo]:
        found = self._get(f"/datasets/{self._name(name)}/versions", {"limit": limit})
        return [version_from(v) for v in found["versions"]]

    def tags(self, name: str) -> dict[str, int]:
        return {str(k): int(v) for k, v in self._get(f"/datasets/{self._name(name)}/tags")["tags"].items()}

    def labels(self, name: str) -> tuple[Label, ...]:
        """The labels of ``name`` and of its columns, from the dataset's answer (a server before labels: none)."""
        return labels_from_dict(self._get(f"/datasets/{self._name(name)}").get("labels") or {})


# credential keys of the stores' clients (any case): a vended credential replaces the caller's own for that store
_CREDENTIAL_KEYS = frozenset({
    "aws_access_key_id", "aws_secret_access_key", "aws_session_token", "aws_token", "aws_profile", "key", "secret",
    "token", "access_key_id", "secret_access_key", "session_token", "azure_storage_account_key",
    "azure_storage_access_key", "account_key", "access_key", "azure_storage_sas_key", "azure_storage_sas_token",
    "sas_key", "sas_token", "azure_storage_token", "bearer_token",
})  # fmt: skip


def with_vended(options: Mapping[str, str] | None, vended: Mapping[str, str]) -> dict[str, str]:
    """The caller's storage options with the vended ones in place of its credentials (and of any key the vended
    ones set, such as the endpoint: the server knows where its stores are)."""
    replaced = {k.lower() for k in vended}
    kept = {k: v for k, v in (options or {}).items() if k.lower() not in _CREDENTIAL_KEYS | replaced}
    return kept | {str(k): str(v) for k, v in vended.items()}


_clients: dict[tuple[str, int, str], RemoteCatalog] = {}
_lock = threading.Lock()


def client(url: str) -> RemoteCatalog:
    """This process's client of ``url`` (the token read from the environment when first made)."""
    token = token_from_env(url)
    key = (url, os.getpid(), token or "")
    with _lock:
        if key not in _clients:
            _clients[key] = RemoteCatalog(url, token)
        return _clients[key]
