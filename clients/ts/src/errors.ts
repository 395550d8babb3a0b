/**
 * An error the esjet API answered (or that this client refused before
 * sending, with the code the node would have answered). `code` is one of
 * the spec's error codes (spec/spec.json), or a domain's own rejection code
 * with status 422.
 */
export class EsjetError extends Error {
  readonly code: string;
  readonly status: number;
  /** The aggregate's actual version, on `version_conflict`. */
  readonly version?: number;

  constructor(code: string, status: number, message: string, version?: number) {
    super(message || code);
    this.name = "EsjetError";
    this.code = code;
    this.status = status;
    if (version !== undefined) this.version = version;
  }

  /**
   * True when the request may have been recorded and must be retried with
   * the same idempotency key (or read back first).
   */
  get retryWithSameKey(): boolean {
    return ["outcome_unknown", "stopping", "unavailable", "conflict"].includes(this.code);
  }
}

/** The idempotency key was first used with different parameters: terminal. */
export class ConflictError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConflictError";
  }
}

/** A newer attempt (a higher fence) of this key was seen: the effect did not run. */
export class StaleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StaleError";
  }
}

/** Another delivery of the key holds a fresh claim and the wait ended first: retryable. */
export class InProgressError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InProgressError";
  }
}

/** The idempotency key is empty or longer than 512 bytes. */
export class InvalidKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InvalidKeyError";
  }
}

/**
 * The effect ran and succeeded but its result could not be recorded:
 * `result` holds it. Report success if you can.
 */
export class NotRecordedError extends Error {
  readonly result: unknown;
  constructor(message: string, result: unknown) {
    super(message);
    this.name = "NotRecordedError";
    this.result = result;
  }
}

/**
 * An effect's failure as the worker must read it: `retryable` false means
 * failed for good (the command is dead-lettered and its aggregate told),
 * true means try again (after `retryAfterMs` if given).
 */
export class Failure extends Error {
  readonly retryable: boolean;
  readonly retryAfterMs?: number;
  constructor(message: string, opts: { retryable: boolean; retryAfterMs?: number }) {
    super(message);
    this.name = "Failure";
    this.retryable = opts.retryable;
    if (opts.retryAfterMs !== undefined) this.retryAfterMs = opts.retryAfterMs;
  }
}

/** A failure the worker must not retry. */
export function terminal(message: string): Failure {
  return new Failure(message, { retryable: false });
}

/** A failure the worker retries, after retryAfterMs if given. */
export function retryable(message: string, retryAfterMs?: number): Failure {
  return new Failure(message, { retryable: true, retryAfterMs });
}
