"""Storage credentials ``dal serve`` vends per dataset (``dal serve --storage-credentials FILE``).

The server holds the storage credentials; a client that pins a version it may READ receives short-lived ones
that read that dataset's location and nothing else, and a client with WRITE on a dataset that begins a write
(``begin_write``: ``POST /api/v1/datasets/NAME/writes``) receives short-lived ones that read, write and delete
there, where the file configures writes (``write_role_arn`` / ``"write": true``; otherwise nothing is vended for
writes and the writer uses its own credentials):

- **S3**: STS ``AssumeRole`` of the configured role, with a session policy that allows ``s3:GetObject`` under
  the dataset's prefix and ``s3:ListBucket`` of that prefix only, for ``duration_s`` (900 s at least, STS's
  minimum). The effective permissions are the intersection of the role's policies and the session policy.
  A write assumes ``write_role_arn`` instead, with ``s3:GetObject``, ``s3:PutObject``, ``s3:DeleteObject`` and
  ``s3:AbortMultipartUpload`` under the prefix added to the session policy, for ``write_duration_s``.
- **Azure**: a service SAS signed with the account key, read and list only (``sp=rl``), for the dataset's
  container (``sr=c``), with an expiry. A SAS cannot name a prefix inside a container without a hierarchical
  namespace (directory SAS), so on Azure the scope is the container: keep datasets with different readers in
  different containers. A write gets ``sp=racwdl`` (read, add, create, write, delete, list) for
  ``write_duration_s``: the whole container, so it is vended only to a principal that may write every dataset the
  catalog records in that container.
- **GCS** and other stores: nothing is vended (the reader uses its own credentials).
- **Local paths** cannot be vended; a shared catalog can refuse them (``--forbid-local-datasets``).

The file is JSON (never logged; its secrets never reach a response)::

    {"s3": {"BUCKET or *": {"role_arn": "arn:aws:iam::123456789012:role/dal-reader",
                             "write_role_arn": "arn:aws:iam::123456789012:role/dal-writer",
                             "access_key_id": "...", "secret_access_key": "...",
                             "region": "us-east-1", "endpoint": "https://...", "duration_s": 3600,
                             "write_duration_s": 3600}},
     "azure": {"CONTAINER or *": {"account": "...", "account_key": "...", "endpoint": "https://...",
                                  "duration_s": 3600, "write": true, "write_duration_s": 900}}}
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from dal.catalog.errors import CatalogError
from dal.errors import DalError, require

ENV_FILE = "DAL_SERVE_STORAGE_CREDENTIALS"
SAS_VERSION = "2022-11-02"
STS_MIN_S, STS_MAX_S = 900, 43_200
DEFAULT_DURATION_S = 3600
_S3_KEYS = {"role_arn", "access_key_id", "secret_access_key", "session_token", "region", "endpoint", "duration_s",
            "external_id", "write_role_arn", "write_duration_s"}  # fmt: skip
_AZURE_KEYS = {"account", "account_key", "endpoint", "duration_s", "write", "write_duration_s"}
_DURATIONS = ("duration_s", "write_duration_s")
READ_SAS, WRITE_SAS = "rl", "racwdl"
_WILDCARDS = re.compile(r"[*?$]")  # IAM policy variables and wildcards: a key with them cannot be scoped exactly


class StorageCredentialsError(DalError):
    """The storage credentials file is unusable (its message never holds a secret)."""


class CannotVend(CatalogError):
    """A pinned dataset the server may not or cannot vend credentials for (a local path on a server that forbids
    them, a location a session policy cannot scope exactly)."""


@dataclass(frozen=True)
class S3Source:
    """The server's own S3 credentials for a bucket and the role it assumes for readers."""

    role_arn: str
    access_key_id: str = field(repr=False)
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)
    region: str = "us-east-1"
    endpoint: str | None = None
    duration_s: int = DEFAULT_DURATION_S
    external_id: str | None = field(default=None, repr=False)
    write_role_arn: str | None = None  # the role a write assumes (None: nothing is vended for writes)
    write_duration_s: int | None = None  # None: duration_s


@dataclass(frozen=True)
class AzureSource:
    """The server's account key for an Azure container (or every container of the account)."""

    account: str
    account_key: str = field(repr=False)
    endpoint: str | None = None
    duration_s: int = DEFAULT_DURATION_S
    write: bool = False  # vend write SASes (racwdl) to writers
    write_duration_s: int | None = None  # None: duration_s


@dataclass(frozen=True)
class Vending:
    """What the server vends from: S3 sources per bucket, Azure sources per container (``*``: any), and whether
    pins of local-path datasets are refused."""

    s3: Mapping[str, S3Source] = field(default_factory=dict)
    azure: Mapping[str, AzureSource] = field(default_factory=dict)
    forbid_local: bool = False

    def __repr__(self) -> str:
        return f"Vending(s3={sorted(self.s3)}, azure={sorted(self.azure)}, forbid_local={self.forbid_local})"


def _entry(kind: str, name: str, raw: Any, allowed: set[str], required: tuple[str, ...]) -> dict[str, Any]:
    where = f"storage credentials: {kind} {name!r}"
    if not isinstance(raw, dict):
        raise StorageCredentialsError(f"{where}: must be an object")
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise StorageCredentialsError(f"{where}: unknown keys {unknown} (known: {sorted(allowed)})")
    missing = [k for k in required if not isinstance(raw.get(k), str) or not raw[k]]
    if missing:
        raise StorageCredentialsError(f"{where}: needs {missing} (non-empty strings)")
    for key, value in raw.items():
        if key == "write" and not isinstance(value, bool):
            raise StorageCredentialsError(f"{where}: write must be true or false")
        if key not in (*_DURATIONS, "write") and not isinstance(value, str):
            raise StorageCredentialsError(f"{where}: {key} must be a string")
    for key in _DURATIONS:
        duration = raw.get(key, DEFAULT_DURATION_S)
        if isinstance(duration, bool) or not isinstance(duration, int) or duration < 1:
            raise StorageCredentialsError(f"{where}: {key} must be a whole number of seconds")
        if kind == "s3" and not STS_MIN_S <= duration <= STS_MAX_S:
            raise StorageCredentialsError(f"{where}: {key} must be {STS_MIN_S}..{STS_MAX_S} (STS AssumeRole)")
    return dict(raw)


def parse(data: Any, *, forbid_local: bool = False) -> Vending:
    """The vending configuration of a parsed storage credentials file.

    Args:
        data: The file's JSON object.
        forbid_local: Refuse pins of datasets on local paths.

    Raises:
        StorageCredentialsError: a malformed file (which entry, which key; never a value).
    """
    if not isinstance(data, dict):
        raise StorageCredentialsError("storage credentials: the file must hold a JSON object")
    unknown = sorted(set(data) - {"s3", "azure"})
    if unknown:
        raise StorageCredentialsError(f"storage credentials: unknown sections {unknown} (known: s3, azure)")
    s3, azure = data.get("s3") or {}, data.get("azure") or {}
    if not isinstance(s3, dict) or not isinstance(azure, dict):
        raise StorageCredentialsError("storage credentials: s3 and azure must be objects keyed by bucket/container")
    need = ("role_arn", "access_key_id", "secret_access_key")
    return Vending(
        s3={str(k): S3Source(**_entry("s3", str(k), v, _S3_KEYS, need)) for k, v in s3.items()},
        azure={
            str(k): AzureSource(**_entry("azure", str(k), v, _AZURE_KEYS, ("account", "account_key")))
            for k, v in azure.items()
        },
        forbid_local=forbid_local,
    )


def load(path: str | None, *, forbid_local: bool = False) -> Vending:
    """The vending configuration in the JSON file ``path`` (None: ``$DAL_SERVE_STORAGE_CREDENTIALS``, else none).

    Args:
        path: The storage credentials file.
        forbid_local: Refuse pins of datasets on local paths.

    Raises:
        StorageCredentialsError: the file cannot be read or is malformed.
    """
    path = path or os.environ.get(ENV_FILE) or None
    if path is None:
        return Vending(forbid_local=forbid_local)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise StorageCredentialsError(f"cannot read the storage credentials file {path}: {e.strerror or e}") from None
    except ValueError as e:  # the message of json's error quotes no value, only where
        raise StorageCredentialsError(
            f"the storage credentials file {path} is not JSON: line {getattr(e, 'lineno', '?')}"
        ) from None
    return parse(data, forbid_local=forbid_local)


def _is_local(location: str) -> bool:
    scheme = urllib.parse.urlsplit(location).scheme.lower()
    return scheme in ("", "file") or len(scheme) == 1  # a Windows drive letter


def s3_session_policy(bucket: str, prefix: str, *, write: bool = False) -> dict[str, Any]:
    """The session policy of a read under ``s3://bucket/prefix/``: GetObject of its keys, ListBucket of it; of a
    write (``write``): PutObject, DeleteObject and AbortMultipartUpload of its keys too."""
    if _WILDCARDS.search(bucket + prefix):
        raise CannotVend(f"s3://{bucket}/{prefix}: a location with * ? or $ cannot be scoped by a session policy")
    keys = f"{prefix}/*" if prefix else "*"
    listing = [f"{prefix}/", f"{prefix}/*"] if prefix else ["*"]
    actions = ["s3:GetObject", *(("s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload") if write else ())]
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": actions, "Resource": [f"arn:aws:s3:::{bucket}/{keys}"]},
            {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [f"arn:aws:s3:::{bucket}"],
             "Condition": {"StringLike": {"s3:prefix": listing}}},
        ],
    }  # fmt: skip


def _vend_s3(source: S3Source, bucket: str, prefix: str, label: str, *, write: bool = False) -> dict[str, Any]:
    boto3 = require("boto3", "vend")
    policy = json.dumps(s3_session_policy(bucket, prefix, write=write), separators=(",", ":"))
    role = source.write_role_arn if write else source.role_arn
    duration = (source.write_duration_s or source.duration_s) if write else source.duration_s
    sts = boto3.client(
        "sts",
        aws_access_key_id=source.access_key_id,
        aws_secret_access_key=source.secret_access_key,
        aws_session_token=source.session_token,
        region_name=source.region,
        endpoint_url=source.endpoint,
    )
    args: dict[str, Any] = {"RoleArn": role, "RoleSessionName": _session_name(label),
                            "Policy": policy, "DurationSeconds": duration}  # fmt: skip
    if source.external_id:
        args["ExternalId"] = source.external_id
    try:
        found = sts.assume_role(**args)["Credentials"]
    except Exception as e:  # botocore's ClientError / EndpointConnectionError: no secret in their text
        code = getattr(e, "response", {}).get("Error", {}).get("Code", type(e).__name__)
        raise CannotVend(f"the server could not obtain credentials for s3://{bucket}/{prefix} (STS: {code})") from None
    expires = found["Expiration"]
    options = {
        "AWS_ACCESS_KEY_ID": found["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": found["SecretAccessKey"],
        "AWS_SESSION_TOKEN": found["SessionToken"],
        "AWS_REGION": source.region,
    }
    if source.endpoint:
        options["AWS_ENDPOINT_URL"] = source.endpoint
    access = "write" if write else "read"
    return {"options": options, "expires": _iso(expires), "scope": f"s3://{bucket}/{prefix}", "access": access}


def _session_name(label: str) -> str:
    """An STS session name (2..64 of ``[\\w+=,.@-]``): the dataset's name, for the store's own logs."""
    return (re.sub(r"[^\w+=,.@-]", "-", f"dal-{label}") or "dal-read")[:64]


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def container_sas(account: str, key: str, container: str, expires: datetime, permissions: str = "rl") -> str:
    """A service SAS for ``container`` (``sr=c``) with ``permissions`` until ``expires``, signed with ``key``."""
    expiry = _iso(expires)
    to_sign = "\n".join([permissions, "", expiry, f"/blob/{account}/{container}", "", "", "https,http", SAS_VERSION,
                         "c", "", "", "", "", "", "", ""])  # fmt: skip
    signature = base64.b64encode(hmac.new(base64.b64decode(key), to_sign.encode(), hashlib.sha256).digest())
    query = {"sv": SAS_VERSION, "se": expiry, "sr": "c", "sp": permissions, "spr": "https,http",
             "sig": signature.decode()}  # fmt: skip
    return urllib.parse.urlencode(query)


def _azure_target(location: str) -> tuple[str, str | None]:
    """(container, account or None) of ``az://container/path`` / ``abfs[s]://container@account.dfs…/path``."""
    parts = urllib.parse.urlsplit(location)
    if parts.username:
        return parts.username, (parts.hostname or "").split(".", 1)[0] or None
    return parts.netloc, None


def _vend_azure(source: AzureSource, container: str, *, write: bool = False) -> dict[str, Any]:
    duration = (source.write_duration_s or source.duration_s) if write else source.duration_s
    expires = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=duration)
    try:
        sas = container_sas(source.account, source.account_key, container, expires, WRITE_SAS if write else READ_SAS)
    except (ValueError, TypeError):
        raise CannotVend(f"the server's Azure key for {container} is not base64") from None
    options = {"AZURE_STORAGE_ACCOUNT_NAME": source.account, "AZURE_STORAGE_SAS_KEY": sas}
    if source.endpoint:
        options["AZURE_STORAGE_ENDPOINT"] = source.endpoint
    access = "write" if write else "read"
    return {"options": options, "expires": _iso(expires), "scope": f"az://{container}", "access": access}


def vend(config: Vending, name: str, location: str) -> dict[str, Any] | None:
    """Short-lived read credentials for the dataset ``name`` at ``location`` (None: nothing configured for its
    store; the reader uses its own).

    Args:
        config: The server's vending configuration.
        name: The dataset's name (the S3 session's name).
        location: The dataset's location.

    Raises:
        CannotVend: a local path on a server that forbids them; a location a policy cannot scope; STS refused.
    """
    if _is_local(location):
        _check_local(config, name)
        return None
    found = _source(config, location)
    if found is None:
        return None
    where, prefix, source = found
    if isinstance(source, S3Source):
        return _vend_s3(source, where, prefix, name)
    return _vend_azure(source, where)


def _source(config: Vending, location: str) -> tuple[str, str, S3Source | AzureSource] | None:
    """(bucket or container, prefix, the configured source) of what credentials for ``location`` reach (on Azure
    the whole container: prefix ``""``); None where the file configures nothing for its store (or, on Azure,
    configures another account)."""
    scope = _scope(location)
    if scope is None:
        return None
    kind, where, prefix = scope
    if kind == "s3":
        s3 = config.s3.get(where) or config.s3.get("*")
        return None if s3 is None else (where, prefix, s3)
    account = _azure_target(location)[1]
    az = config.azure.get(where) or config.azure.get("*")
    if az is None or (account is not None and account != az.account):
        return None
    return where, "", az


_AZURE_SCHEMES = ("az", "azure", "abfs", "abfss")


def _check_local(config: Vending, name: str) -> None:
    if config.forbid_local:
        raise CannotVend(
            f"dataset {name!r} is stored on a local path, which this server cannot vend storage credentials "
            "for; it refuses local-path datasets (--forbid-local-datasets): register it on object storage"
        )


def _scope(location: str) -> tuple[str, str, str] | None:
    """(store, bucket or container, prefix) of what credentials vended for ``location`` reach: on S3 its prefix, on
    Azure its whole container (prefix ``""``); None for other stores and local paths."""
    parts = urllib.parse.urlsplit(location)
    scheme = parts.scheme.lower()
    if scheme in ("s3", "s3a"):
        return "s3", parts.netloc, parts.path.strip("/")
    if scheme in _AZURE_SCHEMES:
        return "az", _azure_target(location)[0], ""
    return None


def reaches(location: str, other: str) -> bool:
    """Whether write credentials vended for ``location`` reach the objects of a dataset at ``other``: the same
    bucket with one prefix within the other (whole path segments: ``radar`` does not reach ``radar-wind``), or on
    Azure the same container."""
    mine, theirs = _scope(location), _scope(other)
    if mine is None or theirs is None or mine[:2] != theirs[:2]:
        return False
    a, b = mine[2], theirs[2]
    return a == b or not a or not b or a.startswith(b + "/") or b.startswith(a + "/")


def vend_write(config: Vending, name: str, location: str, guarded: Iterable[str] = ()) -> dict[str, Any] | None:
    """Short-lived credentials that read, write and delete under ``location`` for a write of the dataset ``name``
    (None: the file configures no writes for its store; the writer uses its own credentials).

    Args:
        config: The server's vending configuration.
        name: The dataset's name (the S3 session's name).
        location: Where the write writes: the dataset's location (or a new dataset's).
        guarded: The locations of the datasets the writer may not write: credentials that would reach one of
            them are not vended (on Azure, any other dataset of the container).

    Raises:
        CannotVend: a local path on a server that forbids them; a location a policy cannot scope (a bucket's
        root, ``*``); credentials that would reach a guarded dataset; STS refused.
    """
    if _is_local(location):
        _check_local(config, name)
        return None
    found = _source(config, location)
    if found is None:
        return None
    where, prefix, source = found
    if isinstance(source, S3Source):
        if source.write_role_arn is None:
            return None
        if not prefix:
            raise CannotVend(f"s3://{where}: a write at the root of a bucket cannot be scoped to one dataset")
        _check_reach(name, location, guarded)
        return _vend_s3(source, where, prefix, name, write=True)
    if not source.write:
        return None
    _check_reach(name, location, guarded, container=True)
    return _vend_azure(source, where, write=True)


def _check_reach(name: str, location: str, guarded: Iterable[str], *, container: bool = False) -> None:
    if any(reaches(location, other) for other in guarded):
        where = "its container" if container else "its location"
        raise CannotVend(
            f"write credentials for {name!r} would reach another dataset ({where} holds or overlaps one the writer "
            "may not write): nothing is vended; give each dataset its own "
            + ("container on Azure" if container else "location")
        )
