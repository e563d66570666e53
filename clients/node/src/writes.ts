// SPDX-License-Identifier: Apache-2.0
/**
 * Fenced writes through the gateway: rows of configured Postgres tables and keys under configured Redis
 * prefixes, each write carrying the Fence-Token of a lease, and the plain reads of both. Owns: the paths,
 * bodies and effects of the calls of /v1/pg and /v1/redis. Must not: decide whether a lease is still held
 * (the Holder does, before each try of a write, retries included, and hears about refusals after it).
 */

import { OutcomeUnknownError, ProblemError, UnreachableError } from "./errors.js";
import { Effect, Transport, segment } from "./transport.js";

export type Row = Record<string, unknown>;

/** The answer of a fenced write; with returnMinimal() and a gateway that honours it, only applied/minimal. */
export interface WriteResult {
  applied: boolean;
  resource?: string;
  /** The fence the write was made with (exact, a bigint). */
  fence?: bigint;
  /** Postgres: the row after the write (null after a delete). */
  row?: Row | null;
  /** Postgres batch: one result per op. */
  results?: Row[];
  /** Redis PUT: the value written. */
  value?: string;
  /** Redis PATCH: the fields written. */
  fields?: Row;
  /** The gateway answered 204 No Content (Prefer: return=minimal). */
  minimal?: boolean;
}

/** The answer of a read: the row, or the value or fields, and the highest fence stored (null when none). */
export interface ReadResult {
  row?: Row;
  value?: string;
  fields?: Row;
  fence: bigint | null;
}

/** Where writes get their token: a lease, or a token received from elsewhere. */
export interface Holder {
  /** The Fence-Token to present; throws LeaseLostError when the lease is known to be gone. */
  token(): string;
  /** The Fence-Owner header, if any. */
  readonly owner: string | undefined;
  /** Told about each refused write, so a lease can note its own loss. */
  refused(error: ProblemError): void;
}

/** A fixed token: no checks. */
export function fixedHolder(token: string | undefined, owner: string | undefined): Holder {
  return {
    owner,
    token() {
      if (!token) throw new TypeError("this write needs a fence token: write through a lease, or pass a token");
      return token;
    },
    refused() {},
  };
}

/** Per-call options of writes and reads. */
export interface CallOptions {
  signal?: AbortSignal;
}

async function send(transport: Transport, holder: Holder, minimal: boolean, method: string, path: string, body: unknown,
  effect: Effect, options?: CallOptions): Promise<WriteResult> {
  const headers: Record<string, string> = { "Fence-Token": holder.token() };
  if (holder.owner) headers["Fence-Owner"] = holder.owner;
  if (minimal) headers.Prefer = "return=minimal";
  try {
    // The lease is checked again before every try: a retry must not go out once the lease is known lost.
    const answer = await transport.call({ method, path, body, headers, effect, signal: options?.signal, write: true,
      check: () => void holder.token() });
    if (answer.status === 204) return { applied: true, minimal: true };
    // Every write the gateway answers 2xx says "applied": true; another 2xx came from something else at its
    // address, and the write's outcome is unknown.
    if (answer.body?.applied !== true) {
      throw new UnreachableError(`${method} ${path}: no answer from the gateway: a ${answer.status} that does not `
        + 'say "applied": true', true);
    }
    return answer.body as WriteResult;
  } catch (e) {
    // A 410 ends the lease all the same, also when it answered the retry of a write whose outcome is unknown;
    // a LeaseLostError of the holder's own check before a retry (status 0: the lease lost, or released) is
    // no news, and would count a released lease as lost.
    const refusal = e instanceof OutcomeUnknownError ? e.last : e;
    if (refusal instanceof ProblemError && refusal.status !== 0) holder.refused(refusal);
    throw e;
  }
}

/** A batch op: "patch" (key, set), "put" (key, row), "post" (row) or "delete" (key); table defaults to the table's. */
export interface BatchOp {
  op: "patch" | "put" | "post" | "delete";
  table?: string;
  key?: string | number;
  set?: Row;
  row?: Row;
}

/**
 * One configured Postgres table. Writes reject with StaleFenceError, LeaseLostError, InvalidFenceTokenError,
 * NotFoundError, ConflictError, ...; a refused write changes nothing. A write answered a 5xx, or retried
 * after a try that may have been applied, rejects with OutcomeUnknownError instead.
 */
export class PgTable {
  constructor(private readonly transport: Transport, readonly table: string, private readonly holder: Holder,
    private readonly minimal = false) {}

  /** The same table with writes sent with Prefer: return=minimal (204, no row read back). */
  returnMinimal(): PgTable {
    return new PgTable(this.transport, this.table, this.holder, true);
  }

  private path(key?: string | number): string {
    return key === undefined ? `/v1/pg/${segment(this.table)}` : `/v1/pg/${segment(this.table)}/${segment(key)}`;
  }

  /** The row and the highest fence stored for it. */
  async get(key: string | number, options?: CallOptions): Promise<ReadResult> {
    return (await this.transport.call({ method: "GET", path: this.path(key), effect: "read", signal: options?.signal })).body;
  }

  /** Updates columns of the row key; retried after a lost reply (same values, same fence). */
  async patch(key: string | number, set: Row, options?: CallOptions): Promise<WriteResult> {
    return send(this.transport, this.holder, this.minimal, "PATCH", this.path(key), { set }, "idempotent", options);
  }

  /** Inserts or replaces the row key (columns not given become NULL); retried after a lost reply. */
  async put(key: string | number, row: Row, options?: CallOptions): Promise<WriteResult> {
    return send(this.transport, this.holder, this.minimal, "PUT", this.path(key), { row }, "idempotent", options);
  }

  /** Inserts a new row, its key among the columns; ConflictError if it exists. Not retried once sent. */
  async insert(row: Row, options?: CallOptions): Promise<WriteResult> {
    return send(this.transport, this.holder, this.minimal, "POST", this.path(), { row }, "once", options);
  }

  /** Deletes the row key; NotFoundError if there is none. Not retried once sent. */
  async delete(key: string | number, options?: CallOptions): Promise<WriteResult> {
    return send(this.transport, this.holder, this.minimal, "DELETE", this.path(key), undefined, "once", options);
  }

  /** Several ops in one transaction, all or nothing; retried only when every op is a patch or a put. */
  async batch(ops: BatchOp[], options?: CallOptions): Promise<WriteResult> {
    const full = ops.map((op) => ({ ...op, table: op.table ?? this.table, ...(op.key !== undefined ? { key: String(op.key) } : {}) }));
    const effect: Effect = full.every((op) => op.op === "patch" || op.op === "put") ? "idempotent" : "once";
    return send(this.transport, this.holder, this.minimal, "POST", "/v1/pg/batch", { ops: full }, effect, options);
  }
}

/** The keys under the configured Redis prefixes. */
export class RedisKeys {
  constructor(private readonly transport: Transport, private readonly holder: Holder, private readonly minimal = false) {}

  /** The same keys with writes sent with Prefer: return=minimal. */
  returnMinimal(): RedisKeys {
    return new RedisKeys(this.transport, this.holder, true);
  }

  /** The value or fields of a key and the highest fence stored for it. */
  async get(key: string, options?: CallOptions): Promise<ReadResult> {
    return (await this.transport.call({ method: "GET", path: `/v1/redis/${segment(key)}`, effect: "read",
      signal: options?.signal })).body;
  }

  /** Sets a string value; retried after a lost reply. */
  async put(key: string, value: string, options?: CallOptions): Promise<WriteResult> {
    return send(this.transport, this.holder, this.minimal, "PUT", `/v1/redis/${segment(key)}`, { value }, "idempotent", options);
  }

  /** Sets fields of a hash; retried after a lost reply. */
  async patch(key: string, fields: Row, options?: CallOptions): Promise<WriteResult> {
    return send(this.transport, this.holder, this.minimal, "PATCH", `/v1/redis/${segment(key)}`, { fields }, "idempotent", options);
  }

  /** Deletes the key. Not retried once sent. */
  async delete(key: string, options?: CallOptions): Promise<WriteResult> {
    return send(this.transport, this.holder, this.minimal, "DELETE", `/v1/redis/${segment(key)}`, undefined, "once", options);
  }
}
