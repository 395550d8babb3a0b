"""The spec's conformance cases (spec/conformance) run through this client
against a running esjet node: ESJET_NATS_URL, ESJET_SPEC_DIR. Driven by the
Go test spec.TestConformance; by hand, from the repository's root (nats-py
from the vendored copy, esjet_client from this checkout, put on the path
below): PYTHONPATH=clients/python/vendor python3 clients/python/tests/conformance.py"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any, Dict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import nats  # noqa: E402

from esjet_client import Client, EsjetError, Receiver, digest_of, encode_key, retryable, terminal  # noqa: E402

URL = os.environ.get("ESJET_NATS_URL", "nats://127.0.0.1:4222")
SPEC = os.environ.get("ESJET_SPEC_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "spec"))
RUN = f"py{time.time_ns() % 1_000_000_000}"
failures = 0


def load(name: str) -> Any:
    with open(os.path.join(SPEC, "conformance", name), encoding="utf-8") as f:
        return json.load(f)


def subst(v: Any, token: str, saved: Dict[str, Any]) -> Any:
    if isinstance(v, str):
        if v.startswith("${") and v.endswith("}") and v[2:-1] in saved:
            return saved[v[2:-1]]
        return v.replace("{run}", token)
    if isinstance(v, list):
        return [subst(e, token, saved) for e in v]
    if isinstance(v, dict):
        return {k: subst(e, token, saved) for k, e in v.items()}
    return v


def match(at: str, want: Any, got: Any) -> None:
    if want == "*":
        return
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            raise AssertionError(f"{at}: want {len(want)} items, got {got!r}")
        for i, (w, g) in enumerate(zip(want, got)):
            match(f"{at}[{i}]", w, g)
        return
    if isinstance(want, dict):
        if not isinstance(got, dict):
            raise AssertionError(f"{at}: want an object, got {got!r}")
        for k, w in want.items():
            if k not in got:
                raise AssertionError(f"{at}.{k}: missing")
            match(f"{at}.{k}", w, got[k])
        return
    if want != got or type(want) is not type(got) and not (isinstance(want, (int, float)) and isinstance(got, (int, float))):
        raise AssertionError(f"{at}: want {want!r}, got {got!r}")


def get_path(v: Any, p: str) -> Any:
    for k in p.split("."):
        v = v.get(k) if isinstance(v, dict) else None
    return v


def check_reply(expect: Dict[str, Any], got: Any) -> None:
    if "match" in expect:
        match("reply", expect["match"], got)
    for k in expect.get("absent") or []:
        if k in got:
            raise AssertionError(f"reply has {k!r}, want it absent: {got!r}")
    for k, item in (expect.get("contains") or {}).items():
        def ok(e: Any) -> bool:
            try:
                match(k, item, e)
                return True
            except AssertionError:
                return False
        if not any(ok(e) for e in get_path(got, k) or []):
            raise AssertionError(f"reply's {k} has no item matching {item!r}")


async def call(c: Client, s: Dict[str, Any]) -> Any:
    op = s["op"]
    if op == "send":
        return await c.send(s["type"], s["id"], s["command"], s.get("payload"), idempotency_key=s.get("idempotency_key"), expected_version=s.get("expected_version"))
    if op == "state":
        return await c.state(s["type"], s["id"])
    if op == "history":
        return await c.history(s["type"], s["id"], after=s.get("after"), limit=s.get("limit"))
    if op == "raw_history":
        return await c.raw_history(s["type"], s["id"], after=s.get("after"), limit=s.get("limit"))
    if op == "raw_append":
        return await c.raw_append(s["type"], s["id"], s["body"])
    if op == "multi":
        return await c.multi(s["body"])
    if op == "types":
        return await c.types()
    if op == "log":
        return await c.log(after=s.get("after"), limit=s.get("limit"))
    if op == "view_get":
        return await c.view_get(s["view"], s["key"], after=s.get("after"), wait=s.get("wait"))
    raise ValueError(f"unknown op {op}")


def report(name: str, err: Exception = None) -> None:
    global failures
    if err is not None:
        failures += 1
        print(f"FAIL {name}: {err}", flush=True)
    else:
        print(f"ok   {name}", flush=True)


async def api_cases(c: Client) -> None:
    for tc in load("api.json")["cases"]:
        saved: Dict[str, Any] = {}
        try:
            for i, raw in enumerate(tc["steps"], 1):
                s = subst(raw, RUN, saved)
                ex = s["expect"]
                try:
                    got = await call(c, s)
                except EsjetError as err:
                    if "error" not in ex:
                        raise AssertionError(f"step {i} ({s['op']}): want a reply, got {err.code} ({err.status}): {err.message}")
                    if err.code != ex["error"] or ("status" in ex and err.status != ex["status"]):
                        raise AssertionError(f"step {i} ({s['op']}): want error {ex['error']} ({ex.get('status')}), got {err.code} ({err.status}): {err.message}")
                    if "version" in ex and err.version != ex["version"]:
                        raise AssertionError(f"step {i}: want the error's version {ex['version']}, got {err.version}")
                    continue
                if "error" in ex:
                    raise AssertionError(f"step {i} ({s['op']}): want error {ex['error']}, got {got!r}")
                try:
                    check_reply(ex, got)
                except AssertionError as err:
                    raise AssertionError(f"step {i} ({s['op']}): {err}")
                for name, p in (s.get("save") or {}).items():
                    saved[name] = get_path(got, p)
            report(f"api: {tc['name']}")
        except Exception as err:  # noqa: BLE001
            report(f"api: {tc['name']}", err)


async def receiver_cases(nc: Any) -> None:
    rcv = await Receiver.create(nc, "esjet_conformance", lease=2.0)
    for i, sc in enumerate(load("receiver.json")["scenarios"]):
        token = f"{RUN}-{i}"
        subject = f"conformance.{token}.{i}"
        box = {"runs": 0, "mode": "ok"}

        async def effect(_m: Any) -> Any:
            box["runs"] += 1
            if box["mode"] == "retryable":
                raise retryable(f"effect failed ({box['mode']})")
            if box["mode"] == "terminal":
                raise terminal(f"effect failed ({box['mode']})")
            return {"runs": box["runs"]}

        sub = await rcv.serve(subject, effect)
        try:
            for j, raw in enumerate(sc["steps"], 1):
                s = subst(raw, token, {})
                box["mode"] = s["effect"]
                hdrs = {"Esjet-Attempt": str(s["attempt"])}
                if s["key"]:
                    hdrs["Idempotency-Key"] = s["key"]
                    hdrs["Esjet-Command-Id"] = s["key"]
                if s["fence"]:
                    hdrs["Esjet-Fence"] = str(s["fence"])
                resp = await nc.request(subject, json.dumps(s["body"]).encode(), timeout=10, headers=hdrs)
                got = json.loads(resp.data)
                try:
                    check_reply({"match": s["expect"]["reply"], "absent": s["expect"].get("absent")}, got)
                    if box["runs"] != s["expect"]["runs"]:
                        raise AssertionError(f"the effect ran {box['runs']} times, want {s['expect']['runs']}")
                except AssertionError as err:
                    raise AssertionError(f"step {j}: {err} (reply {got!r})")
            report(f"receiver: {sc['name']}")
        except Exception as err:  # noqa: BLE001
            report(f"receiver: {sc['name']}", err)
        finally:
            await sub.unsubscribe()


def key_vectors() -> None:
    v = load("receiver-keys.json")
    try:
        for e in v["keys"]:
            if encode_key(e["key"]) != e["stored"]:
                raise AssertionError(f"key {e['key']!r} stored as {encode_key(e['key'])}, want {e['stored']}")
        for e in v["digests"]:
            if digest_of(e["body"]) != e["digest"]:
                raise AssertionError(f"digest of {e['body']!r} is {digest_of(e['body'])}, want {e['digest']}")
        report("receiver keys and digests")
    except AssertionError as err:
        report("receiver keys and digests", err)


async def main() -> int:
    key_vectors()
    nc = await nats.connect(URL)
    try:
        await api_cases(Client(nc, namespace="demo"))
        await receiver_cases(nc)
    finally:
        await nc.drain()
    if failures:
        print(f"{failures} conformance case(s) failed")
        return 1
    print("all conformance cases passed")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
