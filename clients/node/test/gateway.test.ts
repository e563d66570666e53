// SPDX-License-Identifier: Apache-2.0
/**
 * The TypeScript client against a real gateway (tests/conformance/driver.py sets FG_CONF_*; skipped
 * without them): what the conformance scenarios do not cover, namely AbortSignals that end waits,
 * withLock's lease.signal on loss, every kind of fenced write, batches, Prefer: return=minimal, audit
 * paging, and faults between the client and the gateway (through a proxy of the test's own).
 */

import assert from "node:assert/strict";
import * as http from "node:http";
import { AddressInfo } from "node:net";
import { TestContext, test } from "node:test";

import { BackendUnavailableError, Client, ConflictError, FencegateError, Lease, LeaseLostError, LeaseOptions,
  NotFoundError, OutcomeUnknownError, StaleFenceError, UnreachableError } from "../src/index.js";

const skip = process.env.FG_CONF_URL ? false : "FG_CONF_URL is not set: run through tests/conformance/driver.py";

function client(direct = false): Client {
  return new Client({ url: direct ? process.env.FG_CONF_DIRECT_URL! : process.env.FG_CONF_URL!,
    apiKey: process.env.FG_CONF_ADMIN_KEY!, owner: "node-tests", timeoutMs: 5000 });
}

const unique = (prefix: string): string => `${prefix}-${Date.now()}-${Math.floor(Math.random() * 1e6)}`;

/** A fresh lock whose first lease, old (200 ms, not renewed), has expired, and a fresh key under app:. */
async function expiredLease(c: Client, prefix: string): Promise<{ name: string; key: string; old: Lease }> {
  const name = unique(`node:${prefix}`);
  const key = "app:" + unique(`node-${prefix}`);
  const old = await c.lock(name, { ttlMs: 200, renew: false });
  await new Promise((resolve) => setTimeout(resolve, 400));
  return { name, key, old };
}

test("aborting the signal ends a wait, and its kept place holds nobody up", { skip }, async () => {
  const c = client(true); // the proxy would keep the aborted wait's upstream connection open
  const name = unique("node:abort");
  const held = await c.lock(name, { ttlMs: 5000 });
  const started = performance.now();
  await assert.rejects(c.lock(name, { waitMs: 10000, signal: AbortSignal.timeout(300) }), { name: "TimeoutError" });
  assert.ok(performance.now() - started < 5000, "the abort did not end the 10 s wait"); // room for a loaded machine
  // The gateway keeps the place of a request_id for a retry; its turn goes on at once when nobody retried.
  // (A release before the gateway saw the hang-up, within milliseconds, would hand the lock to the wait:
  // the tests below cover that grant, which the client gives back.)
  await new Promise((resolve) => setTimeout(resolve, 500));
  await held.release();
  for (let i = 0; ; i++) {
    const status = await c.lockStatus(name);
    if (!status.held && status.waiting === 0) break;
    assert.ok(i < 60, `the aborted waiter's place held the lock up: held ${status.held}, waiting ${status.waiting}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  c.close();
});

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/** A kind of lease: how to take it on name, how many wait for it, and whether anybody holds it. */
interface Kind {
  take: (c: Client, name: string, options: LeaseOptions) => Promise<{ release(): Promise<void> }>;
  waiting: (c: Client, name: string) => Promise<number>;
  held: (c: Client, name: string) => Promise<boolean>;
}

const KINDS: Record<string, Kind> = {
  lock: { take: (c, name, options) => c.lock(name, options),
    waiting: async (c, name) => (await c.lockStatus(name)).waiting,
    held: async (c, name) => (await c.lockStatus(name)).held },
  semaphore: { take: (c, name, options) => c.semaphore(name, 1, options),
    waiting: async (c, name) => (await c.semaphoreStatus(name)).waiting,
    held: async (c, name) => (await c.semaphoreStatus(name)).holders > 0 },
  lockset: { take: (c, name, options) => c.lockSet([name, name + "-b"], options),
    waiting: async (c, name) => (await c.lockStatus(name)).waiting,
    held: async (c, name) => (await c.lockStatus(name)).held || (await c.lockStatus(name + "-b")).held },
};

/**
 * Takes name as kind through holder, queues an acquire of it through waiter with signal, releases the
 * holder's lease and then aborts signal; resolves once that acquire settled, the lease it got (if its
 * answer came first) released.
 */
async function abortAsGranted(kind: Kind, holder: Client, waiter: Client, name: string): Promise<void> {
  const held = await kind.take(holder, name, { ttlMs: 30000, waitMs: 0, watch: false });
  const controller = new AbortController();
  const waiting = kind.take(waiter, name, { ttlMs: 30000, waitMs: 10000, signal: controller.signal })
    .then((lease) => lease.release(), (e: unknown) => assert.equal(e, controller.signal.reason));
  for (let i = 0; (await kind.waiting(holder, name)) === 0; i++) {
    assert.ok(i < 100, "the acquire did not queue");
    await sleep(20);
  }
  await held.release();
  controller.abort(new Error("gave up"));
  await waiting;
}

/** Whether somebody still holds name (as kind) a second on: the gateway hands a place kept for a retry on
 * about 200 ms after its turn came. */
async function stillHeld(kind: Kind, c: Client, name: string): Promise<boolean> {
  for (const deadline = performance.now() + 1000; await kind.held(c, name); await sleep(50)) {
    if (performance.now() > deadline) return true;
  }
  return false;
}

test("an acquire aborted after the gateway granted it leaves no lease behind", { skip }, async () => {
  // The driver's proxy passes the answer to a waiting acquire of a "lateanswer" name on only after 2 s: the
  // holder's release grants the wait at the gateway, then the signal aborts before the client heard of it.
  // The gateway holds the grant for the request_id until its 30 s TTL; the client must ask for it again and
  // release it before lock() rejects. Broken variant caught: lock(), semaphore() and lockSet() rejected
  // with the abort's reason and the lease nobody had held the lock or slot for 30 s.
  const proxied = client();
  const direct = client(true);
  const leaked = [];
  for (const [name, kind] of Object.entries(KINDS)) {
    const resource = unique(`node:lateanswer-${name}`);
    await abortAsGranted(kind, direct, proxied, resource);
    if (await stillHeld(kind, direct, resource)) leaked.push(name);
  }
  assert.deepEqual(leaked, [], "held by the lease of the aborted acquire");
  proxied.close();
  direct.close();
});

test("an acquire aborted right after the release that grants it leaves no lease behind", { skip }, async () => {
  // As above, straight to the gateway: the abort races the grant's answer, so the gateway may keep the grant
  // for a retry (the client hung up as it was granted), or the client may hear the grant first.
  const c = client(true);
  const leaked = [];
  for (let i = 0; i < 10; i++) {
    const name = unique("node:abortrace");
    await abortAsGranted(KINDS.lock!, c, c, name);
    if (await stillHeld(KINDS.lock!, c, name)) leaked.push(i);
  }
  assert.deepEqual(leaked, [], "tries whose lock was held by the lease of the aborted acquire");
  c.close();
});

test("a release that failed is sent by the next release, for a lock and a lock set", { skip }, async () => {
  // The first release's signal is aborted, so it never leaves: the lock stays held at the gateway, and writes
  // through the lease reject at once; the next release() sends it and frees the lock. Broken variant caught:
  // the first call marked the lease released before sending, so the second resolved without sending and
  // lockStatus still showed the lock held, for the rest of its TTL with nothing renewing it.
  const c = client();
  const name = unique("node:rerelease");
  const lease = await c.lock(name, { ttlMs: 30000 });
  await assert.rejects(lease.release({ signal: AbortSignal.abort() }), { name: "AbortError" });
  await assert.rejects(lease.redis.put("app:" + name, "v"), LeaseLostError);
  assert.equal((await c.lockStatus(name)).held, true, "the release with an aborted signal was sent");
  await lease.release();
  assert.equal((await c.lockStatus(name)).held, false, "the second release did not free the lock");

  const names = [unique("node:rerelease-a"), unique("node:rerelease-b")];
  const set = await c.lockSet(names, { ttlMs: 30000 });
  await assert.rejects(set.release({ signal: AbortSignal.abort() }), { name: "AbortError" });
  await set.release();
  for (const n of names) assert.equal((await c.lockStatus(n)).held, false, `${n} is held after the second release`);
  c.close();
});

test("an owner beyond ASCII writes, and reads back as itself from the audit trail", { skip }, async () => {
  // Broken variant caught: Fence-Owner went out as Latin-1; "billing-ü" was refused 400 invalid_field
  // (not printable UTF-8) and "账单-7" threw TypeError: Invalid character in header content.
  const c = client();
  const { name, key, old } = await expiredLease(c, "owner");
  const owners = ["billing-ü", "账单-7"];
  const writers = owners.map((owner) => new Client({ url: process.env.FG_CONF_URL!, apiKey: process.env.FG_CONF_ADMIN_KEY!,
    owner, timeoutMs: 5000 }));
  await c.withLock(name, async (lease) => {
    for (const writer of writers) assert.equal((await writer.redis(lease.token).put(key, "new")).applied, true);
  }, { ttlMs: 5000 });
  for (const writer of writers) {
    await assert.rejects(writer.redis(old.token).put(key, "old"), StaleFenceError);
    writer.close();
  }
  let seen: (string | null)[] = [];
  for (const deadline = Date.now() + 5000; seen.length < 2 && Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
    seen = [];
    for await (const record of c.auditRejections({ resource: "redis:" + key })) seen.push(record.owner);
  }
  assert.deepEqual(seen, owners);
  c.close();
});

test("withLock aborts lease.signal on a revoke and rejects with LeaseLostError", { skip }, async () => {
  const c = client();
  const name = unique("node:withlock");
  await assert.rejects(c.withLock(name, async (lease) => {
    await c.revokeLock(name, "test");
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("not aborted within 3 s of the revoke")), 3000);
      lease.signal.addEventListener("abort", () => {
        clearTimeout(timer);
        resolve();
      });
    });
    assert.ok(lease.signal.reason instanceof LeaseLostError);
  }, { ttlMs: 30000 }), (e: unknown) => e instanceof LeaseLostError && e.reason === "revoked");
  c.close();
});

test("fenced writes of every kind", { skip }, async () => {
  const c = client();
  const key = unique("node-row");
  await c.withLock(unique("node:writes"), async (lease) => {
    const invoices = lease.pg("invoices");
    const inserted = await invoices.insert({ id: key, status: "open", amount_cents: 100 });
    assert.equal(inserted.row?.status, "open");
    assert.equal(inserted.fence, lease.fence);
    await assert.rejects(invoices.insert({ id: key }), ConflictError);
    assert.equal((await invoices.patch(key, { status: "paid" })).row?.status, "paid");
    const batch = await invoices.batch([{ op: "patch", key, set: { note: "batched" } },
      { op: "put", key: key + "-2", row: { status: "open" } }]);
    assert.equal(batch.results?.length, 2);
    assert.deepEqual(await invoices.returnMinimal().patch(key, { note: "minimal" }), { applied: true, minimal: true });
    await lease.redis.put("app:" + key, "v1");
    assert.equal((await lease.redis.patch("app:" + key + ":h", { a: "1" })).fields?.a, "1");
    await lease.redis.delete("app:" + key);
    await assert.rejects(invoices.delete(key + "-none"), NotFoundError);
  }, { ttlMs: 5000 });
  const row = await c.pg("invoices").get(key);
  assert.equal(row.row?.status, "paid");
  assert.equal(row.row?.note, "minimal");
  c.close();
});

test("audit paging", { skip }, async () => {
  const c = client();
  const { name, key, old } = await expiredLease(c, "audit");
  await c.withLock(name, (lease) => lease.redis.put(key, "new"), { ttlMs: 5000 });
  for (let i = 0; i < 3; i++) {
    await assert.rejects(old.redis.put(key, "old"),
      (e: unknown) => e instanceof StaleFenceError && e.presentedFence === old.fence && e.resource === "redis:" + key);
  }
  // Audit records are written after the refusal is answered: read until all three are there.
  let records = [];
  for (const deadline = Date.now() + 5000; ; await new Promise((resolve) => setTimeout(resolve, 50))) {
    records = [];
    for await (const record of c.auditRejections({ resource: "redis:" + key, pageSize: 2 })) records.push(record);
    if (records.length >= 3 || Date.now() > deadline) break;
  }
  assert.equal(records.length, 3);
  assert.ok(records.every((r) => r.presented_fence === old.fence && r.reason));
  c.close();
});

test("a renewal cut by max_hold counts only up to the hold deadline", { skip }, async () => {
  // A 3 s lease whose max_hold is 3.3 s: its first renewal, at about 1 s, is granted only up to the hold
  // deadline; the client must report the lease lost by then (plus a margin for a loaded machine), not a
  // whole TTL after the renewal. The watch is off, so that only the client's own reckoning can tell.
  // Broken variant caught: the keeper counting every renewal as a full TTL held the lease valid until
  // about 4 s (check() passed at 3.8 s while the gateway had ended the lease at 3.3 s).
  const c = client(true);
  const sent = performance.now();
  const lease = await c.lock(unique("node:maxhold"), { ttlMs: 3000, maxHoldMs: 3300, watch: false });
  await sleep(sent + 2000 - performance.now()); // renewed once, and still valid
  lease.check();
  const deadline = sent + 3300 + 500;
  while (!lease.lost && performance.now() < deadline) await sleep(20);
  assert.throws(() => lease.check(), (e: unknown) => e instanceof LeaseLostError && e.reason === "max_hold_exceeded",
    `${Math.round(performance.now() - sent)} ms after the acquire, past the hold deadline`);
  await lease.release().catch(() => undefined);
  c.close();
});

/** A request as the test's proxy saw it: method, path (percent-decoded), JSON body, and what the rule did. */
interface Proxied { method: string; path: string; body: any; action: string }

/**
 * A proxy in front of the gateway (FG_CONF_DIRECT_URL) for the test t: rule decides, for each request, to
 * "forward" it, to "swallow" its answer (forward it, let the gateway act, and never answer the client), to
 * answer 503 backend_unavailable with Retry-After: 1 itself ("refuse503"), or to forward it and answer that
 * 503 in place of the gateway's answer ("forward503", as a gateway whose Redis reply missed its deadline
 * would). seen lists the requests in order. The proxy and its connections end with the test.
 */
async function faultProxy(t: TestContext, rule: (r: Proxied) => string): Promise<{ url: string; seen: Proxied[] }> {
  const upstream = new URL(process.env.FG_CONF_DIRECT_URL!);
  const seen: Proxied[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks);
      const r: Proxied = { method: req.method ?? "", path: decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname),
        body: raw.length ? JSON.parse(raw.toString("utf8")) : undefined, action: "" };
      r.action = rule(r);
      seen.push(r);
      const refuse = (): void => {
        res.writeHead(503, { "Content-Type": "application/problem+json", "Retry-After": "1" })
          .end(`{"type":"/problems/backend_unavailable","status":503,"detail":"injected by the test proxy"}`);
      };
      if (r.action === "refuse503") {
        refuse();
        return;
      }
      const headers = { ...req.headers };
      delete headers.host;
      delete headers.connection;
      const forward = http.request({ hostname: upstream.hostname, port: upstream.port, method: req.method, path: req.url,
        headers }, (answer) => {
        const body: Buffer[] = [];
        answer.on("data", (c: Buffer) => body.push(c));
        answer.on("end", () => {
          if (r.action === "swallow") return; // the gateway acted; the client hears nothing
          if (r.action === "forward503") {
            refuse();
            return;
          }
          const out = { ...answer.headers };
          delete out.connection;
          delete out["transfer-encoding"];
          res.writeHead(answer.statusCode ?? 502, out).end(Buffer.concat(body));
        });
      });
      forward.on("error", () => req.socket.destroy());
      forward.end(raw);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

function clientAt(url: string, options: { timeoutMs?: number; retry?: { attempts: number } } = {}): Client {
  return new Client({ url, apiKey: process.env.FG_CONF_ADMIN_KEY!, owner: "node-tests", timeoutMs: 5000, ...options });
}

test("a write retried after its lease is known lost is not sent again", { skip }, async (t) => {
  // A holds a lock with ttl 1 s and max_hold 1.5 s through a proxy that answers A's first three PATCHes
  // with 503 and Retry-After: 1, so the write is retried at about 1, 2 and 3 s. The client knows the lease
  // lost (max_hold_exceeded) at 1.5 s, and B takes the lock. The retries after that must not go out: the
  // write rejects with OutcomeUnknownError (an earlier try may have been applied), its last error a
  // LeaseLostError. Failed before the fix: the holder was checked once, before the first try; the fourth try
  // went out after B had the lock, was applied with A's older fence, and the write resolved.
  const { url, seen } = await faultProxy(t, ({ method }) =>
    method === "PATCH" && seen.filter((r) => r.method === "PATCH").length < 3 ? "refuse503" : "forward");
  const a = clientAt(url);
  const direct = client(true);
  t.after(() => {
    a.close();
    direct.close();
  });
  const name = unique("node:retrylost");
  const key = unique("node-retrylost");
  await direct.withLock(name, (lease) => lease.pg("invoices").insert({ id: key, status: "open" }), { ttlMs: 5000 });
  const lease = await a.lock(name, { ttlMs: 1000, maxHoldMs: 1500, watch: false });
  const write = lease.pg("invoices").patch(key, { status: "from A" }).then(() => "applied", (e: unknown) => e);
  while (!lease.lost) await sleep(20);
  assert.equal(lease.lostReason, "max_hold_exceeded");
  const b = await direct.lock(name, { ttlMs: 10000, waitMs: 5000 });
  t.after(() => b.release().catch(() => undefined));
  const outcome = await write;
  assert.ok(outcome instanceof OutcomeUnknownError && outcome.earlier instanceof BackendUnavailableError
    && outcome.last instanceof LeaseLostError, `the write ended with ${outcome}`);
  assert.equal(seen.filter((r) => r.method === "PATCH" && r.action === "forward").length, 0,
    "a try went out after the lease was lost");
  assert.equal((await direct.pg("invoices").get(key)).row?.status, "open");
});

test("a write whose retry its lease's release cut short leaves the lease released, not lost", { skip }, async (t) => {
  // The proxy answers the first PATCH 503 with Retry-After: 1; the lease is released while the write waits
  // to try again. The retry does not go out (the lease is released), and the write rejects with
  // OutcomeUnknownError, its last error the client's own LeaseLostError ("released"). That error is the
  // client's check, no news from the gateway: the lease was released, never lost, and its signal stays
  // quiet. Failed before the fix: the write marked the lease lost ("released") and aborted its signal.
  const { url, seen } = await faultProxy(t, ({ method }) =>
    method === "PATCH" && seen.filter((r) => r.method === "PATCH").length < 1 ? "refuse503" : "forward");
  const a = clientAt(url);
  t.after(() => a.close());
  const lease = await a.lock(unique("node:releasecut"), { ttlMs: 5000 });
  const write = lease.pg("invoices").patch(unique("node-releasecut"), { status: "x" }).then(() => "applied", (e: unknown) => e);
  while (!seen.some((r) => r.method === "PATCH")) await sleep(10);
  await lease.release();
  const outcome = await write;
  assert.ok(outcome instanceof OutcomeUnknownError && outcome.last instanceof LeaseLostError
    && outcome.last.reason === "released", `the write ended with ${outcome}`);
  assert.equal(seen.filter((r) => r.method === "PATCH").length, 1, "the retry went out after the release");
  assert.equal(lease.lost, false, `the released lease counts as lost (${lease.lostReason})`);
  assert.equal(lease.signal.aborted, false);
  await lease.release();
});

/**
 * Takes a lock, a semaphore and a lock set through a proxy for the test t that does fault to the first two
 * acquires of each request_id ("swallow": the gateway grants the first and answers the second with the same
 * lease, and the client hears nothing; "forward503": the same, each answered with a 503 with Retry-After: 1
 * in its place), by a client allowed two tries, with clientOptions besides. Each take must reject as failed
 * says, with no leaseRequestId, and only after the client asked for the grant again (same request_id,
 * wait_ms 0, which the proxy answers) and released it: nothing stays held for the 20 s TTL.
 */
async function failedAcquireLeavesNoLease(t: TestContext, fault: string, clientOptions: { timeoutMs?: number },
  failed: (e: unknown) => boolean): Promise<void> {
  const { url, seen } = await faultProxy(t, ({ path, body }) => path.endsWith("/acquire")
    && seen.filter((r) => r.body?.request_id === body.request_id).length < 2 ? fault : "forward");
  const a = clientAt(url, { ...clientOptions, retry: { attempts: 2 } });
  const direct = client(true);
  t.after(() => {
    a.close();
    direct.close();
  });
  const leaked = [];
  for (const [kindName, kind] of Object.entries(KINDS)) {
    const name = unique(`node:${fault}-${kindName}`);
    const requestId = unique(`node-${fault}`);
    await assert.rejects(kind.take(a, name, { ttlMs: 20000, waitMs: 0, requestId, watch: false }),
      (e: unknown) => failed(e) && e instanceof FencegateError && e.leaseRequestId === undefined);
    const sent = seen.filter((r) => r.body?.request_id === requestId);
    assert.deepEqual(sent.map((r) => [r.action, r.body.wait_ms]), [[fault, 0], [fault, 0], ["forward", 0]],
      `${kindName}: the acquires sent`);
    if (await kind.held(direct, name)) leaked.push(kindName);
  }
  assert.deepEqual(leaked, [], "held by the lease granted to the failed acquire");
}

test("an acquire whose tries all went unanswered leaves no lease behind", { skip }, async (t) => {
  // A proxy passes the first two acquires of a request_id on to the gateway but never passes the answers
  // back: the client's two tries time out, and the take rejects with UnreachableError (sent) after the
  // give-back of failedAcquireLeavesNoLease. When even that goes unanswered, the error carries the
  // request_id, and an acquire with it gets that lease back. Failed before the fix: lock() rejected with
  // UnreachableError and the lease nobody had held the lock for its whole TTL (held: true after the
  // rejection); the error carried no request_id.
  await failedAcquireLeavesNoLease(t, "swallow", { timeoutMs: 500 },
    (e: unknown) => e instanceof UnreachableError && e.sent);

  const { url } = await faultProxy(t, ({ path }) => path.endsWith("/acquire") ? "swallow" : "forward");
  const a = clientAt(url, { timeoutMs: 500, retry: { attempts: 2 } });
  const direct = client(true);
  t.after(() => {
    a.close();
    direct.close();
  });
  const name = unique("node:orphan");
  const requestId = unique("node-orphan");
  const error = await a.lock(name, { ttlMs: 20000, waitMs: 0, requestId }).then(() => undefined, (e: unknown) => e);
  assert.ok(error instanceof UnreachableError && error.leaseRequestId === requestId, `rejected with ${error}`);
  const held = await direct.lockStatus(name);
  assert.equal(held.held, true, "the grant that could not be given back");
  const lease = await direct.lock(name, { requestId: error.leaseRequestId!, waitMs: 0, watch: false });
  assert.equal(lease.fence, held.fence, "an acquire with leaseRequestId got another lease");
  await lease.release();
  assert.equal((await direct.lockStatus(name)).held, false);
});

test("an acquire answered 503 on every try leaves no lease behind", { skip }, async (t) => {
  // A proxy answers each of the first two acquires of a request_id with a 503 (Retry-After: 1) in place of
  // the gateway's answer, as a gateway whose Redis reply missed its deadline would; the take rejects with
  // the BackendUnavailableError and its Retry-After after the give-back of failedAcquireLeavesNoLease.
  // Failed before the fix: an acquire whose every try was answered gave nothing back, and the lease nobody
  // had held the lock for its whole 20 s TTL.
  await failedAcquireLeavesNoLease(t, "forward503", {},
    (e: unknown) => e instanceof BackendUnavailableError && e.retryAfter === 1);
});
