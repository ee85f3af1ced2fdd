"""A read-only catalog behind ``dal serve``: ``DAL_CATALOG_URL=https://host:port`` (the token in ``$DAL_TOKEN``).

``RemoteCatalog`` has the subset of the catalog's reading interface that ``dal.open`` and ``dal ls / show /
versions`` use (``CatalogReader`` and ``pin``), with the same frozen values and the same errors: the server's
404 is ``DatasetNotFound`` / ``VersionNotFound`` with the server's message, 400 ``InvalidName``, 401/403
``NotAuthorized``; any other answer names its error class (``type``) and becomes that class of
``dal.catalog.errors`` (``DatasetExists``, ``TagExists``, ``VersionConflict``, ``CatalogReadOnly``, ...).
Connection failures and 502/503/504 are retried with backoff, then ``CatalogUnavailable`` (a request that
changes the catalog only when nothing reached the server: a refused connection).

It also has the mutating methods ``dal.write``, ``register``, ``sync``, ``tag``, ``rename``, ``drop``, ``gc``, ``dal
label`` and ``dal unlabel`` call (``create_dataset``, ``publish``, ``tag``, ``record_lineage``, ``expire_versions``,
``label``, ...): the server checks the grant (WRITE or MANAGE), records, audits. ``labelled``, ``count_datasets`` and
``facets`` answer among the datasets the principal may read. ``catalog_id`` is the served catalog's, so a location claimed through
the server and through the database URL is claimed by one catalog. Anything else ``RemoteNotSupported`` names.
Standard library only (urllib).

The wire format of datasets and versions (``dataset_json`` / ``version_json`` and back) lives here too, so the
server and the client share one definition.

Why one module: ``RemoteCatalog`` is one class whose every method is a ``Catalog`` method of the same name over one
request helper, and the wire format beside it is what those methods send and parse; split, each half would only
be read with the other.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any

from dal.catalog.errors import (
    CatalogError,
    CatalogUnavailable,
    DatasetNotFound,
    NotFound,
)
from dal.catalog.remote_http import TOKEN_TEXT, check_url, no_redirects, origin
from dal.catalog.types import (
    INFERRED,
    DatasetInfo,
    Edge,
    Field,
    FieldChange,
    Input,
    Label,
    Partition,
    Schema,
    SchemaDiff,
    VersionDraft,
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
MAX_CACHED = 1024  # answers kept per client for their ETags


class RemoteNotSupported(CatalogError):
    """An operation a ``dal serve`` catalog does not offer (yet)."""


def _not_authorized() -> type[CatalogError]:
    from dal.catalog.auth import NotAuthorized

    return NotAuthorized


def is_remote(url: object) -> bool:
    """Whether ``url`` names a ``dal serve`` catalog (http or https) rather than a database."""
    return isinstance(url, str) and url.lower().startswith(("http://", "https://"))


def not_supported(url: str, what: str = "writing") -> RemoteNotSupported:
    return RemoteNotSupported(
        f"{what} through a dal serve catalog ({url}) is not supported yet; run it against the catalog's database URL"
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


def partition_json(p: Partition) -> dict[str, Any]:
    return {"values": [list(kv) for kv in p.values], "row_count": p.row_count, "file_count": p.file_count,
            "size_bytes": p.size_bytes}  # fmt: skip


def _whole(value: Any) -> int:
    """A count from the wire: an int (or its digits), never a float (``1.5``, ``1e400``) or a bool."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"expected a whole number, not {type(value).__name__}")
    return int(value)


def partition_from(d: Mapping[str, Any]) -> Partition:
    values = tuple((str(k), None if v is None else str(v)) for k, v in d["values"])
    return Partition(values, _whole(d["row_count"]), _whole(d.get("file_count", 0)), _whole(d.get("size_bytes", 0)))


def draft_json(draft: VersionDraft) -> dict[str, Any]:
    return {
        "operation": draft.operation,
        "schema": draft.schema.to_list(),
        "row_count": draft.row_count,
        "file_count": draft.file_count,
        "size_bytes": draft.size_bytes,
        "storage_version": draft.storage_version,
        "committed_at": None if draft.committed_at is None else draft.committed_at.isoformat(),
        "partition_columns": list(draft.partition_columns),
        "partitions": [partition_json(p) for p in draft.partitions],
        "properties": dict(draft.properties),
        "tags": list(draft.tags),
    }


def draft_from(d: Mapping[str, Any]) -> VersionDraft:
    """A ``VersionDraft`` from its JSON (``CatalogError`` for a malformed one: the catalog checks the rest)."""
    try:
        committed = d.get("committed_at")
        return VersionDraft(
            operation=str(d["operation"]),
            schema=Schema(tuple(Field.from_dict(f) for f in d.get("schema") or ())),
            row_count=_whole(d["row_count"]),
            file_count=_whole(d.get("file_count", 0)),
            size_bytes=_whole(d.get("size_bytes", 0)),
            storage_version=None if d.get("storage_version") is None else _whole(d["storage_version"]),
            committed_at=None if committed is None else datetime.fromisoformat(str(committed)),
            partition_columns=tuple(str(c) for c in d.get("partition_columns") or ()),
            partitions=tuple(partition_from(p) for p in d.get("partitions") or ()),
            properties=dict(d.get("properties") or {}),
            tags=tuple(str(t) for t in d.get("tags") or ()),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise CatalogError(f"malformed version draft: {type(e).__name__} {str(e)[:100]}") from None


def input_json(i: Input) -> dict[str, Any]:
    return {**i.to_dict(), "at": None if i.at is None else i.at.isoformat()}


def input_from(d: Mapping[str, Any]) -> Input:
    try:
        at = d.get("at")
        version = d["version"]
        return Input(str(d["dataset"]), version if isinstance(version, int) else int(str(version)),
                     None if d.get("filters") is None else str(d["filters"]), str(d.get("how", INFERRED)),
                     None if at is None else datetime.fromisoformat(str(at)))  # fmt: skip
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise CatalogError(f"malformed lineage input: {type(e).__name__} {str(e)[:100]}") from None


def edge_json(e: Edge) -> dict[str, Any]:
    return {"dataset": e.dataset, "version": e.version, "upstream": e.upstream,
            "upstream_version": e.upstream_version, "filters": e.filters, "how": e.how,
            "recorded_as": e.recorded_as, "upstream_id": e.upstream_id}  # fmt: skip


def edge_from(d: Mapping[str, Any]) -> Edge:
    return Edge(str(d["dataset"]), int(d["version"]), str(d["upstream"]), int(d["upstream_version"]),
                d.get("filters"), str(d["how"]), d.get("recorded_as"),
                None if d.get("upstream_id") is None else int(d["upstream_id"]))  # fmt: skip


def diff_from(d: Mapping[str, Any]) -> SchemaDiff:
    fields = Field.from_dict
    return SchemaDiff(int(d["old_version"]), int(d["new_version"]), tuple(fields(f) for f in d["added"]),
                      tuple(fields(f) for f in d["removed"]),
                      tuple(FieldChange(str(c["name"]), fields(c["old"]), fields(c["new"])) for c in d["changed"]))  # fmt: skip


def ref_params(ref: object) -> dict[str, str]:
    """A version reference as query parameters: ``version`` (and ``time=1`` for a datetime or date object, which
    is always a time, never a tag)."""
    if isinstance(ref, date):  # datetime too
        return {"version": ref.isoformat(), "time": "1"}
    ref = version_ref(ref)
    return {} if ref is None else {"version": str(ref)}


def _error_class(kind: str) -> type[CatalogError] | None:
    """The class of ``dal.catalog.errors`` (or ``NotAuthorized``, ``RemoteNotSupported``) a server's answer names."""
    from dal.catalog import errors

    if kind == "NotAuthorized":
        return _not_authorized()
    if kind == "RemoteNotSupported":
        return RemoteNotSupported
    found = getattr(errors, kind, None) if kind.isidentifier() else None
    return found if isinstance(found, type) and issubclass(found, CatalogError) else None


def _error(status: int, body: bytes, where: str) -> CatalogError:
    """The DalError for an error answer of the server (its message as is, the class its ``type`` names)."""
    suggestions: tuple[str, ...] = ()
    try:
        found = json.loads(body)
        message, kind = str(found["error"]), str(found.get("type", ""))
        suggestions = tuple(str(s) for s in found.get("suggestions") or ())
    except (ValueError, KeyError, TypeError, AttributeError):
        message, kind = f"{where}: HTTP {status}", ""
    if status in (401, 403):
        return _not_authorized()(message)
    if status == 404:  # the NotFound the answer names (LabelNotFound, VersionNotFound, ...), else DatasetNotFound
        named_404 = _error_class(kind)
        cls: type[NotFound] = (
            named_404 if named_404 is not None and issubclass(named_404, NotFound) else DatasetNotFound
        )
        err = cls.__new__(cls)
        Exception.__init__(err, message)
        err.suggestions = suggestions
        return err
    if status >= 500 and kind in ("", "DalError", "CatalogUnavailable"):
        return CatalogUnavailable(f"the catalog server {where} failed: {message}")
    named = _error_class(kind)
    if named is None:
        return CatalogError(message)
    # the server's message as is, whatever the class's constructor takes (CommittedNotRecorded's keywords)
    out = named.__new__(named)
    Exception.__init__(out, message)
    if isinstance(out, NotFound):
        out.suggestions = suggestions
    return out


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
    """The ``token_file`` of the profile in use (``--profile``, ``$DAL_PROFILE``, the config's ``default``) when its
    URL is ``url``; else of the one profile whose URL is ``url`` (``dal.catalog.home``). None when that profile has
    no ``token_file``, or several profiles share the URL and none of them is in use: a profile never borrows
    another's token."""
    from dal.catalog import home

    if not (os.environ.get(home.ENV_CONFIG) or home.config_path().is_file()):
        return None
    config = home.load_config()
    catalogs = config.get("catalogs") or {}

    def same(name: object) -> bool:
        try:
            return home.profile_url(str(name), config).rstrip("/") == url.rstrip("/")
        except home.ProfileError:
            return False

    def token_file_of(name: object) -> str | None:
        entry = catalogs.get(name)
        found = entry.get("token_file") if isinstance(entry, dict) else None
        return found if isinstance(found, str) else None

    chosen = home.default_profile(config)
    if chosen in catalogs and same(chosen):
        return token_file_of(chosen)
    matching = [name for name in catalogs if same(name)]
    return token_file_of(matching[0]) if len(matching) == 1 else None


def default_token_file(url: str) -> str:
    """Where ``dal auth login`` keeps the token for ``url`` when neither ``$DAL_TOKEN_FILE`` nor a profile's
    ``token_file`` names a file: ``<DAL_HOME>/tokens/<the URL, quoted>``."""
    from dal.catalog import home

    return str(home.data_dir() / "tokens" / urllib.parse.quote(url.rstrip("/").lower(), safe=""))


def token_file(url: str) -> str:
    """The file ``dal auth login`` writes the token for ``url`` to: ``$DAL_TOKEN_FILE``, else the ``token_file`` of
    the config file's profile with that URL, else ``default_token_file``."""
    return os.environ.get(ENV_TOKEN_FILE) or _profile_token_file(url) or default_token_file(url)


def store_token(url: str, token: str) -> str:
    """Write ``token`` to ``token_file(url)``, readable by its owner only (0600, set before the token is
    written); returns the file's path.

    Raises:
        CatalogError: the file cannot be written.
    """
    path = os.path.expanduser(token_file(url))
    try:
        os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(token + "\n")
    except OSError as e:
        raise CatalogError(f"cannot write the token file {path}: {e.strerror or e}") from e
    return path


def token_from_env(url: str | None = None) -> str | None:
    """``$DAL_TOKEN``, else the first line of the file ``$DAL_TOKEN_FILE``, else (for ``url``) the first line of the
    ``token_file`` of the config file's profile with that URL, else of the file ``dal auth login`` wrote for it."""
    token = os.environ.get(ENV_TOKEN)
    if token:
        return token.strip()
    path = os.environ.get(ENV_TOKEN_FILE)
    if path:
        return _read_token(path, f"${ENV_TOKEN_FILE}")
    path = _profile_token_file(url) if url else None
    if path:
        return _read_token(path, "of the profile")
    if url and os.path.isfile(default_token_file(url)):
        return _read_token(default_token_file(url), "of dal auth login")
    return None


class RemoteCatalog:
    """The catalog a ``dal serve`` at ``url`` serves to the holder of ``token``: what it may read, and the changes
    its grants allow (the server decides)."""

    def __init__(
        self, url: str, token: str | None = None, *, attempts: int = 4, timeout: float = 30.0, backoff: float = 0.2
    ) -> None:
        import ssl  # here, not at the top: a database URL's `dal ls` does not load ssl and urllib.request

        check_url(url, ENV_TOKEN)
        self.url = url.rstrip("/")
        self._token = token if token is not None else token_from_env(url)
        self._attempts = max(1, attempts)
        self._timeout = timeout
        self._backoff = backoff
        self._ssl = ssl.create_default_context(cafile=os.environ.get(ENV_CA_FILE) or None)
        self._opener = no_redirects(self._ssl)
        self._client = _client_info()
        self._vended: dict[tuple[str, int], dict[str, Any]] = {}
        self._catalog_id: str | None = None
        # GET answers that came with an ETag, per URL: sent back as If-None-Match, a 304 answers from here
        self._etags: dict[str, tuple[str, Any]] = {}
        self._etag_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RemoteCatalog({self.url!r})"  # never the token

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise not_supported(self.url, f"Catalog.{name}")

    def close(self) -> None:
        """Nothing to close: each request is one connection."""

    @property
    def display(self) -> str:
        """The server's URL (for messages and claims)."""
        return self.url

    def _call(
        self, method: str, path: str, params: Mapping[str, Any] | None = None, body: Mapping[str, Any] | None = None
    ) -> Any:
        """One request to the API; the answer's JSON. A GET is retried on connection failures and 502/503/504; a
        request that changes the catalog only when the connection was refused (nothing reached the server)."""
        import ssl
        import urllib.error
        import urllib.request

        if self._token and not TOKEN_TEXT.fullmatch(self._token):
            # a local mistake (a second line, a control character): no request, no retries, no secret in the message
            raise _not_authorized()(
                f"the token for {self.url} holds a newline, a space or a control character: it is no dal token "
                f"(check ${ENV_TOKEN}, ${ENV_TOKEN_FILE} or the token file)"
            )
        query = {k: str(v) for k, v in (params or {}).items() if v is not None}
        url = self.url + API + path + ("?" + urllib.parse.urlencode(query) if query else "")
        headers = {"Accept": "application/json", "X-Dal-Client": self._client}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        cached = self._etags.get(url) if method == "GET" else None
        if cached is not None:
            headers["If-None-Match"] = cached[0]
        last = ""
        for attempt in range(self._attempts):
            if attempt:
                time.sleep(random.uniform(0, self._backoff * 2 ** (attempt - 1)))  # full jitter: ranks spread out
            request = urllib.request.Request(url, data=data, headers=headers, method=method)
            try:
                with self._opener.open(request, timeout=self._timeout) as answer:
                    found = json.loads(answer.read())
                    etag = answer.headers.get("ETag")
                    if method == "GET" and etag:
                        with self._etag_lock:
                            if len(self._etags) >= MAX_CACHED and url not in self._etags:
                                self._etags.pop(next(iter(self._etags)))  # the oldest
                            self._etags[url] = (etag, found)
                    return found
            except urllib.error.HTTPError as e:
                payload = e.read()
                if e.code == 304 and cached is not None:
                    return cached[1]
                if 300 <= e.code < 400:  # never followed: the token would go along to wherever it points
                    raise CatalogUnavailable(
                        f"the catalog server {self.url} answered {method} {path} with a redirect ({e.code}) to "
                        f"{origin(e.headers.get('Location', ''), self.url)}: dal does not follow redirects (its "
                        "token would go along); set the catalog URL to the server's own address"
                    ) from None
                if e.code in TRANSIENT and method == "GET":
                    last = f"HTTP {e.code}"
                    continue
                raise _error(e.code, payload, self.url) from None
            except (urllib.error.URLError, OSError, ValueError) as e:
                reason = getattr(e, "reason", e)
                if isinstance(reason, ssl.SSLCertVerificationError):
                    raise CatalogUnavailable(f"the catalog server {self.url}: {reason} (${ENV_CA_FILE})") from None
                last = str(reason)
                if method != "GET" and not isinstance(reason, ConnectionRefusedError):
                    raise CatalogUnavailable(
                        f"the catalog server {self.url} did not answer {method} {path} ({last}): the change may or "
                        "may not be recorded; look before trying again"
                    ) from None
        raise CatalogUnavailable(f"the catalog server {self.url} cannot be reached ({self._attempts} tries): {last}")

    def admin(
        self, method: str, path: str, params: Mapping[str, Any] | None = None, body: Mapping[str, Any] | None = None
    ) -> Any:
        """One request to an admin route (``/admin`` + ``path``): ``dal.catalog.remote_admin``."""
        return self._call(method, "/admin" + path, params, body)

    def _get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return self._call("GET", path, params)

    @staticmethod
    def _name(name: str) -> str:
        return urllib.parse.quote(validate_name(name), safe="")

    # -- reading ------------------------------------------------------------------------------------------

    def whoami(self) -> tuple[str, list[tuple[str, str]]]:
        """The token's principal and its grants (privilege, target)."""
        found = self._get("/whoami")
        return str(found["principal"]), [(str(g["privilege"]), str(g["target"])) for g in found["grants"]]

    @property
    def catalog_id(self) -> str:
        """The served catalog's id (``Catalog.catalog_id``): a location's claim names it."""
        if self._catalog_id is None:
            self._catalog_id = str(self._get("/catalog")["catalog_id"])
        return self._catalog_id

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

    def schema(self, name: str, ref: Any = None) -> Schema:
        return self.version(name, ref).schema

    def versions(self, name: str, *, limit: int | None = None) -> list[VersionInfo]:
        found = self._get(f"/datasets/{self._name(name)}/versions", {"limit": limit})
        return [version_from(v) for v in found["versions"]]

    def tags(self, name: str) -> dict[str, int]:
        return {str(k): int(v) for k, v in self._get(f"/datasets/{self._name(name)}/tags")["tags"].items()}

    def co_located(self, name: str) -> list[str]:
        """``Catalog.co_located`` as the server answers it: the names this principal may read, or one entry saying
        another dataset is there (a write, gc or purge refuses on either)."""
        found = self._get(f"/datasets/{self._name(name)}/co-located")
        shown = [str(n) for n in found.get("datasets") or []]
        return shown or (["a dataset you may not read"] if found.get("shared") else [])

    def overlapping(self, location: str, *, besides: str | None = None) -> list[str]:
        """``Catalog.overlapping`` as the server answers it to a principal with WRITE on ``besides``: the names it
        may read, or one entry saying another dataset is there."""
        found = self._get("/locations/overlapping", {"location": location, "besides": besides or ""})
        shown = [str(n) for n in found.get("datasets") or []]
        return shown or (["a dataset you may not read"] if found.get("taken") else [])

    def labels(self, name: str) -> tuple[Label, ...]:
        """The labels of ``name`` and of its columns, from the dataset's answer (a server before labels: none)."""
        return labels_from_dict(self._get(f"/datasets/{self._name(name)}").get("labels") or {})

    def partitions(self, name: str, ref: Any = None) -> tuple[Partition, ...]:
        found = self._get(f"/datasets/{self._name(name)}/partitions", ref_params(ref))
        return tuple(partition_from(p) for p in found["partitions"])

    def diff(self, name: str, old: Any, new: Any) -> SchemaDiff:
        params = {f"old_{k}": v for k, v in ref_params(old).items()} | {
            f"new_{k}": v for k, v in ref_params(new).items()
        }
        return diff_from(self._get(f"/datasets/{self._name(name)}/diff", params))

    def upstream(self, name: str, number: int) -> list[Edge]:
        """The inputs of a version the principal may read (edges from datasets it may not are left out)."""
        found = self._get(f"/datasets/{self._name(name)}/upstream", {"version": int(number)})
        return [edge_from(e) for e in found["edges"]]

    def downstream(self, name: str, number: int, *, limit: int = 1000) -> list[Edge]:
        """The versions built from a version, among the datasets the principal may read."""
        found = self._get(f"/datasets/{self._name(name)}/downstream", {"version": int(number), "limit": limit})
        return [edge_from(e) for e in found["edges"]]

    def search_datasets(
        self,
        query: str | None = None,
        *,
        limit: int = 50,
        offset: int = 0,
        filters: Mapping[str, str] | None = None,
        sort: str = "name",
    ) -> list[tuple[DatasetInfo, int | None, int | None]]:
        """``Catalog.search_datasets`` among the datasets the principal may read."""
        params: dict[str, Any] = {"q": query, "limit": limit, "offset": offset, "sort": sort}
        params |= {f"f.{k}": v for k, v in (filters or {}).items()}
        found = self._get("/search", params)["results"]
        return [(dataset_from(r["dataset"]), r["rows"], r["size"]) for r in found]

    def _facets(self, query: str | None, filters: Mapping[str, str] | None) -> Any:
        params: dict[str, Any] = {"q": query} | {f"f.{k}": v for k, v in (filters or {}).items()}
        return self._get("/search/facets", params)

    def count_datasets(self, query: str | None = None, filters: Mapping[str, str] | None = None) -> int:
        """``Catalog.count_datasets`` among the datasets the principal may read."""
        return int(self._facets(query, filters)["count"])

    def facets(self, query: str | None = None, filters: Mapping[str, str] | None = None) -> dict[str, dict[str, int]]:
        """``Catalog.facets``, counting only the datasets the principal may read."""
        found = self._facets(query, filters)["facets"]
        return {str(f): {str(k): int(n) for k, n in counts.items()} for f, counts in found.items()}

    def labelled(self, label: str, names: Sequence[str] | None = None) -> set[str]:
        """``Catalog.labelled`` among the datasets the principal may read."""
        found = {str(n) for n in self._get("/labelled", {"label": label})["datasets"]}
        return found if names is None else found & set(names)

    # -- changing (the server checks the grant: WRITE, or MANAGE for rename, drop and expire) ----------------

    def check_writable(self, name: str | None = None, *, manage: bool = False) -> None:
        """Refuse before anything reaches storage: the principal needs WRITE (``manage``: MANAGE) on ``name`` and
        the server's role must be able to record (``Catalog.check_writable``).

        Raises:
            NotAuthorized: no WRITE / MANAGE on ``name``. CatalogReadOnly: the server cannot record versions.
        """
        self._get("/catalog/writable", {"dataset": name, "manage": "1" if manage else None})

    def begin_write(self, name: str, location: str, *, read_only: bool = False) -> Mapping[str, Any] | None:
        """A write of ``name`` begins (a new dataset at ``location``; an existing one where it is): the storage
        credentials the server vends for it (``{"options", "expires", "scope", "access"}``), or None (the writer
        uses its own; also from a server before this route). ``read_only``: a registration that writes nothing
        to storage (read credentials).

        Raises:
            NotAuthorized: no WRITE on ``name``. CatalogError: the server refuses to vend for that location.
        """
        try:
            body = {"location": location, "read_only": read_only}
            found = self._call("POST", f"/datasets/{self._name(name)}/writes", body=body)
        except NotFound as e:
            if str(e) == "no such route":  # a server older than this route: the writer's own credentials
                return None
            raise
        credentials = found.get("credentials")
        ok = isinstance(credentials, dict) and isinstance(credentials.get("options"), dict)
        return credentials if ok else None

    def create_dataset(
        self,
        name: str,
        *,
        format: str,
        location: str,
        description: str = "",
        owner: str | None = None,
        time_column: str | None = None,
        properties: Mapping[str, Any] | None = None,
        exist_ok: bool = False,
        unique_location: bool = False,
    ) -> DatasetInfo:
        """``Catalog.create_dataset`` on the server (the owner, unless given, is the token's principal)."""
        body = {"format": format, "location": location, "description": description, "owner": owner,
                "time_column": time_column, "properties": dict(properties or {}), "exist_ok": exist_ok,
                "unique_location": unique_location}  # fmt: skip
        return dataset_from(self._call("POST", f"/datasets/{self._name(name)}", body=body))

    def update_dataset(
        self,
        name: str,
        *,
        description: str | None = None,
        time_column: str | None = None,
        owner: str | None = None,
        properties: Mapping[str, Any] | None = None,
        clear_time_column: bool = False,
    ) -> DatasetInfo:
        body = {"description": description, "time_column": time_column, "owner": owner,
                "properties": None if properties is None else dict(properties), "clear_time_column": clear_time_column}  # fmt: skip
        return dataset_from(self._call("PATCH", f"/datasets/{self._name(name)}", body=body))

    def rename_dataset(self, name: str, new_name: str) -> DatasetInfo:
        body = {"new_name": validate_name(new_name)}
        return dataset_from(self._call("POST", f"/datasets/{self._name(name)}/rename", body=body))

    def delete_dataset(self, name: str) -> None:
        self._call("DELETE", f"/datasets/{self._name(name)}")

    def publish(self, name: str, draft: VersionDraft) -> VersionInfo:
        return version_from(self._call("POST", f"/datasets/{self._name(name)}/versions", body=draft_json(draft)))

    def publish_many(
        self, name: str, drafts: Sequence[VersionDraft], *, skip_recorded: bool = False
    ) -> list[VersionInfo]:
        """``Catalog.publish_many`` on the server: the drafts in one transaction there, all or none."""
        if not drafts:
            return []
        body = {"drafts": [draft_json(d) for d in drafts], "skip_recorded": skip_recorded}
        found = self._call("POST", f"/datasets/{self._name(name)}/versions", body=body)
        return [version_from(v) for v in found["versions"]]

    def tag(self, name: str, ref: Any, tag: str, *, force: bool = False) -> VersionInfo:
        body = {"tag": tag, "force": force, **ref_params(ref)}
        return version_from(self._call("POST", f"/datasets/{self._name(name)}/tags", body=body))

    def untag(self, name: str, tag: str) -> None:
        self._call("DELETE", f"/datasets/{self._name(name)}/tags/{urllib.parse.quote(str(tag), safe='')}")

    def expire_versions(self, name: str, numbers: Sequence[int], reason: str) -> list[VersionInfo]:
        body = {"numbers": [int(n) for n in numbers], "reason": reason}
        found = self._call("POST", f"/datasets/{self._name(name)}/expire", body=body)
        return [version_from(v) for v in found["versions"]]

    def annotate_versions(self, name: str, numbers: Sequence[int], key: str, value: Any) -> None:
        body = {"numbers": [int(n) for n in numbers], "key": key, "value": value}
        self._call("POST", f"/datasets/{self._name(name)}/annotate", body=body)

    def annotate_version(self, name: str, number: int, key: str, value: Any) -> VersionInfo:
        body = {"number": int(number), "key": key, "value": value}
        return version_from(self._call("POST", f"/datasets/{self._name(name)}/annotate", body=body))

    def label(self, name: str, label: str, *, column: str | None = None) -> tuple[Label, ...]:
        """``Catalog.label`` on the server (WRITE on ``name``): every label of the dataset afterwards."""
        found = self._call("POST", f"/datasets/{self._name(name)}/labels", body={"label": label, "column": column})
        return labels_from_dict(found["labels"])

    def unlabel(self, name: str, label: str, *, column: str | None = None) -> tuple[Label, ...]:
        """``Catalog.unlabel`` on the server (WRITE on ``name``): every label of the dataset afterwards."""
        body = {"label": label, "column": column}
        return labels_from_dict(self._call("POST", f"/datasets/{self._name(name)}/labels/remove", body=body)["labels"])

    def record_lineage(
        self, name: str, number: int, key: str, record: Mapping[str, Any], inputs: Sequence[Input]
    ) -> VersionInfo:
        body = {"number": int(number), "key": key, "record": dict(record), "inputs": [input_json(i) for i in inputs]}
        return version_from(self._call("POST", f"/datasets/{self._name(name)}/lineage", body=body))


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


def served(catalog: object) -> RemoteCatalog | None:
    """The ``dal serve`` client ``catalog`` is or names (a RemoteCatalog, or an http(s) URL); None for a database."""
    if isinstance(catalog, RemoteCatalog):
        return catalog
    return client(str(catalog)) if is_remote(catalog) else None


def client(url: str) -> RemoteCatalog:
    """This process's client of ``url`` (the token read from the environment when first made)."""
    token = token_from_env(url)
    key = (url, os.getpid(), token or "")
    with _lock:
        if key not in _clients:
            _clients[key] = RemoteCatalog(url, token)
        return _clients[key]
