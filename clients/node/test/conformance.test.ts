// SPDX-License-Identifier: Apache-2.0
/**
 * The TypeScript client's runner of the conformance scenarios (clients/conformance/): it carries out each
 * step through this package's API (client.lock, lease.renew, lease.pg(...).put, the error classes and their
 * getters) and compares what happened with the step's expectation. Must not: speak HTTP to the gateway
 * itself, only to the proxy's request log. Run by tests/conformance/driver.py, which sets FG_CONF_*;
 * skipped without them.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { Client, Lease, LockSet, ProblemError } from "../src/index.js";

type Step = Record<string, any>;
interface Spec {
  settings: { timeout_ms: number; retry_attempts: number; retry_budget_ms: number };
  clients: Record<string, { url_env: string; key_env?: string; key?: string }>;
  scenarios: { name: string; steps: Step[] }[];
}

const specPath = process.env.FG_CONF_SCENARIOS;

/** A field of a refusal, read through the error classes' typed getters where they have one. */
function errorField(error: ProblemError, name: string): unknown {
  const typed: Record<string, string> = { presented_fence: "presentedFence", current_fence: "currentFence",
    retry_after: "retryAfter", waiting: "waiting", lock: "lock", resource: "resource", scope: "scope",
    reason: "reason", status: "status" };
  const getter = typed[name];
  return getter !== undefined && getter in error ? (error as any)[getter] : error.extra(name);
}

function member(value: any, path: string): unknown {
  for (const part of path.split(".")) value = value !== null && typeof value === "object" ? value[part] : undefined;
  return value;
}

/** The steps that step stands for: itself, or with copies N, one for each of N leases (the lease and the
 * name numbered, from 0). */
function each(step: Step): Step[] {
  if (step.copies === undefined) return [step];
  return Array.from({ length: step.copies as number }, (_, i) => {
    const { copies: _copies, ...copy } = step;
    return { ...copy, lease: `${step.lease}${i}`, ...(step.name !== undefined ? { name: `${step.name}-${i}` } : {}) };
  });
}

class Runner {
  readonly run = process.env.FG_CONF_RUN ?? "";
  readonly clients = new Map<string, Client>();
  leases = new Map<string, Lease | LockSet>();
  pending = new Map<string, Promise<void>>();

  constructor(readonly spec: Spec) {}

  client(name = "main"): Client {
    let c = this.clients.get(name);
    if (!c) {
      const s = this.spec.clients[name]!;
      const key = s.key_env ? process.env[s.key_env] ?? "" : s.key ?? "";
      c = new Client({ url: process.env[s.url_env]!, apiKey: key, timeoutMs: this.spec.settings.timeout_ms,
        retry: { attempts: this.spec.settings.retry_attempts, budgetMs: this.spec.settings.retry_budget_ms } });
      this.clients.set(name, c);
    }
    return c;
  }

  /** The step's value with {run} replaced and "$lease.fence" references resolved. */
  expand(value: any): any {
    if (typeof value === "string") {
      value = value.replaceAll("{run}", this.run);
      const ref = /^\$(\w+)\.(\w+)$/.exec(value);
      return ref ? (this.leases.get(ref[1]!) as any)[ref[2]!] : value;
    }
    if (Array.isArray(value)) return value.map((v) => this.expand(v));
    if (value !== null && typeof value === "object") {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, this.expand(v)]));
    }
    return value;
  }

  checkFields(step: Step, read: (name: string) => unknown, what: string): void {
    for (const [name, want] of Object.entries<any>(step.fields ?? {})) {
      const got = read(name);
      if (want === "$positive") {
        assert.ok((typeof got === "number" || typeof got === "bigint") && got > 0, `${what}: ${name} is ${got}, expected > 0`);
      } else assert.deepEqual(got, this.expand(want), `${what}: ${name}`);
    }
  }

  /** Runs call and checks its result or refusal against the step's expect, fields, min_ms, max_ms. */
  async outcome(step: Step, call: () => Promise<unknown>): Promise<void> {
    const expect = step.expect ?? "ok";
    const started = performance.now();
    let result: unknown;
    let error: unknown;
    try {
      result = await call();
    } catch (e) {
      error = e;
    }
    const elapsed = performance.now() - started;
    if (expect === "ok") {
      if (error !== undefined) throw new Error(`expected success, got ${error}`);
      this.checkFields(step, (name) => member(result, name), "answer");
    } else {
      if (!(error instanceof ProblemError)) throw new Error(`expected ${expect}, got ${error ?? JSON.stringify(result)}`);
      assert.equal(error.code, expect, `expected ${expect}, got ${error}`);
      this.checkFields(step, (name) => errorField(error as ProblemError, name), expect);
    }
    assert.ok(elapsed >= (step.min_ms ?? 0), `took ${elapsed.toFixed(0)} ms, expected at least ${step.min_ms} ms`);
    assert.ok(elapsed <= (step.max_ms ?? Infinity), `took ${elapsed.toFixed(0)} ms, expected at most ${step.max_ms} ms`);
  }

  lease(name: string): Lease {
    return this.leases.get(name) as Lease;
  }

  async step(step: Step): Promise<void> {
    const c = this.client(step.client);
    switch (step.op) {
      case "acquire": {
        const options = { ttlMs: step.ttl_ms, waitMs: step.wait_ms, owner: step.owner, renew: step.renew };
        const acquire = async (): Promise<unknown> => {
          let held: Lease | LockSet;
          if (step.kind === "lockset") held = await c.lockSet(this.expand(step.names), options);
          else if (step.kind === "semaphore") held = await c.semaphore(this.expand(step.name), step.limit, options);
          else held = await c.lock(this.expand(step.name), options);
          this.leases.set(step.lease, held);
          return held instanceof Lease ? { fence: held.fence, ttl_ms: held.ttlMs } : {};
        };
        if (step.background) {
          const pending = this.outcome(step, acquire);
          pending.catch(() => undefined);
          this.pending.set(step.lease, pending);
          return;
        }
        return this.outcome(step, acquire);
      }
      case "join": {
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`the acquire of ${step.lease} did not end within ${step.max_ms} ms`)),
            step.max_ms);
        });
        try {
          return await Promise.race([this.pending.get(step.lease)!, late]);
        } finally {
          clearTimeout(timer);
        }
      }
      case "release":
        return this.outcome(step, () => this.leases.get(step.lease)!.release());
      case "renew":
        return this.outcome(step, () => this.leases.get(step.lease)!.renew());
      case "write": {
        const held = this.leases.get(step.lease)!;
        const writer = held instanceof LockSet ? held.member(this.expand(step.member)) : held;
        const key = this.expand(step.key);
        return this.outcome(step, () => step.store === "pg"
          ? writer.pg(step.table).put(key, this.expand(step.row))
          : writer.redis.put(key, this.expand(step.value)));
      }
      case "read": {
        const key = this.expand(step.key);
        return this.outcome(step, () => step.store === "pg" ? c.pg(step.table).get(key) : c.redis().get(key));
      }
      case "revoke":
        return this.outcome(step, async () => ({ revoked_fence: await c.revokeLock(this.expand(step.name), "conformance") }));
      case "status":
        for (const deadline = performance.now() + (step.within_ms ?? 0); ; await new Promise((r) => setTimeout(r, 50))) {
          try {
            return await this.outcome(step, () => step.kind === "semaphore"
              ? c.semaphoreStatus(this.expand(step.name)) : c.lockStatus(this.expand(step.name)));
          } catch (e) {
            if (performance.now() >= deadline) throw e;
          }
        }
      case "lost": {
        const held = this.leases.get(step.lease)!;
        if (!held.lost) {
          await new Promise<void>((resolve, reject) => {
            const timer = setTimeout(() => reject(new Error(`lease ${step.lease} not lost within ${step.within_ms} ms`)),
              step.within_ms);
            held.signal.addEventListener("abort", () => {
              clearTimeout(timer);
              resolve();
            }, { once: true });
          });
        }
        assert.ok(step.reason.includes(held.lostReason), `lost for ${held.lostReason}, expected one of ${step.reason}`);
        return;
      }
      case "held":
        assert.ok(!this.leases.get(step.lease)!.lost, `lease ${step.lease} is lost (${this.leases.get(step.lease)!.lostReason})`);
        return;
      case "sleep":
        await new Promise((resolve) => setTimeout(resolve, step.ms));
        return;
      case "assert":
        if (step.lt) {
          const [left, right] = this.expand(step.lt);
          assert.ok(left < right, `expected ${step.lt[0]} (${left}) < ${step.lt[1]} (${right})`);
        }
        if (step.eq) assert.deepEqual(...(this.expand(step.eq) as [unknown, unknown]));
        return;
      case "requests": {
        const url = process.env[this.spec.clients[step.via ?? "main"]!.url_env] + "/_proxy/requests";
        const seen = await (await fetch(url)).json() as { method: string; path: string; body: any }[];
        const path = this.expand(step.path_contains);
        const mine = seen.filter((r) => r.method === step.method && r.path.includes(path));
        assert.equal(mine.length, step.count, `the gateway got ${mine.length} ${step.method} requests on ${path}`);
        for (const name of step.same ?? []) {
          const values = new Set(mine.map((r) => JSON.stringify(r.body?.[name] ?? null)));
          assert.ok(values.size === 1 && !values.has("null"), `the requests on ${path} carried different or no ${name}`);
        }
        for (const [name, value] of Object.entries(step.last ?? {})) {
          assert.deepEqual(mine[mine.length - 1]?.body?.[name], value, `the last request on ${path} carried ${name}`);
        }
        return;
      }
      default:
        throw new Error(`unknown op ${step.op}`);
    }
  }
}

test("conformance scenarios", { skip: specPath ? false : "FG_CONF_SCENARIOS is not set: run through tests/conformance/driver.py" },
  async (t) => {
    const spec = JSON.parse(readFileSync(specPath!, "utf8")) as Spec;
    const only = new RegExp(process.env.FG_CONF_ONLY ?? "");
    const runner = new Runner(spec);
    let passed = 0;
    let failed = 0;
    for (const scenario of spec.scenarios.filter((s) => only.test(s.name))) {
      await t.test(scenario.name, async () => {
        runner.leases = new Map();
        runner.pending = new Map();
        try {
          for (const [i, step] of scenario.steps.entries()) {
            for (const one of each(step)) {
              try {
                await runner.step(one);
              } catch (e) {
                failed++;
                throw new Error(`step ${i + 1} (${one.op} ${one.lease ?? one.name ?? ""}): ${(e as Error).message}`);
              }
            }
          }
          passed++;
        } finally {
          for (const held of runner.leases.values()) await held.release().catch(() => undefined);
        }
      });
    }
    for (const c of runner.clients.values()) c.close();
    console.log(`${passed} passed, ${failed} failed`);
  });
