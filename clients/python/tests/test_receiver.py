"""The Python receiver's own behaviour beyond the conformance cases, against
a running esjet node (ESJET_NATS_URL): python3 -m unittest discover -s
clients/python/tests. Driven by the Go test spec.TestConformance."""

from __future__ import annotations

import asyncio
import json
import os
import time
import unittest

import nats
import nats.js.errors as jserrors

from esjet_client import Failure, Receiver, digest_of, encode_key, parse_fence, retryable

URL = os.environ.get("ESJET_NATS_URL", "nats://127.0.0.1:4222")
BUCKET = "esjet_python_tests"
RUN = f"py{time.time_ns() % 1_000_000_000}"


class ReceiverTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        self.nc = await nats.connect(URL)
        self.rcv = await Receiver.create(self.nc, BUCKET, lease=1.0)

    async def asyncTearDown(self) -> None:
        await self.nc.drain()

    def key(self, name: str) -> str:
        return f"{RUN}-{self._testMethodName}-{name}"

    async def record(self, key: str):
        try:
            e = await self.rcv.kv.get(encode_key(key))
        except jserrors.KeyNotFoundError:
            return None
        return json.loads(e.value)

    async def test_serve_replies_without_the_request_headers(self) -> None:
        subject = f"pytests.{RUN}.headers"

        async def effect(_m):
            return {"ok": True}

        sub = await self.rcv.serve(subject, effect)
        try:
            key = self.key("k")
            resp = await self.nc.request(subject, b"{}", timeout=5, headers={"Idempotency-Key": key, "Esjet-Fence": "3", "Esjet-Attempt": "1"})
        finally:
            await sub.unsubscribe()
        self.assertEqual(json.loads(resp.data), {"result": {"ok": True}})
        self.assertFalse(resp.headers, f"the reply carries headers {resp.headers}: want none (the worker reads the body)")

    def moves_then_fails(self, key: str):
        """An effect that rewrites its own claim, as a renewal whose ack was
        lost does (the claim is still ours, at a newer revision than the
        receiver last saw), then fails."""
        k = encode_key(key)

        async def effect():
            e = await self.rcv.kv.get(k)
            await self.rcv.kv.update(k, e.value, last=e.revision)
            raise retryable("effect failed")

        return effect

    async def test_a_failure_releases_the_key_after_its_revision_moved(self) -> None:
        # Else the next delivery waits a whole lease.
        key = self.key("k")
        with self.assertRaises(Failure):
            await self.rcv.do(key, b"{}", self.moves_then_fails(key))
        self.assertIsNone(await self.record(key), "the failed claim was not released")

    async def test_a_fenced_failure_keeps_the_fence_after_the_revision_moved(self) -> None:
        key = self.key("k")
        with self.assertRaises(Failure):
            await self.rcv.do_fenced(key, 7, b"{}", self.moves_then_fails(key))
        rec = await self.record(key)
        self.assertEqual((rec or {}).get("state"), "released", rec)
        self.assertEqual(rec.get("fence"), 7, rec)

    async def test_a_renewed_claim_is_not_taken_over(self) -> None:
        key = self.key("k")
        runs = 0

        async def slow():
            nonlocal runs
            runs += 1
            await asyncio.sleep(3.0)  # three leases: renewals keep the claim
            return {"runs": runs}

        first = asyncio.ensure_future(self.rcv.do(key, b"{}", slow))
        while await self.record(key) is None:
            await asyncio.sleep(0.01)
        second = await self.rcv.do(key, b"{}", slow)
        out = await first
        self.assertEqual(runs, 1, "a second delivery ran the effect while the first held the claim")
        self.assertEqual((out.result, out.replayed), ({"runs": 1}, False))
        self.assertEqual((second.result, second.replayed), ({"runs": 1}, True))

    async def test_a_dead_claim_is_taken_over_after_the_lease(self) -> None:
        # A claim nobody renews, as a receiver killed mid-effect leaves it.
        key = self.key("k")
        dead = {"state": "running", "digest": "", "owner": "killed:1/x", "claimed_at": "2026-01-01T00:00:00Z", "renewed_at": "2026-01-01T00:00:00Z"}

        dead["digest"] = digest_of(b"{}")
        await self.rcv.kv.create(encode_key(key), json.dumps(dead).encode())

        async def effect():
            return "booked"

        out = await asyncio.wait_for(self.rcv.do(key, b"{}", effect), 30)
        self.assertEqual((out.result, out.replayed), ("booked", False))
        self.assertEqual((await self.record(key))["state"], "done")


class ParseFenceTest(unittest.TestCase):
    def test_as_go_parses_it(self) -> None:
        self.assertEqual(parse_fence(""), 0)
        self.assertEqual(parse_fence("18446744073709551615"), 2**64 - 1)
        for bad in ("-1", "1.5", " 1", "\u00b2", "\u0661", "18446744073709551616"):
            with self.assertRaises(ValueError, msg=repr(bad)):
                parse_fence(bad)


if __name__ == "__main__":
    unittest.main()
