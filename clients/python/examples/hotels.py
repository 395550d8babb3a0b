"""The demo's hotel supplier in Python: a twin of Go's demo/services hotels
(and of clients/ts/examples/hotels.ts), served to esjet's workers through
the Python receiver. Route the trip's hotel commands here in the node's
config:

    workers:
      book_hotel:   {target: nats, subject: hotels.book}
      cancel_hotel: {target: nats, subject: hotels.cancel}

and run: python3 clients/python/examples/hotels.py (ESJET_NATS_URL, default
nats://127.0.0.1:4222; HOTELS_SLOW_MS delays each booking, to kill it
mid-call). Bookings live in the KV bucket hotels_ledger, one per command
id: the hotel's own books, which the receiver keeps from booking twice."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
from typing import Any, Dict

import nats
import nats.js.errors as jserrors
from nats.aio.msg import Msg
from nats.js.api import KeyValueConfig

from esjet_client import Receiver, encode_key, terminal

URL = os.environ.get("ESJET_NATS_URL", "nats://127.0.0.1:4222")
SLOW = int(os.environ.get("HOTELS_SLOW_MS", "0")) / 1000


def log(msg: str) -> None:
    print(msg, flush=True)


def ref() -> str:
    return "HT-" + secrets.token_hex(3).upper()


async def main() -> None:
    nc = await nats.connect(URL, name="hotels-py", max_reconnect_attempts=-1)
    js = nc.jetstream()
    rcv = await Receiver.create(nc, "hotels_py_receipts", lease=2.0)
    try:
        ledger = await js.key_value("hotels_ledger")
    except jserrors.BucketNotFoundError:
        ledger = await js.create_key_value(KeyValueConfig(bucket="hotels_ledger", history=1))

    async def book(m: Msg) -> Dict[str, Any]:
        cid = (m.headers or {}).get("Esjet-Command-Id", "")
        p = json.loads(m.data or b"{}")
        price = p.get("price")
        if not p.get("traveler") or not p.get("destination") or not isinstance(price, (int, float)) or price <= 0:
            raise terminal("invalid payload: want traveler, destination and a positive price in cents")
        log(f"effect {cid}")
        if SLOW > 0:
            await asyncio.sleep(SLOW)
        b = {"booking_ref": ref(), "command_id": cid, "traveler": p["traveler"], "destination": p["destination"], "price": price, "status": "booked"}
        try:
            await ledger.create(encode_key(cid), json.dumps(b).encode())
        except jserrors.KeyWrongLastSequenceError:
            # The hotel's books already hold this command's booking.
            had = json.loads((await ledger.get(encode_key(cid))).value)
            log(f"already booked {had['booking_ref']} for {cid}")
            return {"booking_ref": had["booking_ref"]}
        log(f"booked {b['booking_ref']} for {cid}")
        return {"booking_ref": b["booking_ref"]}

    async def cancel(m: Msg) -> Dict[str, Any]:
        booking_ref = json.loads(m.data or b"{}").get("booking_ref")
        if not isinstance(booking_ref, str) or not booking_ref.startswith("HT-"):
            raise terminal(f"unknown booking_ref {json.dumps(booking_ref)}: want HT-…")
        try:
            keys = await ledger.keys()
        except jserrors.NoKeysError:
            keys = []
        for k in keys:
            try:
                e = await ledger.get(k)
            except jserrors.KeyNotFoundError:
                continue
            b = json.loads(e.value)
            if b.get("booking_ref") == booking_ref:
                b["status"] = "cancelled"
                await ledger.update(k, json.dumps(b).encode(), last=e.revision)
                log(f"cancelled {booking_ref}")
                return {"cancelled": True}
        raise terminal(f"unknown booking_ref {booking_ref}")

    subs = [
        await rcv.serve("hotels.book", book, queue="hotels-py"),
        await rcv.serve("hotels.cancel", cancel, queue="hotels-py"),
    ]
    log(f"hotels-py ready on hotels.book, hotels.cancel ({URL})")
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()
    for s in subs:
        await s.unsubscribe()
    await nc.drain()


if __name__ == "__main__":
    asyncio.run(main())
