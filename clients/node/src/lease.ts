// SPDX-License-Identifier: Apache-2.0
/**
 * Leases held through the gateway: a lock, a semaphore slot, or a lock set. Owns: acquiring with a
 * request_id that makes retries safe, giving back what an aborted acquire was granted, the lease's lost
 * state and its AbortSignal, explicit renew and release, and handing the lease's token to fenced writes.
 * Must not: schedule renewals or watch (keeper.ts does) or build write calls (writes.ts does).
 *
 * A lease is lost when the client learns that it no longer holds it: a renewal refused, or not answered
 * for a whole TTL; the watch reporting it released, expired or revoked; or a 410 answer to a write, renew
 * or release. From then on `lease.signal` is aborted (its reason a LeaseLostError), `lease.lostReason`
 * says why, nothing renews it, and its writes reject with LeaseLostError without being sent. The gateway's
 * fence check still guards the moment between the client's check and the write's arrival.
 */

import { randomBytes } from "node:crypto";

import { FencegateError, LeaseLostError, MaxHoldExceededError, ProblemError, UnreachableError, leaseLost }
  from "./errors.js";
import { Grant, Keeper, RenewCall, Watch } from "./keeper.js";
import { Call, NO_RETRY, RetryPolicy, Transport, segment } from "./transport.js";
import { CallOptions, Holder, PgTable, RedisKeys } from "./writes.js";

/** Options of an acquire; every member is optional. Durations go out in whole ms, rounded down (wholeMs). */
export interface LeaseOptions {
  /** Time to live in ms (default: the gateway's, 30000; lock sets always send it). */
  ttlMs?: number;
  /**
   * How long to wait in the FIFO queue, in ms (0: try once). Left out, the gateway waits as its
   * defaults.wait_ms says, and the client waits for the answer as long as that may be: up to an hour
   * (MAX_GATEWAY_WAIT_MS) on top of the timeout.
   */
  waitMs?: number;
  /** Longest hold, renewals included, in ms. */
  maxHoldMs?: number;
  /** Shown in status and audit records (default: the client's owner). */
  owner?: string;
  /** Makes the acquire idempotent (default: a fresh one, reused by retries). */
  requestId?: string;
  /** false: no background renewal nor watch (call renew() yourself). */
  renew?: boolean;
  /** false: renew in the background but do not watch. */
  watch?: boolean;
  /**
   * Aborting it ends the wait; the acquire then rejects with its reason once it has released any lease the
   * gateway granted as it went (see acquireCall).
   */
  signal?: AbortSignal;
}

/** The answer of a renewal: ttl_ms is the time to live granted, less than asked once the hold deadline
 * (hold_until_ms, the acquire time + max_hold_ms) cuts it. */
export interface RenewResult {
  fence?: bigint;
  ttl_ms?: number;
  expires_at_ms?: number;
  hold_until_ms?: number;
}

/** The shortest grant of a lock set's renewal: the set is valid as long as the first of its locks to end. */
function shortestGrant(answer: { locks?: Grant[] } | undefined): Grant | undefined {
  let shortest: Grant | undefined;
  for (const lock of answer?.locks ?? []) {
    if (shortest === undefined || (lock.ttl_ms ?? Infinity) < (shortest.ttl_ms ?? Infinity)) shortest = lock;
  }
  return shortest;
}

/** The longest wait_ms a gateway takes, and so the longest its defaults.wait_ms may be: an hour. */
export const MAX_GATEWAY_WAIT_MS = 3_600_000;

/**
 * How long the gateway may hold an acquire with this waitMs before it answers, added to the call's
 * timeout: without one, the gateway's defaults.wait_ms, which the client cannot know.
 */
function gatewayWaitMs(waitMs: number | undefined): number {
  return waitMs ?? MAX_GATEWAY_WAIT_MS;
}

export function newRequestId(): string {
  return "node-" + randomBytes(16).toString("hex");
}

/** The lost state of a lease; a lock set shares one among its locks. */
export class LostState {
  private readonly controller = new AbortController();
  reason: string | undefined;
  /** A release was asked for: nothing renews the lease and no write goes out through it. */
  releasing = false;
  /** The gateway answered the release (200, or 410: already over): it is not sent again. */
  released = false;
  keeper: Keeper | undefined;

  constructor(readonly name: string) {}

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get lost(): boolean {
    return this.controller.signal.aborted;
  }

  /** Records the loss once and stops the keeper. */
  mark(reason: string): void {
    if (this.lost) return;
    this.reason = reason;
    this.keeper?.stop();
    this.controller.abort(leaseLost(this.name, reason));
  }

  /**
   * Throws LeaseLostError when the lease is known lost, is being or was released, or (kept alive) outlived
   * what its last successful renewal granted.
   */
  check(): void {
    if (this.releasing) throw leaseLost(this.name, "released");
    const lapsed = this.keeper?.lapsed();
    if (lapsed) this.mark(lapsed);
    if (this.lost) throw leaseLost(this.name, this.reason ?? "lost");
  }

  /** Hears a refusal of a call made with the lease: a 410 or max_hold_exceeded ends it. */
  heard(error: unknown): void {
    if (error instanceof LeaseLostError) this.mark(error.reason || "lease_lost");
    else if (error instanceof MaxHoldExceededError) this.mark("max_hold_exceeded");
  }

  /**
   * Stops keeping the lease and blocks its writes from the first call on, then sends the release until the
   * gateway answers it: only a 200 or a 410 marks it done. Any other failure (an aborted signal, no answer
   * within the retry budget, a 503) leaves it to the next call, since the lease may still be held and
   * nothing renews it any more: a retry that skipped the release would leave the lock held for the rest of
   * its TTL. The gateway answers a repeated release 200 again. Rejects with LeaseLostError if the lease had
   * been lost, with the release's error only while the lease still counts as held.
   */
  async release(send: () => Promise<unknown>): Promise<void> {
    this.keeper?.stop();
    this.keeper = undefined;
    this.releasing = true;
    if (!this.released) {
      try {
        await send();
        this.released = true;
      } catch (e) {
        this.heard(e);
        if (e instanceof ProblemError && e.status === 410) this.released = true;
        else if (!this.lost) throw e;
      }
    }
    if (this.lost) throw leaseLost(this.name, this.reason ?? "lost");
  }

  holder(token: string, owner: string | undefined): Holder {
    return {
      owner,
      token: () => {
        this.check();
        return token;
      },
      refused: (error: ProblemError) => this.heard(error),
    };
  }

  /**
   * Starts keeping the lease alive. start: performance.now() when the acquire was sent; an acquire whose
   * answer took over a third of the TTL (a long wait in the queue) is renewed once at once, and validity
   * counts from that renewal and what it granted, so a fresh lease never looks nearly expired. Only a
   * renewal that succeeded moves the start: after a failed one (no answer, a 5xx) the lease is valid for
   * the TTL from the acquire's sending, as the gateway counts it, and the keeper tries again. That renewal
   * is part of the acquire its caller awaits: it keeps the process alive, unlike the keeper's.
   */
  async keep(transport: Transport, ttlMs: number, renew: RenewCall, watches: Watch[], start: number): Promise<void> {
    let grant: Grant | undefined;
    if (performance.now() - start > ttlMs / 3) {
      const sent = performance.now();
      try {
        grant = await renew(transport.timeoutMs, undefined, false);
        start = sent;
      } catch (e) {
        this.heard(e);
      }
    }
    if (!this.lost) this.keeper = new Keeper(transport, ttlMs, renew, watches, (reason) => this.mark(reason), start, grant);
  }
}

/**
 * A duration as the gateway takes it, in whole milliseconds: rounded down, as Go's durations go out and as
 * what is left of a wait is sent on a retry, so that the lease never asks for more than it was given.
 */
function wholeMs(ms: number): number {
  return Math.floor(ms);
}

function leaseBody(options: LeaseOptions, owner: string | undefined, requestId: string): Record<string, unknown> {
  const body: Record<string, unknown> = { request_id: requestId };
  if (options.ttlMs !== undefined) body.ttl_ms = wholeMs(options.ttlMs);
  if (options.waitMs !== undefined) body.wait_ms = wholeMs(options.waitMs);
  if (options.maxHoldMs !== undefined) body.max_hold_ms = wholeMs(options.maxHoldMs);
  if (owner) body.owner = owner;
  return body;
}

/** The acquire body for each try: a retry asks only for what is left of the wait. */
function acquireBody(body: Record<string, unknown>, waitMs: number | undefined): () => unknown {
  const deadline = performance.now() + (waitMs ?? 0);
  return () => {
    if (waitMs) body.wait_ms = Math.max(0, wholeMs(deadline - performance.now()));
    return body;
  };
}

/**
 * The retries of a give-back after an acquire that failed on its own (not aborted) after a try that got no
 * answer: a few, within a couple of seconds beyond the tries' timeouts, since the caller waits for them.
 */
const GIVE_BACK_RETRY: RetryPolicy = { attempts: 3, budgetMs: 2000, backoffMs: 200, maxBackoffMs: 1000 };

/**
 * Sends an acquire of body to path and resolves to the gateway's answer. An acquire may have been granted
 * without its caller hearing of it: the gateway keeps a grant whose client hung up for a retry of its
 * request_id, holding the lock until the lease's TTL ends, and it answers 503 to a grant whose reply from
 * Redis missed its deadline. So when signal aborts the acquire, or when it fails after a try that was sent
 * and got no answer, or with a 5xx answer to its last try (its retries ran out), the caller gets the error,
 * as it was, only once giveBack has asked for that grant and released it; an error whose grant could not
 * be given back (the gateway still does not answer, or answers a 5xx) carries the request_id in
 * leaseRequestId. After a 5xx to every try the give-back is tried once: the gateway has just answered the
 * whole retry policy, and waiting out its Retry-After again would only hold the error back. An acquire
 * whose last try was refused (a 4xx), or whose every try was refused a connection, is not given back. A
 * signal aborted before the call sends nothing.
 */
async function acquireCall(transport: Transport, path: string, body: Record<string, unknown>, options: LeaseOptions,
  release: (answer: any) => Call): Promise<any> {
  options.signal?.throwIfAborted();
  let unanswered = false;
  try {
    return granted(path, (await transport.call({ method: "POST", path, effect: "idempotent",
      body: acquireBody(body, options.waitMs), waitMs: gatewayWaitMs(options.waitMs), signal: options.signal,
      unanswered: () => { unanswered = true; } })).body);
  } catch (e) {
    const answered5xx = e instanceof ProblemError && e.status >= 500;
    if (options.signal?.aborted) {
      await giveBack(transport, path, body, release, NO_RETRY);
    } else if ((unanswered || answered5xx)
      && !await giveBack(transport, path, body, release, unanswered ? GIVE_BACK_RETRY : NO_RETRY)
      && e instanceof FencegateError) {
      e.leaseRequestId = body.request_id as string;
    }
    throw e;
  }
}

/** Whether value is a fence: a positive integer, exact as a bigint. */
function isFence(value: unknown): boolean {
  return typeof value === "bigint" ? value > 0n : Number.isSafeInteger(value) && (value as number) > 0;
}

/**
 * The answer of the acquire at path, if it is a grant: a non-empty token and a positive fence (for a lock
 * set, each of its locks with its lock name too). Anything else, a JSON object from something else at the
 * gateway's address, is no answer of the gateway's: an UnreachableError, sent, never a lease whose token
 * is undefined.
 */
function granted(path: string, answer: any): any {
  const grant = (item: any): boolean => item !== null && typeof item === "object" && typeof item.token === "string"
    && item.token !== "" && isFence(item.fence);
  const ok = path.endsWith("/v1/locksets/acquire")
    ? Array.isArray(answer?.locks) && answer.locks.length > 0
      && answer.locks.every((lock: any) => grant(lock) && typeof lock.lock === "string")
    : grant(answer);
  if (!ok) {
    throw new UnreachableError(`POST ${path}: no answer from the gateway: an answer without a token and a fence is no grant`,
      true);
  }
  return answer;
}

/**
 * Asks once more for the acquire of body at path, under its request_id and without waiting (wait_ms 0),
 * and releases what that answers: the lease the gateway granted as the caller went, if it did. A refusal
 * (409 lock_busy: not granted, and the place kept for a retry passes its turn on by itself; 410: over)
 * leaves nothing to do. Each call is tried as retry allows, within the client's timeout, without the
 * caller's signal (aborted already, if any). Resolves to true when nothing of this request is held any
 * more: the grant released, or the gateway's refusal; false when a call got no answer or a 5xx.
 */
async function giveBack(transport: Transport, path: string, body: Record<string, unknown>,
  release: (answer: any) => Call, retry: RetryPolicy): Promise<boolean> {
  try {
    const answer = granted(path, (await transport.call({ method: "POST", path, effect: "idempotent",
      body: { ...body, wait_ms: 0 }, retry })).body);
    await transport.call({ ...release(answer), retry });
    return true;
  } catch (e) {
    // A refusal: not granted, or over. Otherwise the grant may still hold.
    return e instanceof ProblemError && e.status < 500;
  }
}

/** What a held lease and a held lock set share: the lost state, seen through a signal and a reason. */
abstract class Held {
  protected readonly state: LostState;
  readonly requestId: string;
  /** acquire() was called, and did not fail. */
  private acquireCalled = false;

  constructor(stateName: string, requestId: string | undefined) {
    this.requestId = requestId ?? newRequestId();
    this.state = new LostState(stateName);
  }

  /** Aborted as soon as the client knows the lease is lost; its reason is a LeaseLostError. */
  get signal(): AbortSignal {
    return this.state.signal;
  }

  /** True once the client knows the lease is lost. */
  get lost(): boolean {
    return this.state.lost;
  }

  /** Why the lease was lost ("expired", "revoked", "released", "lease_lost", "unrenewed", "max_hold_exceeded", "taken over"). */
  get lostReason(): string | undefined {
    return this.state.reason;
  }

  /** Throws LeaseLostError if the lease is known to be lost or was released. */
  check(): void {
    this.state.check();
  }

  /**
   * Runs acquire, the one acquire of this lease: a call while one is under way or after one succeeded
   * rejects (a second keeper would renew what a release gave up); after one that failed, it may try again.
   */
  protected async acquireOnce<T>(acquire: () => Promise<T>): Promise<T> {
    if (this.acquireCalled) {
      throw new Error(`the lease on ${this.state.name} is already acquired, or being acquired: acquire a new one`);
    }
    this.acquireCalled = true;
    try {
      return await acquire();
    } catch (e) {
      this.acquireCalled = false;
      throw e;
    }
  }
}

/** A lease on a lock or on one slot of a semaphore, from client.lock() or client.semaphore(). */
export class Lease extends Held {
  token = "";
  /** The lease's fencing token: exact, as a bigint, since fences count up to 2^63 − 1. */
  fence = 0n;
  ttlMs = 0;
  /** By the gateway's clock, as of the last acquire or renewal. */
  expiresAtMs: number | undefined;
  constructor(private readonly transport: Transport, readonly kind: "lock" | "semaphore", readonly name: string,
    readonly owner: string | undefined, requestId: string | undefined) {
    super(name, requestId);
  }

  private get path(): string {
    return `/v1/${this.kind}s/${segment(this.name)}`;
  }

  /** Acquires (see Client.lock); resolves to the lease itself. A lease is acquired once. */
  acquire(options: LeaseOptions, limit?: number): Promise<this> {
    return this.acquireOnce(() => this.acquireNow(options, limit));
  }

  private async acquireNow(options: LeaseOptions, limit: number | undefined): Promise<this> {
    const body = leaseBody(options, this.owner, this.requestId);
    if (limit !== undefined) body.limit = limit;
    const sentAt = performance.now();
    const answer = await acquireCall(this.transport, this.path + "/acquire", body, options, (granted) =>
      ({ method: "POST", path: this.path + "/release", effect: "idempotent", body: { token: granted.token } }));
    this.token = answer.token;
    this.fence = answer.fence;
    this.ttlMs = answer.ttl_ms;
    this.expiresAtMs = answer.expires_at_ms;
    if (options.renew !== false) {
      const watches = options.watch === false ? [] : [{ path: this.path, fence: this.fence }];
      await this.state.keep(this.transport, this.ttlMs, (timeoutMs, signal, background) =>
        this.renewOnce(timeoutMs, signal, background), watches, sentAt);
    }
    return this;
  }

  private async renewOnce(timeoutMs: number, signal: AbortSignal | undefined, background: boolean): Promise<RenewResult> {
    const answer = (await this.transport.call({ method: "POST", path: this.path + "/renew", effect: "idempotent",
      body: { token: this.token, ttl_ms: this.ttlMs }, timeoutMs, retry: NO_RETRY, signal, background })).body;
    this.expiresAtMs = answer?.expires_at_ms ?? this.expiresAtMs;
    return answer;
  }

  /** Renews now (for leases acquired with renew: false); a refusal also marks the lease lost. */
  async renew(ttlMs?: number): Promise<RenewResult> {
    this.check();
    try {
      const answer = (await this.transport.call({ method: "POST", path: this.path + "/renew", effect: "idempotent",
        body: { token: this.token, ttl_ms: wholeMs(ttlMs ?? this.ttlMs) } })).body;
      this.expiresAtMs = answer?.expires_at_ms ?? this.expiresAtMs;
      return answer;
    } catch (e) {
      this.state.heard(e);
      throw e;
    }
  }

  /**
   * Stops keeping the lease alive and releases it; rejects with LeaseLostError if it had been lost. From the
   * first call on, nothing renews the lease and writes through it reject; when the release itself fails
   * (options.signal aborted, no answer, a 503) the lease may still be held until its TTL runs out: call
   * release() again, which sends it again, until it resolves or rejects with LeaseLostError.
   */
  release(options?: CallOptions): Promise<void> {
    return this.state.release(() => this.transport.call({ method: "POST", path: this.path + "/release",
      effect: "idempotent", body: { token: this.token }, signal: options?.signal }));
  }

  /** A configured Postgres table written with this lease's token. */
  pg(table: string): PgTable {
    return new PgTable(this.transport, table, this.state.holder(this.token, this.owner));
  }

  /** The keys under the configured Redis prefixes, written with this lease's token. */
  get redis(): RedisKeys {
    return new RedisKeys(this.transport, this.state.holder(this.token, this.owner));
  }
}

/** One lock of a held lock set: its own token and fence, for writes to that lock's resources. */
export class LockSetMember {
  constructor(private readonly transport: Transport, private readonly state: LostState, readonly name: string,
    readonly token: string, readonly fence: bigint, private readonly owner: string | undefined) {}

  pg(table: string): PgTable {
    return new PgTable(this.transport, table, this.state.holder(this.token, this.owner));
  }

  get redis(): RedisKeys {
    return new RedisKeys(this.transport, this.state.holder(this.token, this.owner));
  }
}

/** Leases on several locks, all or none, kept alive and released together, from client.lockSet(). */
export class LockSet extends Held {
  readonly members = new Map<string, LockSetMember>();
  ttlMs = 30000;

  constructor(private readonly transport: Transport, readonly names: string[], readonly owner: string | undefined,
    requestId: string | undefined) {
    super(names.join(","), requestId);
  }

  /** The lock name of the set. */
  member(name: string): LockSetMember {
    const m = this.members.get(name);
    if (!m) throw new RangeError(`${name} is not a lock of this set`);
    return m;
  }

  private get tokens(): string[] {
    return [...this.members.values()].map((m) => m.token);
  }

  /** Acquires every lock or none (see Client.lockSet); resolves to the set itself. A set is acquired once. */
  acquire(options: LeaseOptions): Promise<this> {
    return this.acquireOnce(() => this.acquireNow(options));
  }

  private async acquireNow(options: LeaseOptions): Promise<this> {
    this.ttlMs = wholeMs(options.ttlMs ?? 30000);
    const body = { ...leaseBody({ ...options, ttlMs: this.ttlMs }, this.owner, this.requestId), names: this.names };
    const sentAt = performance.now();
    const answer = await acquireCall(this.transport, "/v1/locksets/acquire", body, options, (granted) =>
      ({ method: "POST", path: "/v1/locksets/release", effect: "idempotent",
        body: { tokens: granted.locks.map((lock: { token: string }) => lock.token) } }));
    for (const item of answer.locks) {
      this.members.set(item.lock, new LockSetMember(this.transport, this.state, item.lock, item.token, item.fence, this.owner));
    }
    if (options.renew !== false) {
      const watches = options.watch === false ? []
        : [...this.members.values()].map((m) => ({ path: `/v1/locks/${segment(m.name)}`, fence: m.fence }));
      await this.state.keep(this.transport, this.ttlMs, async (timeoutMs, signal, background) =>
        shortestGrant((await this.transport.call({ method: "POST", path: "/v1/locksets/renew", effect: "idempotent",
          body: { tokens: this.tokens, ttl_ms: this.ttlMs }, timeoutMs, retry: NO_RETRY, signal, background })).body),
      watches, sentAt);
    }
    return this;
  }

  /** Renews every lock of the set now; a refusal marks the set lost. */
  async renew(ttlMs?: number): Promise<unknown> {
    this.check();
    try {
      return (await this.transport.call({ method: "POST", path: "/v1/locksets/renew", effect: "idempotent",
        body: { tokens: this.tokens, ttl_ms: wholeMs(ttlMs ?? this.ttlMs) } })).body;
    } catch (e) {
      this.state.heard(e);
      throw e;
    }
  }

  /**
   * Stops keeping the set alive and releases every lock; LeaseLostError if one had been lost. As
   * Lease.release, a release that failed is sent again by the next call.
   */
  release(options?: CallOptions): Promise<void> {
    return this.state.release(() => this.transport.call({ method: "POST", path: "/v1/locksets/release",
      effect: "idempotent", body: { tokens: this.tokens }, signal: options?.signal }));
  }
}
