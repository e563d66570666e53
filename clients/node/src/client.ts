// SPDX-License-Identifier: Apache-2.0
/**
 * The entry point of the fencegate client: one Client per gateway. Owns: the factories of leases and of
 * table/key handles, withLock / withLockSet, and the calls that need no lease (status, revoke, reads, the
 * audit trail, readiness). Must not: hold lease state (lease.ts) or open connections itself (transport.ts).
 */

import { Lease, LeaseOptions, LockSet } from "./lease.js";
import { ClientOptions, NO_RETRY, Transport, segment } from "./transport.js";
import { CallOptions, PgTable, RedisKeys, Row, fixedHolder } from "./writes.js";

/** The status of a lock; never its token. */
export interface LockStatus {
  lock: string;
  held: boolean;
  /** The holder's fence (exact, a bigint), or null. */
  fence: bigint | null;
  owner?: string | null;
  expires_in_ms?: number;
  waiting: number;
}

/** The status of a semaphore. */
export interface SemaphoreStatus {
  semaphore: string;
  limit: number | null;
  holders: number;
  waiting: number;
}

/** Filters of the audit trail; every member is optional. */
export interface AuditQuery {
  resource?: string;
  lock?: string;
  sinceMs?: number;
  afterId?: number;
  pageSize?: number;
  signal?: AbortSignal;
}

/** One refused write of the audit trail. */
export interface AuditRecord {
  id: number;
  at_ms: number;
  resource: string;
  lock: string | null;
  presented_fence: bigint;
  current_fence: bigint | null;
  owner: string | null;
  client_addr: string | null;
  method: string;
  reason: string;
  [member: string]: unknown;
}

export class Client {
  readonly transport: Transport;
  readonly owner: string | undefined;

  constructor(options: ClientOptions = {}) {
    this.transport = new Transport(options);
    this.owner = options.owner;
  }

  /** Closes the pool's connections (leases still held keep renewing until released). */
  close(): void {
    this.transport.close();
  }

  /**
   * Acquires a lease on the lock name, waiting up to options.waitMs in the gateway's FIFO queue (aborting
   * options.signal ends the wait), and keeps it alive in the background until release(). Rejects with
   * LockBusyError, TooManyWaitersError, InvalidNameError, UnauthorizedError, ForbiddenError, ...
   */
  lock(name: string, options: LeaseOptions = {}): Promise<Lease> {
    return new Lease(this.transport, "lock", name, options.owner ?? this.owner, options.requestId).acquire(options);
  }

  /** One of the limit slots of the semaphore name; otherwise as lock(). LimitMismatchError for another limit. */
  semaphore(name: string, limit: number, options: LeaseOptions = {}): Promise<Lease> {
    return new Lease(this.transport, "semaphore", name, options.owner ?? this.owner, options.requestId)
      .acquire(options, limit);
  }

  /** Every lock of names (1-32 distinct) or none: LockBusyError's `lock` names the one not obtained. */
  lockSet(names: string[], options: LeaseOptions = {}): Promise<LockSet> {
    return new LockSet(this.transport, names, options.owner ?? this.owner, options.requestId).acquire(options);
  }

  /**
   * Acquires the lock, runs fn(lease) (lease.signal aborts as soon as the lease is lost) and releases it,
   * also when fn throws. Resolves to fn's result; rejects with fn's error, else with LeaseLostError if the
   * lease was lost meanwhile (the work may not have been exclusive).
   */
  async withLock<T>(name: string, fn: (lease: Lease) => Promise<T>, options: LeaseOptions = {}): Promise<T> {
    return run(await this.lock(name, options), fn);
  }

  /** As withLock, for a lock set. */
  async withLockSet<T>(names: string[], fn: (set: LockSet) => Promise<T>, options: LeaseOptions = {}): Promise<T> {
    return run(await this.lockSet(names, options), fn);
  }

  async lockStatus(name: string, options?: CallOptions): Promise<LockStatus> {
    return (await this.transport.call({ method: "GET", path: `/v1/locks/${segment(name)}`, effect: "read",
      signal: options?.signal })).body;
  }

  async semaphoreStatus(name: string, options?: CallOptions): Promise<SemaphoreStatus> {
    return (await this.transport.call({ method: "GET", path: `/v1/semaphores/${segment(name)}`, effect: "read",
      signal: options?.signal })).body;
  }

  /**
   * Ends the current holder's lease on name at once (scope admin); resolves to the revoked fence, or null
   * when nobody held it. Not retried once sent: a repeat would revoke the next holder. Its outcome is
   * unknown, as a write's, when it got no answer (an UnreachableError, sent) or a 5xx (an
   * OutcomeUnknownError holding it): the gateway may have recorded the revocation before its backend failed
   * to answer, so a 503 is no refusal. Read the lock's status to find out.
   */
  async revokeLock(name: string, reason = ""): Promise<bigint | null> {
    const body = (await this.transport.call({ method: "POST", path: `/v1/locks/${segment(name)}/revoke`,
      effect: "once", write: true, body: { reason } })).body;
    return body?.revoked_fence ?? null;
  }

  /**
   * Ends the lease of the holder of fence on semaphore name (scope admin); resolves to fence, or null when no
   * live holder has it (also when an earlier try of this call, unanswered or answered 5xx, ended it). Retried
   * as the policy allows: it names the lease it ends, so a repeat ends nobody else. As revokeLock, its
   * outcome is unknown when its last try got no answer or a 5xx (an OutcomeUnknownError): a 503 is no
   * refusal. Read the semaphore's status to find out.
   */
  async revokeSemaphore(name: string, fence: bigint, reason = ""): Promise<bigint | null> {
    const body = (await this.transport.call({ method: "POST", path: `/v1/semaphores/${segment(name)}/revoke`,
      effect: "idempotent", write: true, body: { fence, reason } })).body;
    return body?.revoked_fence ?? null;
  }

  /** A configured table: reads need no token; writes present token (prefer lease.pg(table)). */
  pg(table: string, token?: string): PgTable {
    return new PgTable(this.transport, table, fixedHolder(token, this.owner));
  }

  /** Keys under the configured Redis prefixes; as pg(). */
  redis(token?: string): RedisKeys {
    return new RedisKeys(this.transport, fixedHolder(token, this.owner));
  }

  /** Every refused write matching the query, oldest first, fetched page by page: `for await (const r of ...)`. */
  async *auditRejections(query: AuditQuery = {}): AsyncGenerator<AuditRecord> {
    let afterId = query.afterId;
    for (;;) {
      const page = (await this.transport.call({ method: "GET", path: "/v1/audit/rejections", effect: "read",
        signal: query.signal, query: { resource: query.resource, lock: query.lock, since_ms: query.sinceMs,
          limit: query.pageSize ?? 100, after_id: afterId } })).body as { items: AuditRecord[]; next_after_id?: number | null };
      yield* page.items;
      if (page.next_after_id === undefined || page.next_after_id === null || page.items.length === 0) return;
      afterId = page.next_after_id;
    }
  }

  /** True when the gateway answers /readyz with 200 (Redis and Postgres reachable). */
  async ready(): Promise<boolean> {
    try {
      await this.transport.call({ method: "GET", path: "/readyz", effect: "read", retry: NO_RETRY });
      return true;
    } catch {
      return false;
    }
  }
}

/** Runs fn under a held lease or set and releases it; fn's error wins over the release's. */
async function run<L extends { release(): Promise<void> }, T>(lease: L, fn: (lease: L) => Promise<T>): Promise<T> {
  let result: T;
  try {
    result = await fn(lease);
  } catch (e) {
    await lease.release().catch(() => undefined);
    throw e;
  }
  await lease.release();
  return result;
}

export type { Row };
