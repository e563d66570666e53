// SPDX-License-Identifier: Apache-2.0
/**
 * Keeps a lease alive in the background and notices its loss: one renewal loop, and one watch loop per
 * watched lock or semaphore slot. Owns: when to renew, how long a lease counts as valid without a
 * successful renewal, and the long polls of the watch endpoint. Must not: release the lease (its owner
 * does, after stop()). Neither loop keeps the process alive.
 *
 * Renewal: every third of the TTL. A refusal (410 lease_lost, 409 max_hold_exceeded, 401, 403, ...) ends
 * the lease at once. No answer, or a 5xx, is tried again after a short pause until the lease would have run
 * out, counted from the moment the last successful renewal was sent; then the lease is lost ("unrenewed").
 *
 * Watch: GET <status path>?watch=true&fence=N&wait_ms=W answers as soon as the lease ends ("released",
 * "expired", "revoked"), so the loss is known within a round trip instead of at the next renewal. A gateway
 * without the endpoint answers the plain status at once (or 400): the watch then stops and renewals alone
 * detect the loss.
 */

import { ProblemError } from "./errors.js";
import { NO_RETRY, Transport } from "./transport.js";

/** Longest single watch poll (below the idle timeouts of common proxies). */
export const WATCH_WAIT_MS = 25000;
/** Shortest pause between renewals that got no answer. */
const RETRY_MIN_MS = 50;

/** Sends one renewal with a timeout (ms) and an abort signal. */
export type RenewCall = (timeoutMs: number, signal: AbortSignal) => Promise<unknown>;

/** A lease to watch: its status path and fence. */
export interface Watch {
  path: string;
  fence: number;
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
  private validUntil: number;

  /**
   * Renews every ttlMs/3 from start (performance.now() when the lease's validity began) and watches each
   * of watches, calling onLost once when the lease is lost.
   */
  constructor(private readonly transport: Transport, private readonly ttlMs: number, private readonly renew: RenewCall,
    watches: Watch[], private readonly onLost: (reason: string) => void, start: number) {
    this.validUntil = start + ttlMs;
    void this.renewLoop(start);
    for (const w of watches) void this.watchLoop(w);
  }

  /** Stops renewing and watching; in-flight calls are cut short. */
  stop(): void {
    this.stopper.abort(new Error("the keeper stopped"));
  }

  /** True once the lease has gone a full TTL without a successful renewal. */
  expired(): boolean {
    return performance.now() >= this.validUntil;
  }

  private lost(reason: string): void {
    if (this.stopper.signal.aborted) return;
    this.stop();
    this.onLost(reason);
  }

  private async renewLoop(start: number): Promise<void> {
    const signal = this.stopper.signal;
    let next = start + this.ttlMs / 3;
    while (await pause(next - performance.now(), signal)) {
      const now = performance.now();
      const left = this.validUntil - now;
      if (left <= 0) {
        this.lost("unrenewed");
        return;
      }
      try {
        await this.renew(Math.max(RETRY_MIN_MS, Math.min(this.transport.timeoutMs, left)), signal);
        this.validUntil = now + this.ttlMs;
        next = now + this.ttlMs / 3;
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
    while (!signal.aborted) {
      const started = performance.now();
      let status: any;
      try {
        status = (await this.transport.call({ method: "GET", path: w.path, effect: "read", retry: NO_RETRY, signal,
          background: true, waitMs: WATCH_WAIT_MS, query: { watch: true, fence: w.fence, wait_ms: WATCH_WAIT_MS } })).body;
      } catch (e) {
        if (signal.aborted) return;
        if (e instanceof ProblemError && e.status < 500) return; // no watch endpoint: renewals detect the loss
        await pause(1000, signal);
        continue;
      }
      if (status === null || typeof status !== "object" || typeof status.held !== "boolean") return;
      if (!status.held) {
        this.lost(typeof status.reason === "string" && status.reason ? status.reason : "not held");
        return;
      }
      if (typeof status.fence === "number" && status.fence !== w.fence) {
        this.lost("taken over");
        return;
      }
      if ("waiting" in status || performance.now() - started < WATCH_WAIT_MS / 2) return; // a plain status
    }
  }
}
