// SPDX-License-Identifier: Apache-2.0
/**
 * What needs no gateway: the error map against the gateway's table (clients/conformance/codes.json), the
 * retry rule of each effect, Prefer: return=minimal's 204, and HTTPS with a CA file. The HTTP servers here
 * answer canned replies to the client's transport; the behaviour against a real gateway is
 * gateway.test.ts's and the conformance scenarios'.
 */

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { Client, PROBLEM_CLASSES, ProblemError, UnreachableError, problemError } from "../src/index.js";

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
