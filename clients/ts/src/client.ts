import { headers, type NatsConnection, type MsgHdrs } from "@nats-io/transport-node";
import { EsjetError } from "./errors.js";
import type { History, LogPage, MultiRequest, MultiResult, Page, RawAppend, Result, State, TypeInfo, ViewDoc } from "./types.js";

/** Request headers of the API (spec.json request_headers). */
export const Headers = {
  IdempotencyKey: "Idempotency-Key",
  CorrelationId: "Esjet-Correlation-Id",
  CausationId: "Esjet-Causation-Id",
  TraceParent: "traceparent",
  AfterVersion: "Esjet-After-Version",
  AfterPosition: "Esjet-After-Position",
  Limit: "Esjet-Limit",
  ServiceErrorCode: "Nats-Service-Error-Code",
} as const;

export interface ClientOptions {
  /** The bounded context served (subjects esjet.<ns>.…); default "demo". */
  namespace?: string;
  /** Request timeout in milliseconds; default 10000. */
  timeout?: number;
}

export interface SendOptions {
  /** A retry with the same key returns the first result and writes nothing. */
  idempotencyKey?: string;
  /**
   * The version the aggregate must be at, or the send is refused with
   * `version_conflict` (sent as a one-command multi request).
   */
  expectedVersion?: number;
  correlationId?: string;
  causationId?: string;
  traceparent?: string;
}

const TOKEN = /^[A-Za-z0-9_-]{1,128}$/;

function token(field: string, v: string): string {
  if (!TOKEN.test(v)) {
    throw new EsjetError("invalid_token", 400, `${field} ${JSON.stringify(v)} must be 1 to 128 letters, digits, '_' or '-'`);
  }
  return v;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * The esjet API over NATS: one request per operation, as the micro service
 * esjet.<ns>.… answers it. Errors are thrown as {@link EsjetError} with the
 * spec's code and status.
 */
export class Client {
  readonly nc: NatsConnection;
  readonly namespace: string;
  readonly timeout: number;

  constructor(nc: NatsConnection, opts: ClientOptions = {}) {
    this.nc = nc;
    this.namespace = token("namespace", opts.namespace ?? "demo");
    this.timeout = opts.timeout ?? 10_000;
  }

  /** Sends a command to aggregate type/id. */
  async send(type: string, id: string, command: string, payload: unknown = {}, opts: SendOptions = {}): Promise<Result> {
    if (opts.expectedVersion !== undefined) {
      const res = await this.multi(
        { commands: [{ type, id, command, payload, expected_version: opts.expectedVersion, idempotency_key: opts.idempotencyKey }] },
        opts,
      );
      return res.results[0];
    }
    return this.request<Result>([token("type", type), token("id", id), token("command", command)], payload, this.meta(opts));
  }

  /** The aggregate's current state; `not_found` if it has no events. */
  state<S = unknown>(type: string, id: string): Promise<State<S>> {
    return this.request<State<S>>([token("type", type), token("id", id), "state"]);
  }

  /** One page of a registered aggregate's history. */
  history(type: string, id: string, page: Page = {}): Promise<History> {
    return this.request<History>([token("type", type), token("id", id), "events"], pageBody(page));
  }

  /** Every page of a history, in order. */
  async *historyPages(type: string, id: string, page: Page = {}, raw = false): AsyncGenerator<History> {
    let after = page.after ?? 0;
    for (;;) {
      const h = raw ? await this.rawHistory(type, id, { ...page, after }) : await this.history(type, id, { ...page, after });
      yield h;
      if (h.next_after === undefined) return;
      after = h.next_after;
    }
  }

  /** Appends events (and the commands they issue) to an aggregate type not registered in the node. */
  rawAppend(type: string, id: string, body: RawAppend, opts: SendOptions = {}): Promise<Result> {
    return this.request<Result>(["raw", "append", token("type", type), token("id", id)], body, this.meta(opts));
  }

  /** One page of any aggregate's history, registered or raw. */
  rawHistory(type: string, id: string, page: Page = {}): Promise<History> {
    return this.request<History>(["raw", "events", token("type", type), token("id", id)], pageBody(page));
  }

  /** One command per aggregate, all appended or none. */
  multi(req: MultiRequest, opts: SendOptions = {}): Promise<MultiResult> {
    return this.request<MultiResult>(["multi"], req, this.meta(opts));
  }

  /** One page of the whole log in global order, after global position `after`. */
  log(page: Page = {}): Promise<LogPage> {
    return this.request<LogPage>(["log"], pageBody(page));
  }

  /**
   * A view's document. With `after` (a result's position) the read waits,
   * up to `wait` (a duration such as "2s", at most 30s), until the view
   * holds every event up to it: read your own write.
   */
  viewGet<V = unknown>(view: string, key: string, opts: { after?: number; wait?: string } = {}): Promise<ViewDoc<V>> {
    return this.request<ViewDoc<V>>(["views", token("view", view), "get"], { key, ...opts });
  }

  /** A page of a view's documents. */
  viewList(view: string, opts: { prefix?: string; limit?: number; cursor?: string } = {}): Promise<unknown> {
    return this.request<unknown>(["views", token("view", view), "list"], opts);
  }

  /** The registered aggregate types and the commands a client may send. */
  types(): Promise<TypeInfo[]> {
    return this.request<TypeInfo[]>(["types"]);
  }

  private meta(opts: SendOptions): MsgHdrs | undefined {
    const h = headers();
    let any = false;
    const set = (k: string, v?: string) => {
      if (v) {
        h.set(k, v);
        any = true;
      }
    };
    set(Headers.IdempotencyKey, opts.idempotencyKey);
    set(Headers.CorrelationId, opts.correlationId);
    set(Headers.CausationId, opts.causationId);
    set(Headers.TraceParent, opts.traceparent);
    return any ? h : undefined;
  }

  private async request<T>(tokens: string[], body?: unknown, hdrs?: MsgHdrs): Promise<T> {
    const subject = `esjet.${this.namespace}.${tokens.join(".")}`;
    const data = body === undefined ? new Uint8Array() : enc.encode(JSON.stringify(body));
    let msg;
    try {
      msg = await this.nc.request(subject, data, { timeout: this.timeout, headers: hdrs });
    } catch (err) {
      const e = err as Error;
      // No node serves the namespace, or none answered in time: the
      // request may have been recorded (retry with the same key).
      throw new EsjetError("unavailable", 503, `${subject}: ${e.message}`);
    }
    const text = dec.decode(msg.data);
    const status = msg.headers?.get(Headers.ServiceErrorCode);
    if (status) {
      let parsed: { error?: { code?: string; message?: string; version?: number } } = {};
      try {
        parsed = JSON.parse(text);
      } catch {
        // fall through: the header alone says it failed
      }
      const e = parsed.error ?? {};
      throw new EsjetError(e.code ?? "internal", Number(status), e.message ?? text, e.version);
    }
    return JSON.parse(text) as T;
  }
}

function pageBody(p: Page): Page | undefined {
  const b: Page = {};
  if (p.after !== undefined) b.after = p.after;
  if (p.limit !== undefined) b.limit = p.limit;
  return Object.keys(b).length ? b : undefined;
}
