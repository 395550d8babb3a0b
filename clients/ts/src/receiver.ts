import { createHash } from "node:crypto";
import { hostname } from "node:os";
import { headers as natsHeaders, nuid, type Msg, type NatsConnection, type Subscription } from "@nats-io/transport-node";
import { Kvm, type KV, type KvEntry } from "@nats-io/kv";
import { ConflictError, Failure, InProgressError, InvalidKeyError, NotRecordedError, StaleError } from "./errors.js";

/**
 * Headers of a worker's request to a target (spec target-request.json).
 */
export const TargetHeaders = {
  IdempotencyKey: "Idempotency-Key",
  Attempt: "Esjet-Attempt",
  Fence: "Esjet-Fence",
  CommandId: "Esjet-Command-Id",
  CommandKind: "Esjet-Command-Kind",
  AggregateType: "Esjet-Aggregate-Type",
  AggregateId: "Esjet-Aggregate-Id",
  AggregateVersion: "Esjet-Aggregate-Version",
  /** The payload's schema version, when above 1 (spec 1.2.0; absent: 1). */
  CommandSchema: "Esjet-Command-Schema",
  CorrelationId: "Esjet-Correlation-Id",
  TraceParent: "traceparent",
} as const;

/** The longest idempotency key a receiver accepts, in bytes. */
export const MAX_KEY_LEN = 512;
export const DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000;
export const DEFAULT_LEASE_MS = 60 * 1000;
const WRITE_TIMEOUT_MS = 5000;

export interface ReceiverConfig {
  /** The KV bucket that keeps the records; required (letters, digits, '-', '_'). */
  bucket: string;
  /**
   * How long a key is remembered after its last write (the bucket's max
   * age); default 7 days. Must outlast the producer's longest retry.
   */
  retentionMs?: number;
  /** How long a claim stays valid without renewal; default 1 minute. */
  leaseMs?: number;
  /** The bucket's replicas; default 1. */
  replicas?: number;
}

type State = "running" | "done" | "released";

/** The record under a key (spec receiver-record.json), shared with receivers in any language. */
interface Rec {
  state: State;
  digest: string;
  owner?: string;
  claimed_at?: string;
  renewed_at?: string;
  result?: unknown;
  done_at?: string;
  fence?: number;
}

/** Parses an Esjet-Fence value; empty is 0 (no fence). */
export function parseFence(v: string | undefined | null): number {
  if (!v) return 0;
  if (!/^[0-9]+$/.test(v)) throw new Error(`receiver: Esjet-Fence ${JSON.stringify(v)} is not a decimal number`);
  return Number(v);
}

/** How a key is stored in the bucket: letters, digits, '-', '_' kept, other bytes =XX. */
export function encodeKey(key: string): string {
  let out = "";
  for (const b of new TextEncoder().encode(key)) {
    const c = String.fromCharCode(b);
    if (/[A-Za-z0-9_-]/.test(c)) out += c;
    else out += "=" + b.toString(16).toUpperCase().padStart(2, "0");
  }
  return out;
}

/** The hex SHA-256 of a request's parameters. */
export function digestOf(params: Uint8Array | string): string {
  return createHash("sha256").update(params).digest("hex");
}

function isWrongLastSequence(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  return code === 10071 || code === 10164;
}

const now = () => new Date().toISOString();
const utf8 = new TextEncoder();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export type Effect = () => Promise<unknown>;

export interface Outcome {
  result: unknown;
  replayed: boolean;
}

/**
 * Folds repeated deliveries of one idempotency key into one effect: the
 * semantics of Go's package receiver, with the same bucket records, so
 * receivers in Go, TypeScript and Python may share a bucket.
 */
export class Receiver {
  readonly kv: KV;
  readonly bucket: string;
  readonly leaseMs: number;
  readonly retentionMs: number;
  private readonly owner: string;

  private constructor(kv: KV, bucket: string, leaseMs: number, retentionMs: number) {
    this.kv = kv;
    this.bucket = bucket;
    this.leaseMs = leaseMs;
    this.retentionMs = retentionMs;
    this.owner = `${hostname()}:${process.pid}`;
  }

  /** Opens the bucket, creating it if it does not exist. */
  static async create(nc: NatsConnection, cfg: ReceiverConfig): Promise<Receiver> {
    const leaseMs = cfg.leaseMs ?? DEFAULT_LEASE_MS;
    const retentionMs = cfg.retentionMs ?? DEFAULT_RETENTION_MS;
    const problems: string[] = [];
    if (!cfg.bucket) problems.push("bucket is empty; name the KV bucket that keeps the receipts");
    else if (!/^[A-Za-z0-9_-]+$/.test(cfg.bucket)) problems.push(`bucket ${JSON.stringify(cfg.bucket)}: use only letters, digits, '-' and '_'`);
    if (leaseMs <= 0 || retentionMs <= 0) problems.push("lease and retention must be positive");
    if (leaseMs >= retentionMs) problems.push(`lease ${leaseMs}ms is not shorter than retention ${retentionMs}ms`);
    if (problems.length) throw new Error("receiver: " + problems.join("; "));
    const kv = await new Kvm(nc).create(cfg.bucket, {
      description: "esjet receiver: idempotency keys, parameter digests and results",
      history: 1,
      ttl: retentionMs,
      replicas: cfg.replicas ?? 1,
    });
    return new Receiver(kv, cfg.bucket, leaseMs, retentionMs);
  }

  /** {@link doFenced} without a fence. */
  do(key: string, params: Uint8Array | string, effect: Effect, signal?: AbortSignal): Promise<Outcome> {
    return this.doFenced(key, 0, params, effect, signal);
  }

  /**
   * Runs effect at most once per key, in effect. Same key and parameters:
   * the stored result, replayed. Different parameters: {@link ConflictError}.
   * A fence lower than the highest seen for the key: {@link StaleError},
   * without running effect. A fresh claim by another delivery: waits for
   * it (or takes it over once not renewed for the lease), or
   * {@link InProgressError} when signal aborts first. effect's error is
   * thrown unchanged after the claim is released (a failure consumes
   * nothing; a fenced key keeps its fence).
   */
  async doFenced(key: string, fence: number, params: Uint8Array | string, effect: Effect, signal?: AbortSignal): Promise<Outcome> {
    const bytes = typeof params === "string" ? utf8.encode(params) : params;
    if (!key || utf8.encode(key).length > MAX_KEY_LEN) {
      throw new InvalidKeyError(`receiver: invalid idempotency key: ${utf8.encode(key).length} bytes, want 1 to ${MAX_KEY_LEN}`);
    }
    const k = encodeKey(key);
    const digest = digestOf(bytes);
    let waiting = false;
    // A claim is stale when this delivery has seen its revision stand still
    // for the lease on its own monotonic clock: no server timestamp is
    // compared with the local clock, so clock skew cannot break it (Go's
    // receiver does the same).
    let seenRev = 0;
    let seenAt = 0;
    for (;;) {
      if (signal?.aborted) {
        if (waiting) throw new InProgressError(`receiver: key ${JSON.stringify(key)}: another delivery of this key is in progress`);
        throw new Error(`receiver: key ${JSON.stringify(key)}: aborted`);
      }
      const owner = `${this.owner}/${nuid.next()}`;
      const claim = { digest, owner, fence };
      try {
        const rev = await this.kv.create(k, this.claimValue(claim));
        return await this.run(key, k, rev, claim, effect);
      } catch (err) {
        if (!isWrongLastSequence(err)) throw err;
      }
      const e = await this.kv.get(k);
      if (e === null || e.operation !== "PUT") continue; // released or expired since: claim again
      let rec: Rec;
      try {
        rec = e.json<Rec>();
      } catch (err) {
        throw new Error(`receiver: key ${JSON.stringify(key)} holds an unreadable record (bucket ${this.bucket}, revision ${e.revision}): ${err}`);
      }
      if (rec.digest !== digest && rec.state !== "released") {
        throw new ConflictError(
          `receiver: idempotency key reused with different parameters: key ${JSON.stringify(key)} was first used with parameters of digest ${rec.digest.slice(0, 12)}…, now ${digest.slice(0, 12)}…`,
        );
      }
      claim.fence = Math.max(fence, rec.fence ?? 0);
      if (rec.state === "done") return { result: rec.result ?? null, replayed: true };
      if (rec.state !== "running" && rec.state !== "released") {
        throw new Error(`receiver: key ${JSON.stringify(key)} has unknown state ${JSON.stringify(rec.state)} (bucket ${this.bucket})`);
      }
      if (fence !== 0 && fence < (rec.fence ?? 0)) {
        throw new StaleError(
          `receiver: a newer attempt of this key was seen: key ${JSON.stringify(key)}: this attempt's fence is ${fence}, an attempt with fence ${rec.fence} was seen; its worker lost its lease, do not retry it`,
        );
      }
      if (e.revision !== seenRev) {
        seenRev = e.revision;
        seenAt = performance.now();
      }
      const staleIn = this.leaseMs - (performance.now() - seenAt);
      if (rec.state === "released" || staleIn <= 0) {
        // Claim a released key, or take over a stale claim, at the revision read: one wins.
        try {
          const rev = await this.kv.update(k, this.claimValue(claim), e.revision);
          return await this.run(key, k, rev, claim, effect);
        } catch (err) {
          if (isWrongLastSequence(err)) continue;
          throw err;
        }
      }
      waiting = true;
      await this.waitForChange(k, e.revision, Math.min(staleIn, 250), signal);
    }
  }

  /** Waits until the key's revision moves past rev, at most ms. */
  private async waitForChange(k: string, rev: number, ms: number, signal?: AbortSignal): Promise<void> {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline && !signal?.aborted) {
      await sleep(Math.min(25, Math.max(1, deadline - Date.now())));
      const e = await this.kv.get(k);
      if (e === null || e.revision !== rev) return;
    }
  }

  private claimValue(c: { digest: string; owner: string; fence: number }): Uint8Array {
    const t = now();
    const rec: Rec = { state: "running", digest: c.digest, owner: c.owner, claimed_at: t, renewed_at: t };
    if (c.fence) rec.fence = c.fence;
    return utf8.encode(JSON.stringify(rec));
  }

  private async run(key: string, k: string, rev: number, claim: { digest: string; owner: string; fence: number }, effect: Effect): Promise<Outcome> {
    const claimedAt = now();
    let stopped = false;
    let renewing: Promise<void> = Promise.resolve();
    const timer = setInterval(() => {
      renewing = renewing.then(async () => {
        if (stopped) return;
        const rec: Rec = { state: "running", digest: claim.digest, owner: claim.owner, claimed_at: claimedAt, renewed_at: now() };
        if (claim.fence) rec.fence = claim.fence;
        try {
          rev = await this.kv.update(k, utf8.encode(JSON.stringify(rec)), rev);
        } catch (err) {
          if (isWrongLastSequence(err)) stopped = true; // taken over: the final write finds out
        }
      });
    }, Math.max(Math.floor(this.leaseMs / 3), 1));
    const stop = async () => {
      clearInterval(timer);
      await renewing;
      stopped = true;
    };
    let result: unknown;
    try {
      result = await effect();
    } catch (err) {
      await stop();
      await this.release(k, rev, claim);
      throw err;
    }
    await stop();
    const rec: Rec = { state: "done", digest: claim.digest, owner: claim.owner, claimed_at: claimedAt };
    if (result !== undefined && result !== null) rec.result = result;
    rec.done_at = now();
    if (claim.fence) rec.fence = claim.fence;
    try {
      await this.write(k, rev, claim.owner, (r) => this.kv.update(k, utf8.encode(JSON.stringify(rec)), r, WRITE_TIMEOUT_MS));
    } catch (err) {
      throw new NotRecordedError(`receiver: the effect ran but its result was not recorded: key ${JSON.stringify(key)}: ${err}`, result ?? null);
    }
    return { result: result ?? null, replayed: false };
  }

  private async release(k: string, rev: number, claim: { digest: string; owner: string; fence: number }): Promise<void> {
    try {
      await this.write(k, rev, claim.owner, async (r) => {
        if (!claim.fence) {
          await this.kv.delete(k, { previousSeq: r });
          return;
        }
        const rec: Rec = { state: "released", digest: claim.digest, fence: claim.fence };
        await this.kv.update(k, utf8.encode(JSON.stringify(rec)), r, WRITE_TIMEOUT_MS);
      });
    } catch {
      // The claim goes stale after the lease and is taken over then.
    }
  }

  /** Applies op at the claim's revision; if the revision moved but the claim is still ours, once more. */
  private async write(k: string, rev: number, owner: string, op: (rev: number) => Promise<unknown>): Promise<void> {
    try {
      await op(rev);
      return;
    } catch (err) {
      if (!isWrongLastSequence(err)) throw err;
    }
    const e: KvEntry | null = await this.kv.get(k);
    let rec: Rec | undefined;
    try {
      rec = e?.operation === "PUT" ? e.json<Rec>() : undefined;
    } catch {
      rec = undefined;
    }
    if (!e || !rec || rec.state !== "running" || rec.owner !== owner) {
      throw new Error("claim taken over by another delivery");
    }
    await op(e.revision);
  }

  /**
   * Serves subject (queue group queue, if given) as an esjet target: each
   * request is applied once per Idempotency-Key with its Esjet-Fence, and
   * answered as a worker expects (spec target-reply.json): {"result": …},
   * {"error": …, "retryable": …}, or {"error": …, "stale": true}. effect
   * gets the request; throw a {@link Failure} (terminal / retryable) to
   * fail, any other error is retried.
   */
  serve(nc: NatsConnection, subject: string, effect: (req: Msg) => Promise<unknown>, opts: { queue?: string } = {}): Subscription {
    return nc.subscribe(subject, {
      queue: opts.queue,
      callback: (err, m) => {
        if (err) return;
        void this.handle(m, effect).then((reply) => {
          if (m.reply) m.respond(utf8.encode(JSON.stringify(reply)));
        });
      },
    });
  }

  /** The reply to one target request (what {@link serve} answers). */
  async handle(m: Msg, effect: (req: Msg) => Promise<unknown>): Promise<TargetReply> {
    const key = m.headers?.get(TargetHeaders.IdempotencyKey) ?? "";
    if (!key) return { error: `missing ${TargetHeaders.IdempotencyKey} header: every request must carry one (esjet sends the command id)`, retryable: false };
    let fence: number;
    try {
      fence = parseFence(m.headers?.get(TargetHeaders.Fence));
    } catch (err) {
      return { error: (err as Error).message, retryable: false };
    }
    try {
      const out = await this.doFenced(key, fence, m.data, () => effect(m));
      return { result: out.result ?? null };
    } catch (err) {
      return replyFor(err);
    }
  }
}

/** A target's reply (spec target-reply.json). */
export type TargetReply = { result: unknown } | { error: string; retryable?: boolean; stale?: boolean; retry_after_ms?: number };

/** The reply a worker expects for an error of {@link Receiver.doFenced} or of the effect. */
export function replyFor(err: unknown): TargetReply {
  if (err instanceof NotRecordedError) return { result: err.result ?? null }; // the effect happened: say so
  if (err instanceof Failure) {
    const r: TargetReply = { error: err.message, retryable: err.retryable };
    if (err.retryAfterMs) r.retry_after_ms = err.retryAfterMs;
    return r;
  }
  if (err instanceof StaleError) return { error: err.message, stale: true };
  if (err instanceof ConflictError || err instanceof InvalidKeyError) return { error: err.message, retryable: false };
  if (err instanceof InProgressError) return { error: err.message, retryable: true, retry_after_ms: 500 };
  return { error: `receiver: ${(err as Error)?.message ?? String(err)}`, retryable: true };
}

/** Headers for a request shaped like a worker's (for tests and tools). */
export function targetHeaders(key: string, fence: number, attempt: number) {
  const h = natsHeaders();
  if (key) {
    h.set(TargetHeaders.IdempotencyKey, key);
    h.set(TargetHeaders.CommandId, key);
  }
  if (fence) h.set(TargetHeaders.Fence, String(fence));
  h.set(TargetHeaders.Attempt, String(attempt));
  return h;
}
