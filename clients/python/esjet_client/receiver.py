"""A receiver: applies a worker's command once per idempotency key, with the
semantics and the bucket records of Go's package receiver (spec/README.md,
"A receiver"), so receivers in Go, TypeScript and Python can share a bucket."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Dict, Optional, Set, Union

import nats.js.errors as jserrors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import KeyValueConfig, StorageType
from nats.nuid import NUID

from .errors import ConflictError, Failure, InProgressError, InvalidKeyError, NotRecordedError, StaleError

HEADER_IDEMPOTENCY_KEY = "Idempotency-Key"
HEADER_ATTEMPT = "Esjet-Attempt"
HEADER_FENCE = "Esjet-Fence"
HEADER_COMMAND_ID = "Esjet-Command-Id"
# The payload's schema version, when above 1 (spec 1.2.0; absent: 1).
HEADER_COMMAND_SCHEMA = "Esjet-Command-Schema"

MAX_KEY_LEN = 512
DEFAULT_RETENTION = 7 * 24 * 3600.0  # seconds
DEFAULT_LEASE = 60.0  # seconds
WRITE_TIMEOUT = 5.0
_MAX_FENCE = 2**64 - 1

_KEEP = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


def encode_key(key: str) -> str:
    """How a key is stored: letters, digits, '-', '_' kept, other bytes =XX."""
    return "".join(chr(b) if b in _KEEP else "=%02X" % b for b in key.encode())


def digest_of(params: Union[bytes, str]) -> str:
    """The hex SHA-256 of a request's parameters."""
    if isinstance(params, str):
        params = params.encode()
    return hashlib.sha256(params).hexdigest()


def parse_fence(v: Optional[str]) -> int:
    """An Esjet-Fence value; empty is 0 (no fence). As Go's ParseFence: ASCII
    decimal digits only, at most 2**64-1."""
    if not v:
        return 0
    if not (v.isascii() and v.isdigit()) or int(v) > _MAX_FENCE:
        raise ValueError(f"receiver: Esjet-Fence {v!r} is not a decimal number")
    return int(v)


def _wrong_last(err: BaseException) -> bool:
    """A write refused because the key's revision moved. nats-py's kv.update
    says so with KeyWrongLastSequenceError, but kv.delete passes the server's
    APIError (10071, or 10164 on R3) through unchanged."""
    if isinstance(err, jserrors.KeyWrongLastSequenceError):
        return True
    return isinstance(err, jserrors.APIError) and err.err_code in (10071, 10164)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


@dataclass
class Outcome:
    result: Any
    replayed: bool


@dataclass
class _Claim:
    digest: str
    owner: str
    fence: int


Effect = Callable[[], Awaitable[Any]]


class Receiver:
    """Folds repeated deliveries of one idempotency key into one effect."""

    def __init__(self, nc: NATS, kv: Any, bucket: str, lease: float, retention: float):
        self.nc = nc
        self.js = nc.jetstream()
        self.kv = kv
        self.bucket = bucket
        self.lease = lease
        self.retention = retention
        self._owner = f"{socket.gethostname()}:{os.getpid()}"
        self._nuid = NUID()
        self._inflight: Set["asyncio.Future[None]"] = set()

    @classmethod
    async def create(cls, nc: NATS, bucket: str, retention: float = DEFAULT_RETENTION, lease: float = DEFAULT_LEASE, replicas: int = 1) -> "Receiver":
        """Opens the bucket, creating it if it does not exist (durations in seconds)."""
        problems = []
        if not bucket:
            problems.append("bucket is empty; name the KV bucket that keeps the receipts")
        elif not all(c.isascii() and (c.isalnum() or c in "-_") for c in bucket):
            problems.append(f"bucket {bucket!r}: use only letters, digits, '-' and '_'")
        if lease <= 0 or retention <= 0:
            problems.append("lease and retention must be positive")
        elif lease >= retention:
            problems.append(f"lease {lease}s is not shorter than retention {retention}s")
        if problems:
            raise ValueError("receiver: " + "; ".join(problems))
        js = nc.jetstream()
        try:
            kv = await js.key_value(bucket)
        except jserrors.BucketNotFoundError:
            kv = await js.create_key_value(
                KeyValueConfig(
                    bucket=bucket,
                    description="esjet receiver: idempotency keys, parameter digests and results",
                    history=1,
                    ttl=retention,
                    replicas=replicas,
                    storage=StorageType.FILE,
                )
            )
        return cls(nc, kv, bucket, lease, retention)

    async def do(self, key: str, params: Union[bytes, str], effect: Effect, deadline: Optional[float] = None) -> Outcome:
        """:meth:`do_fenced` without a fence."""
        return await self.do_fenced(key, 0, params, effect, deadline)

    async def do_fenced(self, key: str, fence: int, params: Union[bytes, str], effect: Effect, deadline: Optional[float] = None) -> Outcome:
        """Runs effect at most once per key, in effect (see spec/README.md).

        Raises ConflictError (other parameters), StaleError (a lower fence
        than one seen; effect not run), InProgressError (another delivery
        holds a fresh claim and ``deadline``, a time.monotonic() value,
        passed), InvalidKeyError, NotRecordedError; effect's own exception
        unchanged after the claim is released."""
        if not key or len(key.encode()) > MAX_KEY_LEN:
            raise InvalidKeyError(f"receiver: invalid idempotency key: {len(key.encode())} bytes, want 1 to {MAX_KEY_LEN}")
        k = encode_key(key)
        digest = digest_of(params)
        waiting = False
        # A claim is stale when this delivery has seen its revision stand
        # still for the lease on its own monotonic clock: no server timestamp
        # is compared with the local clock, so clock skew cannot break it
        # (Go's receiver does the same).
        seen_rev, seen_at = 0, 0.0
        while True:
            if deadline is not None and time.monotonic() > deadline:
                if waiting:
                    raise InProgressError(f"receiver: key {key!r}: another delivery of this key is in progress")
                raise TimeoutError(f"receiver: key {key!r}: deadline passed")
            claim = _Claim(digest, f"{self._owner}/{self._nuid.next().decode()}", fence)
            try:
                rev = await self.kv.create(k, self._claim_value(claim))
                return await self._run(key, k, rev, claim, effect)
            except jserrors.KeyWrongLastSequenceError:
                pass
            got = await self._read(k)
            if got is None:
                continue  # released or expired since: claim again
            rec, revision = got
            if rec.get("digest") != digest and rec.get("state") != "released":
                raise ConflictError(
                    f"receiver: idempotency key reused with different parameters: key {key!r} was first used with parameters of digest {rec.get('digest', '')[:12]}…, now {digest[:12]}…"
                )
            claim.fence = max(fence, rec.get("fence", 0))
            state = rec.get("state")
            if state == "done":
                return Outcome(rec.get("result"), True)
            if state not in ("running", "released"):
                raise RuntimeError(f"receiver: key {key!r} has unknown state {state!r} (bucket {self.bucket})")
            if fence != 0 and fence < rec.get("fence", 0):
                raise StaleError(
                    f"receiver: a newer attempt of this key was seen: key {key!r}: this attempt's fence is {fence}, an attempt with fence {rec.get('fence')} was seen; its worker lost its lease, do not retry it"
                )
            if revision != seen_rev:
                seen_rev, seen_at = revision, time.monotonic()
            stale_in = self.lease - (time.monotonic() - seen_at)
            if state == "released" or stale_in <= 0:
                try:
                    rev = await self.kv.update(k, self._claim_value(claim), last=revision)
                    return await self._run(key, k, rev, claim, effect)
                except jserrors.KeyWrongLastSequenceError:
                    continue
            waiting = True
            await self._wait_for_change(k, revision, min(stale_in, 0.25))

    async def _read(self, k: str):
        """The key's record and revision, or None (absent or deleted)."""
        try:
            e = await self.kv.get(k)
        except jserrors.KeyNotFoundError:
            return None
        try:
            rec = json.loads(e.value or b"")
        except ValueError as err:
            raise RuntimeError(f"receiver: key {k!r} holds an unreadable record (bucket {self.bucket}, revision {e.revision}): {err}") from err
        return rec, e.revision

    async def _wait_for_change(self, k: str, rev: int, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await asyncio.sleep(min(0.025, max(0.001, end - time.monotonic())))
            got = await self._read(k)
            if got is None or got[1] != rev:
                return

    @staticmethod
    def _record(**fields: Any) -> bytes:
        # As Go writes it: absent fields omitted, fence 0 (none) too.
        rec = {k: v for k, v in fields.items() if v is not None and not (k == "fence" and v == 0)}
        return json.dumps(rec, separators=(",", ":")).encode()

    def _claim_value(self, c: _Claim) -> bytes:
        t = _now()
        return self._record(state="running", digest=c.digest, owner=c.owner, claimed_at=t, renewed_at=t, fence=c.fence)

    async def _run(self, key: str, k: str, rev: int, c: _Claim, effect: Effect) -> Outcome:
        claimed_at = _now()
        state = {"rev": rev}
        stopping = asyncio.Event()

        async def renew() -> None:
            # Stopped between writes, never inside one: a renewal cancelled
            # after the server took it would leave state["rev"] behind.
            while True:
                try:
                    await asyncio.wait_for(stopping.wait(), max(self.lease / 3, 0.001))
                    return
                except asyncio.TimeoutError:
                    pass
                value = self._record(state="running", digest=c.digest, owner=c.owner, claimed_at=claimed_at, renewed_at=_now(), fence=c.fence)
                try:
                    state["rev"] = await self.kv.update(k, value, last=state["rev"])
                except Exception as err:  # noqa: BLE001
                    if _wrong_last(err):
                        return  # taken over: the final write finds out
                    # anything else: retried on the next tick

        hb = asyncio.ensure_future(renew())

        async def stop() -> None:
            stopping.set()
            await asyncio.gather(hb, return_exceptions=True)

        try:
            result = await effect()
        except BaseException:
            await stop()
            await self._release(k, state["rev"], c)
            raise
        await stop()
        done = self._record(state="done", digest=c.digest, owner=c.owner, claimed_at=claimed_at, result=result, done_at=_now(), fence=c.fence)
        try:
            await asyncio.wait_for(self._write(k, state["rev"], c.owner, lambda r: self.kv.update(k, done, last=r)), WRITE_TIMEOUT)
        except Exception as err:
            raise NotRecordedError(f"receiver: the effect ran but its result was not recorded: key {key!r}: {err!r}", result) from err
        return Outcome(result, False)

    async def _release(self, k: str, rev: int, c: _Claim) -> None:
        async def op(r: int) -> None:
            if not c.fence:
                await self.kv.delete(k, last=r)
            else:
                await self.kv.update(k, self._record(state="released", digest=c.digest, fence=c.fence), last=r)

        try:
            await asyncio.wait_for(self._write(k, rev, c.owner, op), WRITE_TIMEOUT)
        except Exception:
            pass  # the claim goes stale after the lease and is taken over then

    async def _write(self, k: str, rev: int, owner: str, op: Callable[[int], Awaitable[Any]]) -> None:
        try:
            await op(rev)
            return
        except Exception as err:  # noqa: BLE001
            if not _wrong_last(err):
                raise
        got = await self._read(k)
        if got is None or got[0].get("state") != "running" or got[0].get("owner") != owner:
            raise RuntimeError("claim taken over by another delivery")
        await op(got[1])

    async def handle(self, m: Msg, effect: Callable[[Msg], Awaitable[Any]]) -> Dict[str, Any]:
        """The reply to one target request (what :meth:`serve` answers)."""
        h = m.headers or {}
        key = h.get(HEADER_IDEMPOTENCY_KEY, "")
        if not key:
            return {"error": f"missing {HEADER_IDEMPOTENCY_KEY} header: every request must carry one (esjet sends the command id)", "retryable": False}
        try:
            fence = parse_fence(h.get(HEADER_FENCE))
        except ValueError as err:
            return {"error": str(err), "retryable": False}
        try:
            out = await self.do_fenced(key, fence, m.data, lambda: effect(m))
            return {"result": out.result}
        except Exception as err:  # noqa: BLE001 — every error becomes the reply the worker reads
            return reply_for(err)

    async def serve(self, subject: str, effect: Callable[[Msg], Awaitable[Any]], queue: str = "") -> Subscription:
        """Serves subject as an esjet target: each request applied once per
        Idempotency-Key with its Esjet-Fence, answered as the worker expects
        (spec target-reply.json). Raise :class:`Failure` (terminal /
        retryable) from effect to fail; any other exception is retried."""

        async def cb(m: Msg) -> None:
            async def one() -> None:
                reply = await self.handle(m, effect)
                if not m.reply:
                    return
                try:
                    # Not m.respond: nats-py's respond sends the request's
                    # headers back with the reply.
                    await self.nc.publish(m.reply, json.dumps(reply, separators=(",", ":")).encode())
                except Exception:  # noqa: BLE001
                    pass  # the connection is closing: the worker's request times out and is retried

            # Each request in its own task (a slow effect must not hold up
            # the others), referenced until done: the event loop keeps only
            # weak references to tasks.
            task = asyncio.ensure_future(one())
            self._inflight.add(task)
            task.add_done_callback(self._inflight.discard)

        return await self.nc.subscribe(subject, queue=queue, cb=cb)


def reply_for(err: BaseException) -> Dict[str, Any]:
    """The reply a worker expects for an error of do_fenced or of the effect."""
    if isinstance(err, NotRecordedError):
        return {"result": err.result}  # the effect happened: say so
    if isinstance(err, Failure):
        r: Dict[str, Any] = {"error": err.message, "retryable": err.retryable}
        if err.retry_after_ms:
            r["retry_after_ms"] = err.retry_after_ms
        return r
    if isinstance(err, StaleError):
        return {"error": str(err), "stale": True}
    if isinstance(err, (ConflictError, InvalidKeyError)):
        return {"error": str(err), "retryable": False}
    if isinstance(err, InProgressError):
        return {"error": str(err), "retryable": True, "retry_after_ms": 500}
    return {"error": f"receiver: {err!r}", "retryable": True}
