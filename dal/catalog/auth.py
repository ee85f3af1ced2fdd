"""Principals, bearer tokens, grants and the audit of ``dal serve``, kept in the catalog database.

- A **principal** is a user or a service (a job). A **token** is ``dal_<id>_<secret>``: the id is public (the
  lookup key), the secret 32 random bytes of which only the SHA-256 is stored; the server finds the row by id and
  compares the hashes with ``hmac.compare_digest``. Tokens expire and can be revoked; the secret is shown once.
- A **grant** gives a principal READ, WRITE or MANAGE (MANAGE ⊇ WRITE ⊇ READ) on a dataset name, a namespace
  (``weather.*``: every name under ``weather.``) or everything (``*``). No grant: no access (default deny).
- The **audit** keeps every pin, admin change and refusal (principal, action, dataset, version, time, client,
  outcome); ``prune_audit`` drops rows older than the retention.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from dal.catalog.engine import make_engine
from dal.catalog.errors import CatalogError, NotFound
from dal.catalog.models import AuditRow, GrantRow, PrincipalRow, TokenRow, utcnow
from dal.catalog.types import row_limit, validate_name

READ, WRITE, MANAGE = "READ", "WRITE", "MANAGE"
PRIVILEGES = (READ, WRITE, MANAGE)  # each includes the ones before it
KINDS = ("user", "service")
ALLOWED, DENIED = "allowed", "denied"
_PRINCIPAL_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,199}")
_TOKEN_RE = re.compile(r"dal_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
MAX_CLIENT = 300
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # never into the audit: `dal audit` prints it on a terminal


# a token anywhere in a text (pasted as a dataset name, a principal, a client): its secret never reaches the audit
_TOKEN_IN_TEXT = re.compile(r"dal_([0-9a-f]{16})_[A-Za-z0-9_-]+")


def _printable(text: str, limit: int) -> str:
    return _TOKEN_IN_TEXT.sub(r"dal_\1_***", _CONTROL.sub("?", text[:limit]))


class NotAuthorized(CatalogError):
    """No valid token (missing, malformed, unknown, revoked, expired), or a principal without the privilege."""


@dataclass(frozen=True)
class Principal:
    name: str
    kind: str
    created_at: datetime


@dataclass(frozen=True)
class Token:
    """A token as the catalog keeps it (never the secret)."""

    token_id: str
    principal: str
    created_at: datetime
    expires_at: datetime | None
    revoked: bool


@dataclass(frozen=True)
class Grant:
    principal: str
    privilege: str
    target: str


@dataclass(frozen=True)
class AuditEntry:
    at: datetime
    principal: str
    action: str
    dataset: str | None
    version: int | None
    client: str
    outcome: str
    detail: str

    def to_dict(self) -> dict[str, object]:
        return {
            "at": self.at.isoformat(),
            "principal": self.principal,
            "action": self.action,
            "dataset": self.dataset,
            "version": self.version,
            "client": self.client,
            "outcome": self.outcome,
            "detail": self.detail,
        }


def validate_principal(name: object) -> str:
    if not isinstance(name, str) or not _PRINCIPAL_RE.fullmatch(name):
        raise CatalogError(
            f"invalid principal name {str(name)[:60]!r}: letters, digits, '_', '.', '@' and '-' (at most 200)"
        )
    return name


def validate_privilege(privilege: object) -> str:
    text = str(privilege).upper()
    if text not in PRIVILEGES:
        raise CatalogError(f"invalid privilege {str(privilege)[:40]!r}: one of {', '.join(PRIVILEGES)}")
    return text


def validate_target(target: object) -> str:
    """A dataset name, a namespace ``prefix.*`` or ``*``."""
    if target == "*":
        return target
    if isinstance(target, str) and target.endswith(".*"):
        validate_name(target[:-2])
        return target
    return validate_name(target)


def matches(target: str, dataset: str) -> bool:
    """Whether a grant on ``target`` covers ``dataset``."""
    if target == "*":
        return True
    if target.endswith(".*"):
        return dataset.startswith(target[:-1])
    return target == dataset


def within(outer: str, inner: str) -> bool:
    """Whether the grant target ``inner`` lies within ``outer``: every dataset a grant on ``inner`` covers, one on
    ``outer`` covers too (``weather.sub.*`` and ``weather.radar`` within ``weather.*``; never ``weatherX.y``,
    ``weather*`` or ``*``)."""
    if outer == "*":
        return True
    if inner == "*":
        return False
    if outer.endswith(".*"):
        return inner.startswith(outer[:-1])
    return inner == outer


def manages(grants: Iterable[Grant], target: str) -> bool:
    """Whether ``grants`` give MANAGE on ``target`` or on a target around it (so may grant and revoke on it)."""
    return any(g.privilege == MANAGE and within(g.target, target) for g in grants)


def allows(grants: Iterable[Grant], privilege: str, dataset: str) -> bool:
    """Whether ``grants`` give ``privilege`` (or a larger one) on ``dataset``."""
    needed = PRIVILEGES.index(privilege)
    return any(PRIVILEGES.index(g.privilege) >= needed and matches(g.target, dataset) for g in grants)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_token(text: str) -> tuple[str, str] | None:
    """The (public id, secret) of a token's text, or None when it is not shaped like one."""
    found = _TOKEN_RE.fullmatch(text)
    return (found.group(1), found.group(2)) if found else None


class AuthStore:
    """The principals, tokens, grants and audit of the catalog at ``url`` (migrated to the current revision)."""

    def __init__(self, url: str, *, pooled: bool = False) -> None:
        from dal.catalog.store import Catalog

        Catalog(url, must_exist=True).close()  # the revision check (and its `dal db upgrade` hint)
        self._engine = make_engine(url, must_exist=True, pooled=pooled)

    def close(self) -> None:
        self._engine.dispose()

    @contextmanager
    def _session(self) -> Iterator[Session]:
        with Session(self._engine) as s, s.begin():
            yield s

    @staticmethod
    def _principal_row(s: Session, name: str) -> PrincipalRow:
        row = s.scalar(select(PrincipalRow).where(PrincipalRow.name == validate_principal(name)))
        if row is None:
            known = s.scalars(select(PrincipalRow.name)).all()
            raise NotFound(f"principal {name!r}", name, known)
        return row

    # -- principals and tokens -------------------------------------------------------------------

    def create_principal(self, name: str, kind: str = "user") -> Principal:
        validate_principal(name)
        if kind not in KINDS:
            raise CatalogError(f"invalid principal kind {kind!r}: one of {', '.join(KINDS)}")
        try:
            with self._session() as s:
                row = PrincipalRow(name=name, kind=kind, created_at=utcnow())
                s.add(row)
                s.flush()
                return Principal(row.name, row.kind, row.created_at)
        except IntegrityError as e:
            raise CatalogError(f"principal {name!r} exists already") from e

    def principals(self) -> list[Principal]:
        with self._session() as s:
            rows = s.scalars(select(PrincipalRow).order_by(PrincipalRow.name)).all()
            return [Principal(r.name, r.kind, r.created_at) for r in rows]

    def create_token(self, principal: str, *, expires_in: timedelta | None = None) -> tuple[str, Token]:
        """A new token for ``principal``: its text (shown once, never stored) and what the catalog keeps."""
        token_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
        now = utcnow()
        with self._session() as s:
            row = self._principal_row(s, principal)
            expires = None if expires_in is None else now + expires_in
            s.add(
                TokenRow(
                    token_id=token_id,
                    principal_id=row.id,
                    secret_sha256=hash_secret(secret),
                    created_at=now,
                    expires_at=expires,
                    revoked=False,
                )
            )
        return f"dal_{token_id}_{secret}", Token(token_id, principal, now, expires, False)

    def revoke_token(self, token_id: str) -> None:
        with self._session() as s:
            row = s.scalar(select(TokenRow).where(TokenRow.token_id == token_id))
            if row is None:
                raise NotFound(f"token {token_id[:40]!r}")
            row.revoked = True

    def tokens(self, principal: str | None = None) -> list[Token]:
        with self._session() as s:
            q = select(TokenRow, PrincipalRow.name).join(PrincipalRow, PrincipalRow.id == TokenRow.principal_id)
            if principal is not None:
                q = q.where(PrincipalRow.name == principal)
            rows = s.execute(q.order_by(TokenRow.created_at)).all()
            return [Token(t.token_id, n, t.created_at, t.expires_at, t.revoked) for t, n in rows]

    def authenticate(self, text: str) -> str:
        """The principal a bearer token's text names (``identify``'s first half)."""
        return self.identify(text)[0]

    def identify(self, text: str) -> tuple[str, list[Grant]]:
        """The principal a bearer token's text names, and its grants (one database session).

        Raises:
            NotAuthorized: malformed, unknown, revoked or expired (the message says which: for the audit only).
        """
        parsed = parse_token(text)
        if parsed is None:
            raise NotAuthorized("malformed token")
        token_id, secret = parsed
        with self._session() as s:
            found = s.execute(
                select(TokenRow, PrincipalRow.name)
                .join(PrincipalRow, PrincipalRow.id == TokenRow.principal_id)
                .where(TokenRow.token_id == token_id)
            ).first()
            # compared in constant time; an unknown id is compared against a dummy hash all the same
            stored = found[0].secret_sha256 if found is not None else "0" * 64
            if not hmac.compare_digest(stored, hash_secret(secret)) or found is None:
                raise NotAuthorized("unknown token")
            row, name = found
            if row.revoked:
                raise NotAuthorized("revoked token")
            if row.expires_at is not None and row.expires_at <= utcnow():
                raise NotAuthorized("expired token")
            rows = s.execute(
                select(GrantRow.privilege, GrantRow.target)
                .where(GrantRow.principal_id == row.principal_id)
                .order_by(GrantRow.target, GrantRow.privilege)
            ).all()
            return str(name), [Grant(str(name), str(p), str(t)) for p, t in rows]

    # -- grants ------------------------------------------------------------------------------------

    def grant(self, principal: str, privilege: str, target: str) -> Grant:
        privilege, target = validate_privilege(privilege), validate_target(target)
        with self._session() as s:
            row = self._principal_row(s, principal)
            exists = s.scalar(
                select(GrantRow).where(
                    GrantRow.principal_id == row.id, GrantRow.privilege == privilege, GrantRow.target == target
                )
            )
            if exists is None:
                s.add(GrantRow(principal_id=row.id, privilege=privilege, target=target, created_at=utcnow()))
        return Grant(principal, privilege, target)

    def revoke(self, principal: str, privilege: str, target: str) -> bool:
        """Remove a grant; False when there was none."""
        privilege, target = validate_privilege(privilege), validate_target(target)
        with self._session() as s:
            row = self._principal_row(s, principal)
            done = s.execute(
                delete(GrantRow).where(
                    GrantRow.principal_id == row.id, GrantRow.privilege == privilege, GrantRow.target == target
                )
            )
            return bool(getattr(done, "rowcount", 0))

    def grants(self, principal: str | None = None) -> list[Grant]:
        with self._session() as s:
            q = select(PrincipalRow.name, GrantRow.privilege, GrantRow.target).join(
                PrincipalRow, PrincipalRow.id == GrantRow.principal_id
            )
            if principal is not None:
                q = q.where(PrincipalRow.name == principal)
            rows = s.execute(q.order_by(PrincipalRow.name, GrantRow.target, GrantRow.privilege)).all()
            return [Grant(str(n), str(p), str(t)) for n, p, t in rows]

    # -- audit -------------------------------------------------------------------------------------

    def record(
        self,
        principal: str,
        action: str,
        outcome: str,
        *,
        dataset: str | None = None,
        version: int | None = None,
        client: str = "",
        detail: str = "",
    ) -> None:
        with self._session() as s:
            s.add(
                AuditRow(
                    at=utcnow(),
                    principal=_printable(principal, 200),
                    action=_printable(action, 32),
                    dataset=None if dataset is None else _printable(dataset, 200),
                    version=version,
                    client=_printable(client, MAX_CLIENT),
                    outcome=outcome,
                    detail=_printable(detail, 1000),
                )
            )

    def audit(
        self,
        *,
        dataset: str | None = None,
        principal: str | None = None,
        since: datetime | None = None,
        limit: int = 1000,
        scope: Sequence[str] | None = None,
    ) -> list[AuditEntry]:
        """Audit rows, oldest first (the newest ``limit`` of those that match); ``scope``: only the rows of
        datasets (and grant targets) within one of these targets (None: every row)."""
        if scope is not None and "*" in scope:
            scope = None
        if scope is not None and not scope:
            return []
        with self._session() as s:
            q = select(AuditRow)
            if scope is not None:
                q = q.where(
                    or_(
                        *(
                            AuditRow.dataset.startswith(t[:-1], autoescape=True)
                            if t.endswith(".*")
                            else AuditRow.dataset == t
                            for t in scope
                        )
                    )
                )
            if dataset is not None:
                q = q.where(AuditRow.dataset == dataset)
            if principal is not None:
                q = q.where(AuditRow.principal == principal)
            if since is not None:
                q = q.where(AuditRow.at >= since)
            rows = s.scalars(q.order_by(AuditRow.at.desc(), AuditRow.id.desc()).limit(max(1, row_limit(limit)))).all()
            return [
                AuditEntry(r.at, r.principal, r.action, r.dataset, r.version, r.client, r.outcome, r.detail)
                for r in reversed(rows)
            ]

    def prune_audit(self, older_than: datetime) -> int:
        """Delete audit rows from before ``older_than`` (the retention); returns how many."""
        with self._session() as s:
            done = s.execute(delete(AuditRow).where(AuditRow.at < older_than))
            return int(getattr(done, "rowcount", 0) or 0)
