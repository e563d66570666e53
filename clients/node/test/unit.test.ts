// SPDX-License-Identifier: Apache-2.0
/**
 * What needs no gateway: the error map against the gateway's table (clients/conformance/codes.json), the
 * retry rule of each effect, Prefer: return=minimal's 204, and HTTPS with a CA file. The HTTP servers here
 * answer canned replies to the client's transport; the behaviour against a real gateway is
 * gateway.test.ts's and the conformance scenarios'.
 */

import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TestContext, test } from "node:test";
import { fileURLToPath } from "node:url";

import { BackendUnavailableError, Client, ForbiddenError, InvalidNameError, LeaseLostError, MAX_TIMEOUT_MS,
  OutcomeUnknownError, PROBLEM_CLASSES, ProblemError, RedirectError, StaleFenceError, UnreachableError, WriteResult,
  problemError } from "../src/index.js";
import { parseJson, stringifyJson } from "../src/json.js";

// The compiled test runs from dist/test/ (or from where FG_CODES_JSON says the table is).
const codesFile = process.env.FG_CODES_JSON
  ?? join(fileURLToPath(import.meta.url), "..", "..", "..", "..", "conformance", "codes.json");

test("every problem code of the gateway has its own class", () => {
  const table = JSON.parse(readFileSync(codesFile, "utf8")) as { codes: { code: string; status: number }[] };
  assert.deepEqual(Object.keys(PROBLEM_CLASSES).sort(), table.codes.map((r) => r.code).sort());
  for (const row of table.codes) {
    const error = problemError(row.status, { type: `/problems/${row.code}` });
    assert.notEqual(error.constructor, ProblemError, row.code);
    assert.ok(error instanceof PROBLEM_CLASSES[row.code]!);
    assert.equal(error.code, row.code);
  }
});

async function serve(handler: http.RequestListener): Promise<{ url: string; server: http.Server }> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

test("a once call is not sent again after a lost reply; an idempotent one is", async () => {
  let count = 0;
  const { url, server } = await serve((req) => {
    count++;
    req.socket.destroy();
  });
  const c = new Client({ url, apiKey: "", retry: { attempts: 3, backoffMs: 1 } });
  await assert.rejects(c.pg("invoices", "token").insert({ id: "1" }), (e: unknown) => e instanceof UnreachableError && e.sent);
  assert.equal(count, 1);
  count = 0;
  await assert.rejects(c.pg("invoices", "token").put("1", { status: "x" }), UnreachableError);
  assert.equal(count, 3);
  c.close();
  server.close();
});

test("a refused connection is not 'sent'", async () => {
  const { url, server } = await serve(() => undefined);
  server.close();
  const c = new Client({ url, apiKey: "", retry: { attempts: 2, backoffMs: 1 } });
  await assert.rejects(c.pg("invoices", "token").delete("1"), (e: unknown) => e instanceof UnreachableError && !e.sent);
  c.close();
});

test("Prefer: return=minimal and its 204", async () => {
  let prefer: string | undefined;
  const { url, server } = await serve((req, res) => {
    prefer = String(req.headers.prefer);
    res.writeHead(204, { "Preference-Applied": "return=minimal" }).end();
  });
  const c = new Client({ url, apiKey: "" });
  assert.deepEqual(await c.pg("invoices", "token").returnMinimal().patch("1", { a: 1 }), { applied: true, minimal: true });
  assert.equal(prefer, "return=minimal");
  c.close();
  server.close();
});

test("a 2xx that is not the gateway's (an HTML page, a 204 nobody asked for) is no answer, never a result", async () => {
  // A web server answering every request 200 with a page where the gateway should be (a single-page app's
  // fallback at a wrong URL, a captive portal). Broken variant caught: lock() resolved a "held" lease whose
  // token, fence and TTL were undefined, its writes sent "Fence-Token: undefined", and a write resolved to
  // the page's text.
  let status = 200;
  let acquires = 0;
  let giveBacks = 0;
  const { url, server } = await serve((req, res) => {
    let text = "";
    req.on("data", (chunk: Buffer) => { text += chunk.toString(); });
    req.on("end", () => {
      if (req.url?.endsWith("/acquire")) {
        if ((JSON.parse(text) as { wait_ms?: number }).wait_ms === 0) giveBacks++;
        else acquires++;
      }
      if (status === 204) res.writeHead(204).end();
      else if (status === 0) res.writeHead(200, { "Content-Type": "application/json" }).end('{"status": "ok"}');
      else res.writeHead(200, { "Content-Type": "text/html" }).end("<!doctype html><html><body>app</body></html>");
    });
  });
  const c = new Client({ url, apiKey: "", retry: { attempts: 2, backoffMs: 1 } });
  const unanswered = (e: unknown): boolean => e instanceof UnreachableError && e.sent;
  await assert.rejects(c.lock("page", { ttlMs: 3000, waitMs: 1000, renew: false }), unanswered);
  // Two tries, then the give-back of what they may have been granted (GIVE_BACK_RETRY: three tries).
  assert.deepEqual([acquires, giveBacks], [2, 3]);
  await assert.rejects(c.pg("invoices", "token").patch("1", { status: "paid" }), unanswered);
  await assert.rejects(c.lockStatus("page"), UnreachableError);
  status = 204;
  await assert.rejects(c.lock("page", { waitMs: 0, renew: false }), UnreachableError);
  assert.deepEqual(await c.pg("invoices", "token").returnMinimal().patch("1", { a: 1 }), { applied: true, minimal: true });
  // Another JSON service at the gateway's URL, answering {"status": "ok"} to everything: no lease (broken
  // variant caught: a lease whose token and fence were undefined), no write applied (one that resolved to
  // {"status": "ok"}).
  status = 0;
  await assert.rejects(c.lock("json", { waitMs: 0, renew: false }), (e: unknown) => unanswered(e) && /no grant/.test(String(e)));
  await assert.rejects(c.lockSet(["a", "b"], { waitMs: 0, renew: false }), unanswered);
  await assert.rejects(c.pg("invoices", "token").patch("1", { a: 1 }), unanswered);
  c.close();
  server.close();
});

test("a problem type naming a member of Object.prototype is a plain ProblemError", async () => {
  // Broken variant caught: "/problems/constructor" made a plain object of the error (no Error, no status),
  // and "/problems/toString" threw a TypeError in the answer's "end" handler: an uncaught exception that
  // ended the process, from whatever answered at the gateway's address.
  for (const code of ["constructor", "toString", "__proto__", "hasOwnProperty"]) {
    const error = problemError(409, { type: `/problems/${code}`, status: 409 });
    assert.ok(error instanceof ProblemError, code);
    assert.equal(error.constructor, ProblemError, code);
    assert.deepEqual([error.status, error.code], [409, code]);
  }
  const { url, server } = await serve((_req, res) => {
    res.writeHead(409, { "Content-Type": "application/problem+json" })
      .end(JSON.stringify({ type: "/problems/toString", status: 409 }));
  });
  const c = new Client({ url, apiKey: "" });
  await assert.rejects(c.lockStatus("x"), (e: unknown) => e instanceof ProblemError && e.code === "toString");
  c.close();
  server.close();
});

test("HTTPS verifies the gateway against the CA file", async () => {
  const dir = mkdtempSync(join(tmpdir(), "fg-node-tls-"));
  execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem")],
  { stdio: "ignore" });
  const server = https.createServer({ key: readFileSync(join(dir, "key.pem")), cert: readFileSync(join(dir, "cert.pem")) },
    (_req, res) => res.writeHead(200, { "Content-Type": "application/json" })
      .end(JSON.stringify({ semaphore: "s", limit: 2, holders: 1, waiting: 0 })));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const trusting = new Client({ url, apiKey: "", caFile: join(dir, "cert.pem") });
  assert.equal((await trusting.semaphoreStatus("s")).holders, 1);
  const untrusting = new Client({ url, apiKey: "", retry: { attempts: 3 } });
  await assert.rejects(untrusting.semaphoreStatus("s"), UnreachableError);
  trusting.close();
  untrusting.close();
  server.close();
});

interface Seen { method: string; path: string; query: URLSearchParams; body: string; headers: http.IncomingHttpHeaders }
type Reply = [number, string, Record<string, string>?];

/**
 * A canned gateway for the test t: each request goes to handler, whose [status, body, headers] is the
 * answer; seen lists the requests, answered those whose answer was written out. The server, its connections
 * and the clients made with client() end with the test, whatever its outcome.
 */
async function canned(t: TestContext, handler: (r: Seen) => Promise<Reply> | Reply):
  Promise<{ client: (options?: ConstructorParameters<typeof Client>[0]) => Client; seen: Seen[]; answered: Seen[];
    url: string }> {
  const seen: Seen[] = [], answered: Seen[] = [];
  const { url, server } = await serve((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const target = new URL(req.url ?? "/", "http://x");
      const r = { method: req.method ?? "", path: decodeURIComponent(target.pathname), query: target.searchParams,
        body: Buffer.concat(chunks).toString("utf8"), headers: req.headers };
      seen.push(r);
      const [status, body, headers] = await handler(r);
      if (status === 0) {
        req.socket.destroy(); // no answer at all
        return;
      }
      res.on("finish", () => answered.push(r));
      res.writeHead(status, { "Content-Type": status >= 400 ? "application/problem+json" : "application/json", ...headers })
        .end(body);
    });
  });
  const clients: Client[] = [];
  t.after(() => {
    for (const c of clients) c.close();
    server.closeAllConnections();
    server.close();
  });
  return {
    client: (options = {}) => {
      const c = new Client({ url, apiKey: "", ...options });
      clients.push(c);
      return c;
    },
    seen,
    answered,
    url,
  };
}

const until = async (what: string, cond: () => boolean, ms = 3000): Promise<void> => {
  for (const deadline = performance.now() + ms; !cond(); await new Promise((r) => setTimeout(r, 10))) {
    assert.ok(performance.now() < deadline, `not within ${ms} ms: ${what}`);
  }
};

/** Lets the event loop poll for I/O n times: an answer written out before has reached its client's code. */
const loopTurns = async (n: number): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

// 2^53 + 1 is the first integer a JS number cannot hold (it rounds to 2^53).
const BIG = "9007199254740993";

test("a lease's fence above 2^53 stays exact: the watch asks for it and a held lease is not lost", async (t) => {
  // As the gateway does, the watch answers "expired" at once for a fence this lock never issued.
  // Broken variant caught: fences read as JS numbers; the watch asked for 9007199254740992 and the held
  // lease was reported lost ("expired").
  const { client, seen } = await canned(t, ({ method, path, query }) => {
    if (path.endsWith("/acquire")) return [200, `{"lock":"x","token":"t","fence":${BIG},"ttl_ms":30000,"expires_at_ms":1}`];
    if (method === "GET") {
      return query.get("fence") === BIG ? [200, `{"lock":"x","fence":${BIG},"held":true,"expires_in_ms":29000}`]
        : [200, `{"lock":"x","fence":${query.get("fence")},"held":false,"reason":"expired"}`];
    }
    return [200, `{"released":true}`];
  });
  const lease = await client().lock("x");
  t.after(() => lease.release().catch(() => undefined));
  await until("a watch poll", () => seen.some((r) => r.method === "GET"));
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(lease.lost, false, `lost: ${lease.lostReason}`);
  assert.equal(seen.find((r) => r.method === "GET")!.query.get("fence"), BIG);
  assert.equal(typeof lease.fence, "bigint");
  assert.equal(String(lease.fence), BIG);
});

test("a status naming a fence one above the lease's, past 2^53, is a takeover", async (t) => {
  // A gateway without the watch endpoint answers the plain status: the holder's fence decides.
  // Broken variant caught: 9007199254740993 read as a JS number equals 9007199254740992, the lease's own,
  // and the takeover went unnoticed.
  const { client } = await canned(t, ({ method, path }) => {
    if (path.endsWith("/acquire")) return [200, `{"lock":"x","token":"t","fence":9007199254740992,"ttl_ms":30000,"expires_at_ms":1}`];
    if (method === "GET") return [200, `{"lock":"x","held":true,"fence":${BIG},"owner":"o","expires_in_ms":900,"waiting":0}`];
    return [410, `{"type":"/problems/lease_lost","status":410}`];
  });
  const lease = await client().lock("x");
  t.after(() => lease.release().catch(() => undefined));
  await until("the takeover noticed", () => lease.lost);
  assert.equal(lease.lostReason, "taken over");
});

test("fences above 2^53 in answers and refusals come out exact, and go out exact", async (t) => {
  const { client, seen } = await canned(t, ({ method, path }) => {
    if (path === "/v1/locksets/acquire") {
      return [200, `{"locks":[{"lock":"a","token":"ta","fence":${BIG},"ttl_ms":30000,"expires_at_ms":1}]}`];
    }
    if (path.endsWith("/revoke")) return [200, `{"revoked_fence":${BIG}}`];
    if (method === "GET" && path.startsWith("/v1/locks/")) {
      return [200, `{"lock":"x","held":true,"fence":${BIG},"owner":null,"expires_in_ms":5,"waiting":0}`];
    }
    if (method === "GET" && path.startsWith("/v1/pg/")) {
      return [200, `{"row":{"id":"1","fence":12345678901234567890},"fence":${BIG},"resource":"pg:t/1"}`];
    }
    if (method === "PUT") return [200, `{"applied":true,"resource":"redis:app:x","fence":${BIG},"value":"v"}`];
    if (path === "/v1/audit/rejections") {
      return [200, `{"items":[{"id":1,"at_ms":2,"resource":"redis:app:x","lock":"x","presented_fence":${BIG},` +
        `"current_fence":9007199254740995,"owner":null,"client_addr":null,"method":"PUT","reason":"stale_fence"}],"next_after_id":null}`];
    }
    return [409, `{"type":"/problems/stale_fence","status":409,"presented_fence":${BIG},"current_fence":9007199254740995,` +
      `"resource":"redis:app:x"}`];
  });
  const c = client();
  const set = await c.lockSet(["a"], { renew: false });
  assert.equal(String(set.member("a").fence), BIG);
  assert.equal(String(await c.revokeLock("x")), BIG);
  assert.equal(String((await c.lockStatus("x")).fence), BIG);
  const read = await c.pg("t").get("1");
  assert.equal(String(read.fence), BIG);
  assert.equal(typeof read.row?.fence, "number", "a row's own columns are the table's data, read as JSON numbers");
  assert.equal(String((await c.redis("t").put("app:x", "v")).fence), BIG);
  const records = [];
  for await (const r of c.auditRejections()) records.push(r);
  assert.deepEqual([String(records[0]!.presented_fence), String(records[0]!.current_fence)], [BIG, "9007199254740995"]);
  await assert.rejects(c.redis("t").patch("app:x", { a: "1" }), (e: unknown) => e instanceof ProblemError
    && String((e as any).presentedFence) === BIG && String((e as any).currentFence) === "9007199254740995");
  await c.revokeSemaphore("s", BigInt(BIG), "r");
  assert.match(seen.at(-1)!.body, new RegExp(`"fence":${BIG}[,}]`));
});

test("answers read as JSON.parse reads them, but for fences; bodies write as JSON.stringify, bigints as integers", () => {
  const texts = ['{"a":[1,-2.5e3,0.125,true,false,null,"x\\"\\\\\\u00e9\\n"],"b":{"c":{}},"d":[]}', ' [ 1 , { } ] ', '"s"',
    '{"__proto__":{"x":1},"k":1,"k":2}', '{"fence":null,"current_fence":1.5,"n":12345678901234567890}'];
  for (const text of texts) assert.deepEqual(parseJson(text), JSON.parse(text), text);
  assert.deepEqual(parseJson('{"fence":7,"locks":[{"fence":9007199254740993}],"row":{"fence":1,"id":2},' +
    '"results":[{"row":{"current_fence":3}}],"revoked_fence":5,"presented_fence":6,"current_fence":8}'),
  { fence: 7n, locks: [{ fence: 9007199254740993n }], row: { fence: 1, id: 2 }, results: [{ row: { current_fence: 3 } }],
    revoked_fence: 5n, presented_fence: 6n, current_fence: 8n });
  for (const bad of ["", "{", '{"a":}', "[1,]", '{"a":1}x', "01", '"\u0001"', "tru"]) {
    assert.throws(() => parseJson(bad), SyntaxError, JSON.stringify(bad));
  }
  const values: unknown[] = [{ a: [1, "x", null, undefined, () => 1], b: undefined, d: new Date(0), n: NaN }, "s", 1.5, [undefined]];
  for (const value of values) assert.equal(stringifyJson(value), JSON.stringify(value));
  assert.equal(stringifyJson({ fence: 9007199254740993n, set: { big: -12345678901234567890n } }),
    '{"fence":9007199254740993,"set":{"big":-12345678901234567890}}');
});

test("an acquire without waitMs waits as long as the gateway's default wait may hold it", async (t) => {
  // The gateway applies its defaults.wait_ms (up to an hour) to an acquire that names none; this one
  // answers after 300 ms, past the client's 100 ms timeout. Broken variant caught: the per-try timeout had
  // no room for the gateway's wait; the acquire gave up after 100 ms on a request the gateway granted.
  // waitMs: 0 is sent as wait_ms 0 (try once), and then the plain timeout applies.
  const { client, seen } = await canned(t, async () => {
    await new Promise((r) => setTimeout(r, 300));
    return [200, `{"lock":"x","token":"t","fence":7,"ttl_ms":30000,"expires_at_ms":1}`];
  });
  const c = client({ timeoutMs: 100, retry: { attempts: 1 } });
  const lease = await c.lock("x", { renew: false });
  assert.equal(String(lease.fence), "7");
  assert.equal(seen.length, 1);
  assert.equal("wait_ms" in JSON.parse(seen[0]!.body), false);
  await assert.rejects(c.lock("x", { renew: false, waitMs: 0 }), UnreachableError);
  assert.equal(JSON.parse(seen[1]!.body).wait_ms, 0);
});

test("a write refused after a try that may have been applied has an unknown outcome", async (t) => {
  // A PATCH whose first try got no reply (or a 503: the gateway's own commit may have been lost) may have
  // been applied; a refusal of its retry speaks for the retry alone. The client must say the outcome is
  // unknown (an UnreachableError, sent) instead of a plain refusal, which promises that nothing changed; a
  // lease still hears the 410. Broken variant caught: the retry's 409 rejected as a StaleFenceError.
  const answers: Record<string, string[]> = { stale: ["drop", "409 stale_fence"], applied: ["drop", "200"],
    plain: ["409 stale_fence"], busy: ["503 backend_unavailable", "409 stale_fence"], revoked: ["drop", "410 lease_lost"] };
  const tries: Record<string, number> = {};
  const { client } = await canned(t, ({ path }) => {
    if (path.endsWith("/acquire")) return [200, `{"lock":"x","token":"t","fence":7,"ttl_ms":30000,"expires_at_ms":1}`];
    const key = path.slice(path.lastIndexOf("/") + 1);
    const answer = answers[key]![tries[key] = (tries[key] ?? -1) + 1]!;
    if (answer === "drop") return [0, ""];
    const [status, code] = answer.split(" ");
    if (status === "200") return [200, `{"applied":true,"resource":"pg:t/${key}","fence":7,"row":{"id":"${key}"}}`];
    return [Number(status), `{"type":"/problems/${code}","status":${status},"presented_fence":7,"current_fence":9,"reason":"revoked"}`,
      { "Retry-After": "0" }];
  });
  const c = client({ retry: { attempts: 3, backoffMs: 1 } });
  const unknown = (e: unknown): boolean => e instanceof UnreachableError && e.sent && !(e instanceof ProblemError)
    && /outcome unknown/.test(e.message);
  await assert.rejects(c.pg("t", "t").patch("stale", { a: 1 }), (e: unknown) => unknown(e)
    && e instanceof OutcomeUnknownError && e.last instanceof StaleFenceError && e.last.currentFence === 9n);
  assert.equal((await c.pg("t", "t").patch("applied", { a: 1 })).applied, true);
  await assert.rejects(c.pg("t", "t").patch("plain", { a: 1 }), (e: unknown) => e instanceof ProblemError && e.code === "stale_fence");
  await assert.rejects(c.pg("t", "t").patch("busy", { a: 1 }), unknown);
  const lease = await c.lock("x", { renew: false });
  await assert.rejects(lease.pg("t").patch("revoked", { a: 1 }), unknown);
  assert.equal(lease.lostReason, "revoked");
});

const BUSY = `{"type":"/problems/backend_unavailable","status":503,"detail":"postgres: connection lost"}`;

test("a write answered a 5xx and not retried has an unknown outcome; a read's 503 stays a refusal", async (t) => {
  // The gateway answers 503 also when its connection to a backend failed during the commit, so one 503 to
  // an insert, a delete or a batch with them (sent once) may have been applied, as may a PATCH's 503 when
  // no retry is left. Failed before the fix: each rejected with a BackendUnavailableError, a refusal that
  // the docs say changes nothing.
  const { client, seen } = await canned(t, () => [503, BUSY, { "Retry-After": "0" }]);
  const c = client({ retry: { attempts: 1 } });
  const table = c.pg("t", "t");
  const writes: [string, () => Promise<WriteResult>][] = [["insert", () => table.insert({ id: "1" })],
    ["delete", () => table.delete("1")], ["patch", () => table.patch("1", { a: 1 })],
    ["batch", () => table.batch([{ op: "post", row: { id: "1" } }, { op: "patch", key: "2", set: { a: 1 } }])],
    ["redis delete", () => c.redis("t").delete("app:x")]];
  for (const [what, write] of writes) {
    await assert.rejects(write(), (e: unknown) => e instanceof OutcomeUnknownError && e.sent
      && e.last instanceof BackendUnavailableError && e.earlier === e.last && /outcome unknown/.test(e.message), what);
  }
  assert.equal(seen.length, writes.length, "a write was sent more than once");
  await assert.rejects(c.pg("t").get("1"), (e: unknown) => e instanceof BackendUnavailableError);
  await assert.rejects(c.lock("x", { renew: false }), (e: unknown) => e instanceof BackendUnavailableError);
});

test("a revoke answered 503 has an unknown outcome, a lock's sent once; a 403 stays a refusal", async (t) => {
  // The gateway may record a revocation before its backend fails to answer, so a 503 to a revoke says nothing
  // of whether the lease ended: a lock's revoke rejects with an OutcomeUnknownError after its one try, a
  // semaphore's (it names the fence it ends, so a repeat ends nobody else) after the policy's two, each
  // answered 503. Failed before the fixes: each rejected with a BackendUnavailableError, a refusal, as if the
  // holder still held the lease (the semaphore's still did once the lock's was fixed).
  const { client, seen } = await canned(t, (r) => JSON.parse(r.body).reason === "refused"
    ? [403, `{"type":"/problems/forbidden","status":403,"scope":"admin"}`] : [503, BUSY, { "Retry-After": "0" }]);
  const c = client({ retry: { attempts: 2 } });
  const revokes: [string, (reason: string) => Promise<bigint | null>, number][] = [
    ["lock", (reason) => c.revokeLock("invoice:42", reason), 1],
    ["semaphore", (reason) => c.revokeSemaphore("exporters", 7n, reason), 2]];
  for (const [what, revoke, tries] of revokes) {
    const before = seen.length;
    await assert.rejects(revoke("test"), (e: unknown) => e instanceof OutcomeUnknownError && e.sent
      && e.last instanceof BackendUnavailableError && e.earlier instanceof BackendUnavailableError
      && (e.earlier === e.last) === (tries === 1), what);
    assert.equal(seen.length - before, tries, `${what}: the revokes sent`);
    await assert.rejects(revoke("refused"), (e: unknown) => e instanceof ForbiddenError, what);
  }
});

test("a 3xx answer is a RedirectError, and is not followed", async (t) => {
  // The gateway never redirects; something in front of it that does must not get the write (its
  // Fence-Token) sent on, nor pass for its success. Failed before the fix: a PATCH answered 301 resolved to
  // undefined (no error, nothing written), and so did a status call answered 307.
  const { client, seen } = await canned(t, ({ method }) =>
    [method === "GET" ? 307 : 301, "", { Location: "http://127.0.0.1:9/elsewhere" }]);
  const c = client();
  await assert.rejects(c.pg("t", "t").patch("1", { a: 1 }), (e: unknown) => e instanceof RedirectError
    && e.status === 301 && e.code === "http_301" && e.location === "http://127.0.0.1:9/elsewhere" && /redirect/.test(e.message));
  await assert.rejects(c.lockStatus("x"), (e: unknown) => e instanceof RedirectError && e.status === 307);
  assert.equal(seen.length, 2, "a redirect was retried or followed");
});

test("a write whose signal aborts after a try that may have been applied has an unknown outcome", async (t) => {
  // The first try of each PATCH is answered 503 (the gateway's commit may have been lost). "pause": its
  // Retry-After is 5 s, and the caller aborts during the pause; "inflight": the retry is sent and gets no
  // answer before the abort. Failed before the fix: both rejected with the abort's reason, as if nothing had
  // been sent (with lease.signal, a LeaseLostError of status 0). A write aborted before any try was sent
  // still rejects with the reason.
  const tries: Record<string, number> = {};
  const { client, seen, answered } = await canned(t, async ({ path }) => {
    const key = path.slice(path.lastIndexOf("/") + 1);
    tries[key] = (tries[key] ?? 0) + 1;
    if (tries[key] === 1) return [503, BUSY, { "Retry-After": key === "pause" ? "5" : "0" }];
    await new Promise(() => undefined); // never answered; the test's end closes the connection
    return [200, ""];
  });
  const c = client();
  const reason = new Error("the caller gave up");
  for (const key of ["pause", "inflight"]) {
    const controller = new AbortController();
    const write = c.pg("t", "t").patch(key, { a: 1 }, { signal: controller.signal });
    await until(`try ${key === "pause" ? 1 : 2} of ${key}`, () => tries[key] === (key === "pause" ? 1 : 2));
    // "pause" aborts once the 503 has reached the client (it then waits out its Retry-After), not as soon as
    // the server saw the try: a loaded machine may run this before the client read the answer.
    if (key === "pause") {
      await until("the 503 of pause answered", () => answered.some((r) => r.path.endsWith("/pause")));
      await loopTurns(3);
    }
    controller.abort(reason);
    await assert.rejects(write, (e: unknown) => e instanceof OutcomeUnknownError && e.last === reason
      && e.earlier instanceof BackendUnavailableError, key);
  }
  const count = seen.length;
  await assert.rejects(c.pg("t", "t").patch("none", { a: 1 }, { signal: AbortSignal.abort(reason) }),
    (e: unknown) => e === reason);
  assert.equal(seen.length, count);
});

test("after a slow acquire, a failed first renewal leaves the lease valid for a TTL from the acquire", async (t) => {
  // The acquire is answered after 1 s, over a third of the 2 s TTL, so the client renews at once; every
  // renewal is answered 503. The gateway ends the lease a TTL after it granted it, so the client must count
  // it lost (unrenewed) a TTL after the acquire was sent. Failed before the fix: validity counted from the
  // failed renewal's sending, a second later; check() passed 2.4 s after the acquire was sent (lock and
  // lock set alike).
  const { client } = await canned(t, async ({ path }) => {
    const grant = `{"lock":"x","token":"t","fence":7,"ttl_ms":2000,"expires_at_ms":1}`;
    if (path.endsWith("/acquire")) {
      await new Promise((r) => setTimeout(r, 1000));
      return [200, path.startsWith("/v1/locksets/") ? `{"locks":[${grant}]}` : grant];
    }
    if (path.endsWith("/renew")) return [503, BUSY, { "Retry-After": "1" }];
    return [200, `{"released":true}`];
  });
  const c = client({ retry: { attempts: 1 } });
  const options = { ttlMs: 2000, waitMs: 5000, watch: false };
  await Promise.all([() => c.lock("x", options), () => c.lockSet(["x"], options)].map(async (acquire) => {
    const sent = performance.now();
    const lease = await acquire();
    t.after(() => lease.release().catch(() => undefined));
    await new Promise((r) => setTimeout(r, sent + 2400 - performance.now()));
    assert.throws(() => lease.check(), (e: unknown) => e instanceof LeaseLostError && e.reason === "unrenewed",
      `still valid ${Math.round(performance.now() - sent)} ms after the acquire was sent`);
  }));
});

test("a watch poll answered 429 is polled again after Retry-After", async (t) => {
  // The key's quota of parked waits and watches is full: 429 too_many_waiters with Retry-After. The next
  // poll reports the revoke. Broken variant caught: the watch stopped at the 429, as for a gateway without
  // the watch endpoint, and the revoke went unnoticed until a renewal.
  const polls: number[] = [];
  const { client } = await canned(t, ({ method }) => {
    if (method !== "GET") return [200, `{"lock":"x","token":"t","fence":7,"ttl_ms":30000,"expires_at_ms":1,"released":true}`];
    polls.push(performance.now());
    if (polls.length === 1) {
      return [429, `{"type":"/problems/too_many_waiters","status":429,"detail":"limits.max_waiters_per_key"}`, { "Retry-After": "1" }];
    }
    return [200, `{"lock":"x","fence":7,"held":false,"reason":"revoked"}`];
  });
  const lease = await client().lock("x", { ttlMs: 30000 });
  t.after(() => lease.release().catch(() => undefined));
  await until("the revoke reported after the 429", () => lease.lost, 3000);
  assert.equal(lease.lostReason, "revoked");
  assert.equal(polls.length, 2);
  assert.ok(polls[1]! - polls[0]! >= 900, `polled again ${polls[1]! - polls[0]!} ms after the 429`);
});

test("a release answered 503 is sent again by the next release", async (t) => {
  // The first release of a lease is answered 503 (no retry here), so the lease may still be held. From that
  // call on nothing renews it and a write through it rejects without being sent; the next release() sends
  // the release again, and one after the gateway's 200 sends nothing. Broken variant caught: the lease was
  // marked released before the release was sent, so the second release() resolved without sending anything
  // (1 release arrived, not 2) and the lock stayed held for its TTL.
  let releases = 0;
  const { client, seen } = await canned(t, ({ path }) => {
    if (path.endsWith("/release")) {
      return ++releases === 1 ? [503, `{"type":"/problems/backend_unavailable","status":503}`] : [200, `{"released":true}`];
    }
    return [200, `{"lock":"x","token":"t","fence":7,"ttl_ms":300,"expires_at_ms":1}`];
  });
  const lease = await client({ retry: { attempts: 1 } }).lock("x", { ttlMs: 300, watch: false });
  await assert.rejects(lease.release(), BackendUnavailableError);
  const renewals = seen.filter((r) => r.path.endsWith("/renew")).length;
  await new Promise((r) => setTimeout(r, 250)); // over two renewal periods of a 300 ms lease
  await assert.rejects(lease.redis.put("app:x", "v"), LeaseLostError);
  assert.equal(seen.filter((r) => r.method === "PUT").length, 0, "a write went out after the release was asked for");
  assert.equal(seen.filter((r) => r.path.endsWith("/renew")).length, renewals, "renewed after the release was asked for");
  await lease.release();
  assert.equal(releases, 2, "the second release() did not send the release");
  await lease.release();
  assert.equal(releases, 2, "a release() after the gateway's 200 sent it again");
});

test("fractional milliseconds go out rounded down, on every try and in every renewal", async (t) => {
  // The gateway takes whole milliseconds (400 invalid_field otherwise); Go's durations go out rounded down
  // to them, as does what is left of a wait on a retry. Broken variant caught: ttlMs 10000/3 went out as
  // 3333.3333333333335 and the acquire was refused; a lock set also renewed with it.
  let acquires = 0;
  const { client, seen } = await canned(t, ({ path }) => {
    if (path === "/v1/locksets/acquire") {
      return [200, `{"locks":[{"lock":"a","token":"ta","fence":1,"ttl_ms":3333,"expires_at_ms":1}]}`];
    }
    if (path.endsWith("/acquire") && ++acquires === 1) return [503, `{"type":"/problems/backend_unavailable","status":503}`, { "Retry-After": "0" }];
    return [200, `{"lock":"x","token":"t","fence":7,"ttl_ms":3333,"expires_at_ms":1}`];
  });
  const c = client({ retry: { attempts: 2 } });
  const lease = await c.lock("x", { ttlMs: 10000 / 3, waitMs: 2000 / 3, maxHoldMs: 100000 / 3, renew: false });
  await lease.renew(1000 / 3);
  const set = await c.lockSet(["a"], { ttlMs: 10000 / 3, renew: false });
  await set.renew();
  const sent = seen.map((r) => JSON.parse(r.body));
  assert.equal(sent.length, 5);
  for (const body of sent) {
    for (const field of ["ttl_ms", "wait_ms", "max_hold_ms"]) {
      if (field in body) assert.ok(Number.isInteger(body[field]), `${field} ${body[field]} is not whole`);
    }
  }
  assert.deepEqual(sent.map((b) => b.ttl_ms), [3333, 3333, 333, 3333, 3333]);
  assert.deepEqual(sent.slice(0, 2).map((b) => b.max_hold_ms), [33333, 33333]);
  assert.ok(sent[0].wait_ms <= 666 && sent[1].wait_ms <= sent[0].wait_ms, `wait_ms ${sent[0].wait_ms}, ${sent[1].wait_ms}`);
});

test("a lease is acquired once: acquire() again rejects and starts no second keeper", async (t) => {
  // Broken variant caught: a second acquire() of a held lease started a second keeper, which the release
  // did not stop (it went on renewing a released lease), and one after the release kept the lease renewed
  // while release() sent nothing, the gateway having answered the first.
  const { client, seen } = await canned(t, ({ path }) => {
    if (path.endsWith("/release")) return [200, `{"released":true}`];
    if (path === "/v1/locksets/acquire") return [200, `{"locks":[{"lock":"a","token":"ta","fence":1,"ttl_ms":300,"expires_at_ms":1}]}`];
    return [200, `{"lock":"x","token":"t","fence":7,"ttl_ms":300,"expires_at_ms":1}`];
  });
  const c = client();
  const count = (suffix: string): number => seen.filter((r) => r.path.endsWith(suffix)).length;
  const lease = await c.lock("x", { ttlMs: 300, watch: false });
  await assert.rejects(lease.acquire({ ttlMs: 300, watch: false }), /already/);
  await lease.release();
  await assert.rejects(lease.acquire({ ttlMs: 300, watch: false }), /already/);
  const set = await c.lockSet(["a"], { ttlMs: 300, watch: false });
  await assert.rejects(set.acquire({ ttlMs: 300, watch: false }), /already/);
  await set.release();
  await assert.rejects(set.acquire({ ttlMs: 300, watch: false }), /already/);
  assert.equal(count("/acquire"), 2, "a second acquire() was sent");
  const renewals = count("/renew");
  await new Promise((r) => setTimeout(r, 250)); // over two renewal periods of a 300 ms lease
  assert.equal(count("/renew"), renewals, "renewed after the release");
  assert.equal(count("/release"), 2);
});

test("credentials in the URL are neither sent nor kept; the key goes as its bearer", async (t) => {
  // As in the Python and Go clients: user:password@ in the URL is no key, and node:http is given no auth.
  const { client, seen, url } = await canned(t, () => [200, `{"lock":"x","held":false,"fence":null,"waiting":0}`]);
  const withCredentials = url.replace("http://", "http://alice:s3cret@");
  for (const [apiKey, authorization] of [["", undefined], ["k1", "Bearer k1"]] as const) {
    const c = client({ url: withCredentials, apiKey });
    await c.lockStatus("x");
    assert.equal(seen.at(-1)!.headers.authorization, authorization);
    assert.equal(c.transport.base.username + c.transport.base.password, "");
  }
});

test("the error for a malformed URL shows it without user:password@", () => {
  // Broken variant caught: the TypeError quoted the URL whole ("not ftp://alice:s3cret@gw:8480"), and one
  // that does not parse threw URL's own TypeError, whose input member holds it whole.
  for (const url of ["ftp://alice:s3cret@gw:8480", "http://alice:s3cret@", "alice:s3cret@gw:8480",
    "http://alice:s3cret@gw:port", "http://alice:s3/cret@gw", "ftp://alice:s3cret@gw/a@b?c#d@e",
    "http://alice:s3cret@[::1"]) {
    assert.throws(() => new Client({ url }), (e: Error) => {
      const shown = `${e.message} ${JSON.stringify(e)} ${String((e as { input?: unknown }).input)}`;
      assert.ok(e instanceof TypeError && e.message.includes("http://host[:port]"), `${url}: ${e.message}`);
      assert.ok(!/alice|s3|cret/.test(shown), `${url}: ${shown}`);
      return true;
    });
  }
  assert.throws(() => new Client({ url: "ftp://alice:s3cret@gw:8480/x" }), /not ftp:\/\/\*\*\*@gw:8480\/x$/);
});

test("a timeoutMs past what Node's timers hold is refused, not cut every call at once", () => {
  // Broken variant caught: timeoutMs Infinity (meant as "no timeout") or 30 days was taken, and Node fired
  // the timer of every call after 1 ms, so each call failed "no answer within Infinity ms".
  for (const timeoutMs of [Infinity, 30 * 86_400_000, MAX_TIMEOUT_MS + 1, 0, -1, NaN]) {
    assert.throws(() => new Client({ url: "http://127.0.0.1:1", timeoutMs }),
      (e: Error) => e instanceof RangeError && e.message.includes("timeoutMs"), String(timeoutMs));
  }
  assert.equal(new Client({ url: "http://127.0.0.1:1", timeoutMs: MAX_TIMEOUT_MS }).transport.timeoutMs,
    MAX_TIMEOUT_MS);
});

test("an owner beyond ASCII goes out as the UTF-8 bytes of its Fence-Owner header", async (t) => {
  // The gateway reads Fence-Owner as UTF-8. Broken variant caught: Node wrote the header's string as
  // Latin-1, so "billing-ü" arrived as the byte 0xFC (the gateway: 400 invalid_field) and "账单-7" threw
  // TypeError: Invalid character in header content.
  const { client, seen } = await canned(t, () => [200, `{"applied":true,"resource":"redis:app:x","fence":7,"value":"v"}`]);
  for (const owner of ["billing-ü", "账单-7", "billing-7"]) {
    await client({ owner }).redis("t").put("app:x", "v");
    const header = seen.at(-1)!.headers["fence-owner"] as string; // node:http reads header bytes as Latin-1
    assert.equal(Buffer.from(header, "latin1").toString("utf8"), owner);
  }
});

test("sequential calls on a kept-alive socket leave no 'connect' listener behind", async (t) => {
  // Broken variant caught: every call added a once('connect') listener to its socket, also to a kept-alive
  // one that never connects again; after 30 calls the socket held 29 of them (MaxListenersExceededWarning
  // past 10), each keeping its call's closure alive.
  const { client } = await canned(t, () => [200, `{"lock":"x","held":false,"fence":null,"waiting":0}`]);
  const c = client();
  for (let i = 0; i < 30; i++) await c.lockStatus("x");
  const agent = c.transport["agent"];
  const sockets = Object.values(agent.freeSockets).flat();
  assert.equal(sockets.length, 1, "the calls did not share one kept-alive socket");
  assert.equal(sockets[0]!.listenerCount("connect"), 0);
});

test("an IPv6 literal URL connects, with the Host header node:http writes", async (t) => {
  // Broken variant caught: URL.hostname keeps the brackets ("[::1]"), which node:http looked up as a name:
  // getaddrinfo ENOTFOUND [::1].
  let host: string | undefined;
  const server = http.createServer((req, res) => {
    host = req.headers.host;
    res.writeHead(200, { "Content-Type": "application/json" }).end(`{"lock":"x","held":false,"fence":null,"waiting":0}`);
  });
  try {
    await new Promise<void>((resolve, reject) => server.once("error", reject).listen(0, "::1", resolve));
  } catch (e) {
    t.skip(`no IPv6 loopback here: ${(e as Error).message}`);
    return;
  }
  const port = (server.address() as AddressInfo).port;
  const c = new Client({ url: `http://[::1]:${port}`, apiKey: "", retry: { attempts: 1 } });
  t.after(() => {
    c.close();
    server.close();
  });
  assert.equal((await c.lockStatus("x")).held, false);
  assert.equal(host, `[::1]:${port}`);
});

/** Runs an ES module script in a child node process; resolves to its exit code and what it printed. */
function runScript(script: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (c: Buffer) => { out += c.toString("utf8"); });
    child.stderr.on("data", (c: Buffer) => { out += c.toString("utf8"); });
    child.on("error", reject);
    child.on("exit", (code) => resolve({ code, out }));
  });
}

test("a script that waits for a lock lives until lock() settles, also after a wait over a third of the TTL", async (t) => {
  // The acquire is answered after 200 ms, over a third of the 300 ms TTL, so the client renews the lease at
  // once, before lock() resolves. A script with nothing else to do must still see the grant, then release.
  // Broken variant caught: that renewal went out as the background keeper's, its socket and timer unref'd;
  // nothing held the event loop and node exited with code 13 (unsettled top-level await) before the grant.
  const { client, seen } = await canned(t, async ({ path }) => {
    if (path.endsWith("/acquire")) await new Promise((r) => setTimeout(r, 200));
    const grant = `{"lock":"x","token":"t","fence":7,"ttl_ms":300,"expires_at_ms":1}`;
    if (path.endsWith("/release")) return [200, `{"released":true}`];
    return [200, path.startsWith("/v1/locksets/") ? `{"locks":[${grant}]}` : grant];
  });
  const url = client().transport.base.origin;
  for (const call of ['lock("x", { ttlMs: 300, waitMs: 10000, watch: false })',
    'lockSet(["x"], { ttlMs: 300, waitMs: 10000, watch: false })']) {
    const { code, out } = await runScript(`import { Client } from ${JSON.stringify(new URL("../src/index.js", import.meta.url).href)};
      const c = new Client({ url: ${JSON.stringify(url)}, apiKey: "" });
      const lease = await c.${call};
      console.log("granted");
      await lease.release();
      c.close();`);
    assert.deepEqual([code, out.trim()], [0, "granted"], call);
  }
  assert.ok(seen.some((r) => r.path.endsWith("/renew")), "the acquire was not renewed at once");
});

test("a key, table or name that is not Unicode text rejects with InvalidNameError, and throws nothing", async () => {
  // A lone surrogate has no UTF-8 spelling: the client cannot send it, and the gateway refuses a malformed
  // sequence in a path with 400 invalid_name. Nothing is sent (no gateway listens at this URL). Broken
  // variant caught: encodeURIComponent's URIError was thrown synchronously by put, patch and delete (and
  // rejected as a URIError from the other calls), escaping a caller's .catch().
  const c = new Client({ url: "http://127.0.0.1:9", apiKey: "", retry: { attempts: 1 } });
  const bad = "app:\ud800x";
  const calls: [string, () => Promise<unknown>][] = [
    ["redis put", () => c.redis("t").put(bad, "v")], ["redis patch", () => c.redis("t").patch(bad, { f: "v" })],
    ["redis delete", () => c.redis("t").delete(bad)], ["redis get", () => c.redis().get(bad)],
    ["pg patch", () => c.pg("t", "t").patch(bad, { a: 1 })], ["pg put", () => c.pg("t", "t").put(bad, { a: 1 })],
    ["pg delete", () => c.pg("t", "t").delete(bad)], ["pg insert", () => c.pg(bad, "t").insert({ a: 1 })],
    ["pg get", () => c.pg("t").get(bad)], ["lock status", () => c.lockStatus(bad)], ["lock", () => c.lock(bad)],
  ];
  for (const [what, call] of calls) {
    let settled: Promise<unknown> | undefined;
    assert.doesNotThrow(() => { settled = call(); }, what);
    await assert.rejects(settled!, (e: unknown) => e instanceof InvalidNameError && e.code === "invalid_name", what);
  }
  c.close();
});
