// The wire shapes of spec/schemas, as TypeScript types (spec version 1.x).

/** Wire spec version this client speaks. */
export const SPEC_VERSION = "1.2.0";

export interface EventRef {
  id: string;
  type: string;
  version: number;
  seq: number;
  /** Global position: seq × 10000 + index in the decision. */
  position: number;
}

export interface CommandRef {
  /** `<type>:<id>:<version>:<index>`: the Idempotency-Key its target receives. */
  id: string;
  kind: string;
  report?: boolean;
  deliver_after?: string;
}

/** A command's result (result.json). */
export interface Result {
  aggregate_type: string;
  aggregate_id: string;
  version: number;
  decision_id?: string;
  seq?: number;
  /** Pass as a view read's `after` to read your own write. */
  position?: number;
  events: EventRef[];
  commands: CommandRef[];
  /** A retry with the same idempotency key: the first result, nothing written. */
  replayed?: boolean;
}

/** An aggregate's state (state.json). */
export interface State<S = unknown> {
  aggregate_type: string;
  aggregate_id: string;
  position: { seq: number; version: number };
  state: S;
}

export interface HistoryEvent {
  id: string;
  type: string;
  schema: number;
  version: number;
  time: string;
  seq: number;
  position: number;
  decision_id: string;
  data?: unknown;
}

export interface HistoryCommand {
  id: string;
  kind: string;
  seq: number;
  report?: boolean;
  deliver_after?: string;
  payload?: unknown;
}

/** One page of an aggregate's history (history.json). */
export interface History {
  aggregate_type: string;
  aggregate_id: string;
  version: number;
  seq: number;
  events: HistoryEvent[];
  commands: HistoryCommand[];
  /** The `after` of the next page; absent on the last page. */
  next_after?: number;
  skipped?: unknown[];
}

export interface Page {
  /** Version (history) or global position (log) to read after; 0: from the start. */
  after?: number;
  /** 1 to 1000; default 100. */
  limit?: number;
}

/** A raw append (raw-append.json). */
export interface RawAppend {
  expected_version: number;
  events: { type: string; schema?: number; data?: unknown }[];
  commands?: { kind: string; payload?: unknown; deliver_after?: string; /** The payload's schema version (spec 1.2.0); absent: 1. */ schema?: number }[];
  idempotency_key?: string;
  correlation_id?: string;
  causation_id?: string;
  traceparent?: string;
}

export interface MultiCommand {
  type: string;
  id: string;
  command: string;
  payload?: unknown;
  expected_version?: number;
  idempotency_key?: string;
}

/** A multi-aggregate append (multi-request.json). */
export interface MultiRequest {
  commands: MultiCommand[];
  idempotency_key?: string;
}

export interface MultiResult {
  results: Result[];
}

export interface LogEvent {
  position: number;
  seq: number;
  aggregate_type: string;
  aggregate_id: string;
  id: string;
  type: string;
  schema: number;
  version: number;
  time: string;
  decision_id: string;
  /** The event's place in its decision (spec 1.1.0). */
  index?: number;
  /** When the server stored the decision (spec 1.1.0). */
  stored?: string;
  data?: unknown;
}

/** One page of the whole log (log-page.json). */
export interface LogPage {
  events: LogEvent[];
  /** The `after` of the next page. */
  next: number;
}

/** A read-model document (view-doc.json). */
export interface ViewDoc<V = unknown> {
  view: string;
  key: string;
  value: V;
  revision: number;
  generation: number;
  position?: number;
}

export interface TypeInfo {
  type: string;
  commands: string[];
}
