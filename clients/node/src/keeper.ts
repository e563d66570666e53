// SPDX-License-Identifier: Apache-2.0
/**
 * Keeps a lease alive in the background and notices its loss: one renewal loop, and one watch loop per
 * watched lock or semaphore slot. Owns: when to renew, how long a lease counts as valid without a
 * successful renewal, and the long polls of the watch endpoint. Must not: release the lease (its owner
 * does, after stop()). Neither loop keeps the process alive.
 *
 * Renewal: every third of the TTL. A renewal is valid for the ttl_ms it answers, which is less than the TTL
 * asked once the hold deadline (acquire time + max_hold_ms) cuts it, counted from the moment it was sent;
 * the next one goes a third of that later. A renewal whose expiry reached the hold deadline is the last: no
 * renewal can move it, and the lease is lost ("max_hold_exceeded") when that validity runs out. A refusal
 * (410 lease_lost, 409 max_hold_exceeded, 401, 403, ...) ends the lease at once. No answer, or a 5xx, is
 * tried again after a short pause until the lease would have run out, counted from the moment the last
 * successful renewal (or the acquire, before any) was sent; then the lease is lost ("unrenewed").
 *
 * Watch: GET <status path>?watch=true&fence=N&wait_ms=W answers as soon as the lease ends ("released",
 * "expired", "revoked"), so the loss is known within a round trip instead of at the next renewal. A gateway
 * without the endpoint answers the plain status at once (or 400): the watch then stops and renewals alone
 * detect the loss. A poll that gets no answer, a 5xx, or 429 too_many_waiters (the API key's quota of parked
 * waits and watches is full for now) is repeated after Retry-After when the gateway gives one, else after a
 * pause that doubles from WATCH_RETRY_MS up to WATCH_WAIT_MS.
 */

import { ProblemError } from "./errors.js";
import { NO_RETRY, Transport } from "./transport.js";

/** Longest single watch poll (below the idle timeouts of common proxies). */
export const WATCH_WAIT_MS = 25000;
/**
 * First pause before polling again after a watch poll that got no answer, a 5xx or a 429 without
 * Retry-After; it doubles with each such poll in a row, up to WATCH_WAIT_MS.
 */
const WATCH_RETRY_MS = 1000;

/** The pause after the failures-th failed watch poll in a row: its Retry-After (seconds) if any, else a backoff. */
function watchPauseMs(failures: number, retryAfterS: number | undefined): number {
  if (retryAfterS !== undefined && retryAfterS > 0) return retryAfterS * 1000;
  return Math.min(WATCH_WAIT_MS, WATCH_RETRY_MS * 2 ** (failures - 1));
}

/** Shortest pause between renewals that got no answer. */
const RETRY_MIN_MS = 50;

/** What a renewal granted: the time to live (less than asked once the hold deadline cuts it) and, by the
 * gateway's clock, the new expiry and the hold deadline. */
export interface Grant {
  ttl_ms?: number;
  expires_at_ms?: number;
  hold_until_ms?: number;
}

/**
 * Sends one renewal with a timeout (ms) and an abort signal; resolves to what it granted. background: the
 * keeper's own renewal, which must not keep the process alive (false for one a caller awaits).
 */
export type RenewCall = (timeoutMs: number, signal: AbortSignal | undefined, background: boolean) =>
  Promise<Grant | undefined>;

/** A lease to watch: its status path and fence. */
export interface Watch {
  path: string;
  fence: bigint;
}

function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve(false);
      return;
    }
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve(true);
    }, Math.max(0, ms));
    timer.unref();
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

export class Keeper {
  private readonly stopper = new AbortController();
  private validUntil = 0;
  /** The last grant reached the hold deadline: nothing renews past validUntil. */
  private final = false;

  /**
   * Keeps a lease whose validity began at start (performance.now()): for grant, what the renewal sent then
   * granted, or for the whole TTL without one (the acquire's own). Renews a third of the granted time later
   * and watches each of watches, calling onLost once when the lease is lost.
   */
  constructor(private readonly transport: Transport, private readonly ttlMs: number, private readonly renew: RenewCall,
    watches: Watch[], private readonly onLost: (reason: string) => void, start: number, grant?: Grant) {
    void this.renewLoop(this.renewed(start, grant));
    for (const w of watches) void this.watchLoop(w);
  }

  /**
   * Takes what the renewal sent at sent granted and answers when to renew next. The lease is valid for the
   * ttl_ms granted counted from the sending, which is never later than the gateway's expiry; an answer
   * without ttl_ms (an older gateway) counts as the TTL asked. A grant that reached the hold deadline is
   * final: the next wake-up is the end of its validity.
   */
  private renewed(sent: number, grant: Grant | undefined): number {
    const granted = typeof grant?.ttl_ms === "number" && grant.ttl_ms > 0 ? grant.ttl_ms : this.ttlMs;
    this.final = typeof grant?.hold_until_ms === "number" && typeof grant.expires_at_ms === "number"
      && grant.expires_at_ms >= grant.hold_until_ms;
    this.validUntil = sent + granted;
    return this.final ? this.validUntil : sent + granted / 3;
  }

  /** Stops renewing and watching; in-flight calls are cut short. */
  stop(): void {
    this.stopper.abort(new Error("the keeper stopped"));
  }

  /**
   * Why the lease counts as lost once it outlived what its last successful renewal granted
   * ("max_hold_exceeded" after a final grant, else "unrenewed"), or undefined while it is valid.
   */
  lapsed(now = performance.now()): string | undefined {
    if (now < this.validUntil) return undefined;
    return this.final ? "max_hold_exceeded" : "unrenewed";
  }

  private lost(reason: string): void {
    if (this.stopper.signal.aborted) return;
    this.stop();
    this.onLost(reason);
  }

  private async renewLoop(next: number): Promise<void> {
    const signal = this.stopper.signal;
    while (await pause(next - performance.now(), signal)) {
      const now = performance.now();
      // After a final grant the wake-up is its end, and nothing can extend it: a timer that fires a
      // millisecond early (setTimeout counts whole milliseconds on the loop's clock) must not send a
      // renewal, which the gateway would answer for a lease that ended meanwhile.
      const lapsed = this.final ? "max_hold_exceeded" : this.lapsed(now);
      if (lapsed) {
        this.lost(lapsed);
        return;
      }
      try {
        const left = this.validUntil - now;
        const grant = await this.renew(Math.max(RETRY_MIN_MS, Math.min(this.transport.timeoutMs, left)), signal, true);
        next = this.renewed(now, grant);
        continue;
      } catch (e) {
        if (signal.aborted) return;
        if (e instanceof ProblemError && e.status < 500) {
          const reason = e.extra("reason");
          this.lost(typeof reason === "string" && reason ? reason : e.code);
          return;
        }
      }
      next = performance.now() + Math.max(RETRY_MIN_MS, Math.min(1000, (this.validUntil - performance.now()) / 4));
    }
  }

  private async watchLoop(w: Watch): Promise<void> {
    const signal = this.stopper.signal;
    let failures = 0;
    while (!signal.aborted) {
      const started = performance.now();
      let status: any;
      try {
        status = (await this.transport.call({ method: "GET", path: w.path, effect: "read", retry: NO_RETRY, signal,
          background: true, waitMs: WATCH_WAIT_MS, query: { watch: true, fence: w.fence, wait_ms: WATCH_WAIT_MS } })).body;
      } catch (e) {
        if (signal.aborted) return;
        // Another refusal than 429 (the key's quota, full for now): no watch endpoint; renewals detect the loss.
        if (e instanceof ProblemError && e.status < 500 && e.status !== 429) return;
        failures++;
        await pause(watchPauseMs(failures, e instanceof ProblemError ? e.retryAfter : undefined), signal);
        continue;
      }
      failures = 0;
      if (status === null || typeof status !== "object" || typeof status.held !== "boolean") return;
      if (!status.held) {
        this.lost(typeof status.reason === "string" && status.reason ? status.reason : "not held");
        return;
      }
      if (typeof status.fence === "bigint" && status.fence !== w.fence) { // exact: fences pass 2^53
        this.lost("taken over");
        return;
      }
      if ("waiting" in status || performance.now() - started < WATCH_WAIT_MS / 2) return; // a plain status
    }
  }
}
