// The spec's conformance cases (spec/conformance) run through this client
// against a running esjet node: ESJET_NATS_URL, ESJET_SPEC_DIR. Driven by
// the Go test spec.TestConformance; by hand: npm run conformance.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Client, EsjetError, Receiver, digestOf, encodeKey, retryable, terminal, targetHeaders } from "../src/index.js";

type J = any; // eslint-disable-line @typescript-eslint/no-explicit-any

const url = process.env.ESJET_NATS_URL ?? "nats://127.0.0.1:4222";
const specDir = process.env.ESJET_SPEC_DIR ?? join(import.meta.dirname ?? ".", "..", "..", "..", "..", "spec");
const run = `ts${Date.now() % 1_000_000_000}`;

function subst(v: J, token: string, saved: Record<string, J>): J {
  if (typeof v === "string") {
    if (v.startsWith("${") && v.endsWith("}") && v.slice(2, -1) in saved) return saved[v.slice(2, -1)];
    return v.replaceAll("{run}", token);
  }
  if (Array.isArray(v)) return v.map((e) => subst(e, token, saved));
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, e]) => [k, subst(e, token, saved)]));
  return v;
}

function match(at: string, want: J, got: J): void {
  if (want === "*") return;
  if (Array.isArray(want)) {
    if (!Array.isArray(got) || got.length !== want.length) throw new Error(`${at}: want ${want.length} items, got ${JSON.stringify(got)}`);
    want.forEach((w, i) => match(`${at}[${i}]`, w, got[i]));
    return;
  }
  if (want && typeof want === "object") {
    if (!got || typeof got !== "object") throw new Error(`${at}: want an object, got ${JSON.stringify(got)}`);
    for (const [k, w] of Object.entries(want)) {
      if (!(k in got)) throw new Error(`${at}.${k}: missing`);
      match(`${at}.${k}`, w, got[k]);
    }
    return;
  }
  if (want !== got) throw new Error(`${at}: want ${JSON.stringify(want)}, got ${JSON.stringify(got)}`);
}

function getPath(v: J, p: string): J {
  return p.split(".").reduce((o, k) => (o == null ? undefined : o[k]), v);
}

function checkReply(expect: J, got: J): void {
  if (expect.match !== undefined) match("reply", expect.match, got);
  for (const k of expect.absent ?? []) if (k in got) throw new Error(`reply has ${JSON.stringify(k)}, want it absent: ${JSON.stringify(got)}`);
  for (const [k, item] of Object.entries(expect.contains ?? {})) {
    const list = getPath(got, k) ?? [];
    if (!list.some((e: J) => { try { match(k, item, e); return true; } catch { return false; } })) {
      throw new Error(`reply's ${k} has no item matching ${JSON.stringify(item)}`);
    }
  }
}

async function callClient(c: Client, s: J): Promise<J> {
  const page = { after: s.after, limit: s.limit };
  switch (s.op) {
    case "send": return c.send(s.type, s.id, s.command, s.payload, { idempotencyKey: s.idempotency_key, expectedVersion: s.expected_version });
    case "state": return c.state(s.type, s.id);
    case "history": return c.history(s.type, s.id, page);
    case "raw_history": return c.rawHistory(s.type, s.id, page);
    case "raw_append": return c.rawAppend(s.type, s.id, s.body);
    case "multi": return c.multi(s.body);
    case "types": return c.types();
    case "log": return c.log(page);
    case "view_get": return c.viewGet(s.view, s.key, { after: s.after, wait: s.wait });
  }
  throw new Error(`unknown op ${s.op}`);
}

let failures = 0;
function report(name: string, err?: unknown) {
  if (err) {
    failures++;
    console.log(`FAIL ${name}: ${(err as Error).message ?? err}`);
  } else console.log(`ok   ${name}`);
}

async function apiCases(c: Client) {
  const { cases } = JSON.parse(readFileSync(join(specDir, "conformance", "api.json"), "utf8"));
  for (const tc of cases) {
    const saved: Record<string, J> = {};
    try {
      for (const [i, raw] of tc.steps.entries()) {
        const s = subst(raw, run, saved);
        const ex = s.expect;
        let got: J;
        try {
          got = await callClient(c, s);
        } catch (err) {
          if (!(err instanceof EsjetError)) throw new Error(`step ${i + 1} (${s.op}): ${err}`);
          if (ex.error === undefined) throw new Error(`step ${i + 1} (${s.op}): want a reply, got ${err.code} (${err.status}): ${err.message}`);
          if (err.code !== ex.error || (ex.status !== undefined && err.status !== ex.status)) {
            throw new Error(`step ${i + 1} (${s.op}): want error ${ex.error} (${ex.status}), got ${err.code} (${err.status}): ${err.message}`);
          }
          if (ex.version !== undefined && err.version !== ex.version) throw new Error(`step ${i + 1}: want the error's version ${ex.version}, got ${err.version}`);
          continue;
        }
        if (ex.error !== undefined) throw new Error(`step ${i + 1} (${s.op}): want error ${ex.error}, got ${JSON.stringify(got)}`);
        try {
          checkReply(ex, got);
        } catch (err) {
          throw new Error(`step ${i + 1} (${s.op}): ${(err as Error).message}`);
        }
        for (const [name, p] of Object.entries(s.save ?? {})) saved[name] = getPath(got, p as string);
      }
      report(`api: ${tc.name}`);
    } catch (err) {
      report(`api: ${tc.name}`, err);
    }
  }
}

async function receiverCases(nc: NatsConnection) {
  const { scenarios } = JSON.parse(readFileSync(join(specDir, "conformance", "receiver.json"), "utf8"));
  const rcv = await Receiver.create(nc, { bucket: "esjet_conformance", leaseMs: 2000 });
  for (const [i, sc] of scenarios.entries()) {
    const token = `${run}-${i}`;
    const subject = `conformance.${token}.${i}`;
    let runs = 0;
    let mode = "ok";
    const sub = rcv.serve(nc, subject, async () => {
      runs++;
      if (mode === "retryable") throw retryable(`effect failed (${mode})`);
      if (mode === "terminal") throw terminal(`effect failed (${mode})`);
      return { runs };
    });
    try {
      for (const [j, raw] of sc.steps.entries()) {
        const s = subst(raw, token, {});
        mode = s.effect;
        const resp = await nc.request(subject, JSON.stringify(s.body), { timeout: 10_000, headers: targetHeaders(s.key, s.fence, s.attempt) });
        const got = resp.json<J>();
        try {
          checkReply({ match: s.expect.reply, absent: s.expect.absent }, got);
          if (runs !== s.expect.runs) throw new Error(`the effect ran ${runs} times, want ${s.expect.runs}`);
        } catch (err) {
          throw new Error(`step ${j + 1}: ${(err as Error).message} (reply ${JSON.stringify(got)})`);
        }
      }
      report(`receiver: ${sc.name}`);
    } catch (err) {
      report(`receiver: ${sc.name}`, err);
    } finally {
      sub.unsubscribe();
    }
  }
}

function keyVectors() {
  const v = JSON.parse(readFileSync(join(specDir, "conformance", "receiver-keys.json"), "utf8"));
  try {
    for (const { key, stored } of v.keys) if (encodeKey(key) !== stored) throw new Error(`key ${JSON.stringify(key)} stored as ${encodeKey(key)}, want ${stored}`);
    for (const { body, digest } of v.digests) if (digestOf(body) !== digest) throw new Error(`digest of ${JSON.stringify(body)} is ${digestOf(body)}, want ${digest}`);
    report("receiver keys and digests");
  } catch (err) {
    report("receiver keys and digests", err);
  }
}

keyVectors();
const nc = await connect({ servers: url });
try {
  await apiCases(new Client(nc, { namespace: "demo" }));
  await receiverCases(nc);
} finally {
  await nc.drain();
}
if (failures) {
  console.log(`${failures} conformance case(s) failed`);
  process.exit(1);
}
console.log("all conformance cases passed");
