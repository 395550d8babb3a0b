"""The esjet API over NATS (the micro service esjet.<ns>.…)."""

from __future__ import annotations

import json
import re
from typing import Any, AsyncIterator, Dict, List, Optional

from nats.aio.client import Client as NATS

from .errors import EsjetError

SPEC_VERSION = "1.2.0"

HEADER_IDEMPOTENCY_KEY = "Idempotency-Key"
HEADER_CORRELATION_ID = "Esjet-Correlation-Id"
HEADER_CAUSATION_ID = "Esjet-Causation-Id"
HEADER_TRACEPARENT = "traceparent"
HEADER_SERVICE_ERROR_CODE = "Nats-Service-Error-Code"

_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,128}$")

Json = Any


def _token(field: str, v: str) -> str:
    if not isinstance(v, str) or not _TOKEN.match(v):
        raise EsjetError("invalid_token", 400, f"{field} {v!r} must be 1 to 128 letters, digits, '_' or '-'")
    return v


def _page(after: Optional[int], limit: Optional[int]) -> Optional[Dict[str, int]]:
    b: Dict[str, int] = {}
    if after is not None:
        b["after"] = after
    if limit is not None:
        b["limit"] = limit
    return b or None


class Client:
    """One request per operation; errors raise :class:`EsjetError` with the
    spec's code and status. Replies are the spec's JSON shapes as dicts."""

    def __init__(self, nc: NATS, namespace: str = "demo", timeout: float = 10.0):
        self.nc = nc
        self.namespace = _token("namespace", namespace)
        self.timeout = timeout

    async def send(
        self,
        type: str,
        id: str,
        command: str,
        payload: Json = None,
        *,
        idempotency_key: Optional[str] = None,
        expected_version: Optional[int] = None,
        correlation_id: Optional[str] = None,
        causation_id: Optional[str] = None,
        traceparent: Optional[str] = None,
    ) -> Dict[str, Json]:
        """Sends a command; with expected_version, as a one-command multi request."""
        meta = dict(idempotency_key=idempotency_key, correlation_id=correlation_id, causation_id=causation_id, traceparent=traceparent)
        if payload is None:
            payload = {}
        if expected_version is not None:
            cmd = {"type": type, "id": id, "command": command, "payload": payload, "expected_version": expected_version}
            if idempotency_key:
                cmd["idempotency_key"] = idempotency_key
            res = await self.multi({"commands": [cmd]}, **meta)
            return res["results"][0]
        return await self._request([_token("type", type), _token("id", id), _token("command", command)], payload, **meta)

    async def state(self, type: str, id: str) -> Dict[str, Json]:
        """The aggregate's current state; not_found if it has no events."""
        return await self._request([_token("type", type), _token("id", id), "state"])

    async def history(self, type: str, id: str, after: Optional[int] = None, limit: Optional[int] = None) -> Dict[str, Json]:
        """One page of a registered aggregate's history."""
        return await self._request([_token("type", type), _token("id", id), "events"], _page(after, limit))

    async def history_pages(self, type: str, id: str, limit: Optional[int] = None, raw: bool = False) -> AsyncIterator[Dict[str, Json]]:
        """Every page of a history, in order."""
        after = 0
        while True:
            h = await (self.raw_history if raw else self.history)(type, id, after=after, limit=limit)
            yield h
            if "next_after" not in h:
                return
            after = h["next_after"]

    async def raw_append(self, type: str, id: str, body: Dict[str, Json], **meta: Optional[str]) -> Dict[str, Json]:
        """Appends events (and the commands they issue) to a type the node does not decide.

        ``meta``: idempotency_key, correlation_id, causation_id, traceparent, as for :meth:`send`."""
        return await self._request(["raw", "append", _token("type", type), _token("id", id)], body, **meta)

    async def raw_history(self, type: str, id: str, after: Optional[int] = None, limit: Optional[int] = None) -> Dict[str, Json]:
        """One page of any aggregate's history, registered or raw."""
        return await self._request(["raw", "events", _token("type", type), _token("id", id)], _page(after, limit))

    async def multi(self, body: Dict[str, Json], **meta: Optional[str]) -> Dict[str, Json]:
        """One command per aggregate, all appended or none."""
        return await self._request(["multi"], body, **meta)

    async def log(self, after: Optional[int] = None, limit: Optional[int] = None) -> Dict[str, Json]:
        """One page of the whole log in global order after global position ``after``."""
        return await self._request(["log"], _page(after, limit))

    async def view_get(self, view: str, key: str, after: Optional[int] = None, wait: Optional[str] = None) -> Dict[str, Json]:
        """A view's document; with ``after`` (a result's position), once the view holds it."""
        body: Dict[str, Json] = {"key": key}
        if after is not None:
            body["after"] = after
        if wait is not None:
            body["wait"] = wait
        return await self._request(["views", _token("view", view), "get"], body)

    async def view_list(self, view: str, prefix: Optional[str] = None, limit: Optional[int] = None, cursor: Optional[str] = None) -> Json:
        """A page of a view's documents."""
        body = {k: v for k, v in (("prefix", prefix), ("limit", limit), ("cursor", cursor)) if v is not None}
        return await self._request(["views", _token("view", view), "list"], body)

    async def types(self) -> List[Dict[str, Json]]:
        """The registered aggregate types and the commands a client may send."""
        return await self._request(["types"])

    async def _request(
        self,
        tokens: List[str],
        body: Json = None,
        idempotency_key: Optional[str] = None,
        correlation_id: Optional[str] = None,
        causation_id: Optional[str] = None,
        traceparent: Optional[str] = None,
    ) -> Json:
        subject = f"esjet.{self.namespace}." + ".".join(tokens)
        data = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        hdrs = {
            k: v
            for k, v in (
                (HEADER_IDEMPOTENCY_KEY, idempotency_key),
                (HEADER_CORRELATION_ID, correlation_id),
                (HEADER_CAUSATION_ID, causation_id),
                (HEADER_TRACEPARENT, traceparent),
            )
            if v
        }
        try:
            msg = await self.nc.request(subject, data, timeout=self.timeout, headers=hdrs or None)
        except Exception as err:  # no responders, timeout, closed: may have been recorded
            raise EsjetError("unavailable", 503, f"{subject}: {err!r}") from err
        status = (msg.headers or {}).get(HEADER_SERVICE_ERROR_CODE)
        if status:
            try:
                e = json.loads(msg.data).get("error", {})
            except ValueError:
                e = {}
            raise EsjetError(e.get("code", "internal"), int(status), e.get("message", msg.data.decode(errors="replace")), e.get("version"))
        return json.loads(msg.data)
