"""The administration of a ``dal serve`` catalog through its admin routes (``/api/v1/admin/``): the methods of
``AuthStore`` that ``dal principal``, ``dal token``, ``dal grant / revoke / grants`` and ``dal audit`` use, with
the same values, for a catalog given by its server's URL and a token. The server decides what the token may do:
MANAGE on ``*`` for principals and tokens; MANAGE on a target (or a namespace around it) to grant on it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from dal.catalog.auth import AuditEntry, Grant, Principal, Token
from dal.catalog.remote import RemoteCatalog


def _when(text: object) -> datetime:
    return datetime.fromisoformat(str(text))


def _token(d: Mapping[str, Any], principal: str | None = None) -> Token:
    expires = d.get("expires_at")
    return Token(str(d["token_id"]), str(d.get("principal", principal)), _when(d["created_at"]),
                 None if expires is None else _when(expires), bool(d.get("revoked", False)))  # fmt: skip


class RemoteAdmin:
    """``AuthStore``'s administration over the admin routes of the server ``catalog`` talks to."""

    def __init__(self, catalog: RemoteCatalog) -> None:
        self._catalog = catalog

    def close(self) -> None:
        """Nothing to close: each request is one connection."""

    def create_principal(self, name: str, kind: str = "user") -> Principal:
        """Create a principal (``POST /admin/principals``).

        Args:
            name: the principal's name.
            kind: ``user`` or ``service``.
        """
        d = self._catalog.admin("POST", "/principals", body={"name": name, "kind": kind})
        return Principal(str(d["name"]), str(d["kind"]), _when(d["created_at"]))

    def principals(self) -> list[Principal]:
        """The principals."""
        found = self._catalog.admin("GET", "/principals")["principals"]
        return [Principal(str(d["name"]), str(d["kind"]), _when(d["created_at"])) for d in found]

    def create_token(self, principal: str, *, expires_in: timedelta | None = None) -> tuple[str, Token]:
        """A new token for ``principal``: its text (shown once) and what the catalog keeps.

        Args:
            principal: whose token.
            expires_in: how long it is valid (None: the server's answer for no expiry).
        """
        body: dict[str, Any] = {"principal": principal}
        if expires_in is not None:
            body["expires_days"] = expires_in.total_seconds() / 86400
        d = self._catalog.admin("POST", "/tokens", body=body)
        return str(d["token"]), _token(d, principal)

    def revoke_token(self, token_id: str) -> None:
        """Revoke a token by its id.

        Args:
            token_id: the public id (the part after ``dal_``).
        """
        import urllib.parse

        self._catalog.admin("DELETE", "/tokens/" + urllib.parse.quote(token_id, safe=""))

    def tokens(self, principal: str | None = None) -> list[Token]:
        """Tokens (never secrets), of ``principal`` or all.

        Args:
            principal: only this principal's (None: all).
        """
        return [_token(d) for d in self._catalog.admin("GET", "/tokens", {"principal": principal})["tokens"]]

    def grant(self, principal: str, privilege: str, target: str) -> Grant:
        """Give ``principal`` ``privilege`` on ``target``.

        Args:
            principal: who.
            privilege: READ, WRITE or MANAGE.
            target: a dataset, a namespace ``prefix.*`` or ``*``.
        """
        body = {"principal": principal, "privilege": privilege, "target": target}
        d = self._catalog.admin("POST", "/grants", body=body)
        return Grant(str(d["principal"]), str(d["privilege"]), str(d["target"]))

    def revoke(self, principal: str, privilege: str, target: str) -> bool:
        """Remove a grant; False when there was none.

        Args:
            principal: who.
            privilege: READ, WRITE or MANAGE.
            target: a dataset, a namespace ``prefix.*`` or ``*``.
        """
        body = {"principal": principal, "privilege": privilege, "target": target}
        return bool(self._catalog.admin("POST", "/grants/revoke", body=body)["changed"])

    def grants(self, principal: str | None = None) -> list[Grant]:
        """The grants the token may see (within what it manages).

        Args:
            principal: only this principal's (None: all).
        """
        found = self._catalog.admin("GET", "/grants", {"principal": principal})["grants"]
        return [Grant(str(d["principal"]), str(d["privilege"]), str(d["target"])) for d in found]

    def audit(
        self,
        *,
        dataset: str | None = None,
        principal: str | None = None,
        since: datetime | None = None,
        limit: int = 1000,
    ) -> list[AuditEntry]:
        """Audit rows the token may see, oldest first (the newest ``limit``).

        Args:
            dataset: only this dataset's.
            principal: only this principal's.
            since: only from this time on.
            limit: the newest this many.
        """
        params = {"dataset": dataset, "principal": principal, "limit": limit,
                  "since": None if since is None else since.isoformat()}  # fmt: skip
        found = self._catalog.admin("GET", "/audit", params)["audit"]
        return [AuditEntry(_when(d["at"]), str(d["principal"]), str(d["action"]), d["dataset"], d["version"],
                           str(d["client"]), str(d["outcome"]), str(d["detail"])) for d in found]  # fmt: skip
