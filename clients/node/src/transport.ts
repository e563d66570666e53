// SPDX-License-Identifier: Apache-2.0
/**
 * HTTP transport of the fencegate client: one keep-alive connection pool (node:http / node:https agents,
 * which take a CA file, unlike the global fetch of Node 18), bearer keys, timeouts and AbortSignals, JSON,
 * error answers turned into typed errors, and the one rule of retries. Must not: know what a route means
 * beyond the Effect its caller declares.
 *
 * A call is sent again only if sending it twice cannot do more than sending it once. "read" and
 * "idempotent" calls are retried after a connection error and after a 503, waiting as Retry-After says
 * (else an exponential backoff with jitter), within the RetryPolicy. Acquires are "idempotent" because they
 * always carry a request_id that the gateway answers a repeat of with the same lease. "once" calls
 * (inserts, deletes, batches with them, revoking a lock) are sent again only when the request certainly
 * never left (the connection could not be opened).
 *
 * A fenced write sent again after a try that may have been applied (it got no answer, or a 5xx: the
 * gateway's own commit may have been lost) is answered for the retry alone: the gateway takes a fence equal
 * to the stored one, so a retry of an applied write is applied again, but a refusal (a newer fence wrote,
 * the lease was revoked meanwhile) does not say that the earlier try changed nothing. Such a write rejects
 * with an OutcomeUnknownError, not with the refusal; so does one whose lease the client learns is lost
 * before a retry, or whose signal aborts, after such a try, and a write answered a 5xx and not retried.
 * Before each try of a write, its lease is checked again: a lease known lost sends nothing more.
 *
 * Only a 2xx answer is a success: a 3xx is a RedirectError (never followed), a 4xx or 5xx a ProblemError.
 * And only a 2xx the gateway gives: a JSON object, or its 204 to Prefer: return=minimal. Another 2xx (an
 * HTML page of a web server at a wrong URL, a proxy's own page, an empty 200) comes from something else at
 * the gateway's address and says nothing of the call: it is no answer, as a lost reply (an UnreachableError,
 * sent, retried as the call's effect allows), never a result.
 */

import { readFileSync } from "node:fs";
import * as http from "node:http";
import * as https from "node:https";

import { InvalidNameError, OutcomeUnknownError, ProblemError, RedirectError, UnreachableError, problemError }
  from "./errors.js";
import { parseJson, stringifyJson } from "./json.js";

/** The client's version, the gateway's. */
export const VERSION = "0.1.0";

/** What sending a call twice would do. */
export type Effect = "read" | "idempotent" | "once";

/** How calls that may be repeated are retried. */
export interface RetryPolicy {
  /** Most tries of one call, the first included (default 5). */
  attempts: number;
  /** Most milliseconds spent waiting between tries of one call (default 15000). */
  budgetMs: number;
  /** First pause when the gateway names none, doubled each time (default 50). */
  backoffMs: number;
  /** Largest such pause (default 2000). */
  maxBackoffMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 5, budgetMs: 15000, backoffMs: 50, maxBackoffMs: 2000 };
export const NO_RETRY: RetryPolicy = { attempts: 1, budgetMs: 0, backoffMs: 0, maxBackoffMs: 0 };

/** Options of a Client; every member is optional. */
/** The longest timeoutMs: Node's timers hold 2^31-1 ms, and an acquire's timer adds its wait, up to an hour. */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1 - 3_600_000;

export interface ClientOptions {
  /** http://host:port or https://host:port (default $FENCEGATE_URL, else http://127.0.0.1:8480). */
  url?: string;
  /** Bearer key (default $FENCEGATE_KEY; "" sends none). */
  apiKey?: string;
  /** PEM file of the CA that signed the gateway's certificate (default $FENCEGATE_CACERT, else the system's). */
  caFile?: string;
  /**
   * Milliseconds to connect and to wait for an answer, on top of any wait the call asks for (default 10000);
   * an acquire without waitMs allows for the gateway's longest default wait, an hour. At most MAX_TIMEOUT_MS
   * (about 24 days); a larger one, Infinity included, is refused with a RangeError.
   */
  timeoutMs?: number;
  /** How calls that may be repeated are retried. */
  retry?: Partial<RetryPolicy>;
  /** Default owner of leases and Fence-Owner of writes, shown in status and audit records. */
  owner?: string;
}

/** One call. */
export interface Call {
  method: string;
  /** Percent-encoded, without the base URL's path. */
  path: string;
  query?: Record<string, string | number | bigint | boolean | undefined>;
  /** The body, or a function called before each try (an acquire sends what is left of its wait). */
  body?: unknown;
  headers?: Record<string, string>;
  effect: Effect;
  /** How long the gateway may hold the call before answering, added to the timeout. */
  waitMs?: number;
  /** Replaces the client's timeout. */
  timeoutMs?: number;
  /** Replaces the client's retry policy. */
  retry?: RetryPolicy;
  /** Ends the call (and its retries) when aborted. */
  signal?: AbortSignal | undefined;
  /** A call of the background keeper: it does not keep the process alive. */
  background?: boolean;
  /**
   * A fenced write or a revoke: a failure after a try that may have been applied leaves its outcome unknown.
   */
  write?: boolean;
  /**
   * Called before each try (a write's lease check); what it throws ends the call without sending that try,
   * as an OutcomeUnknownError for a write after a try that may have been applied.
   */
  check?: () => void;
  /** Told of each try that was sent and got no answer (it may have taken effect unheard). */
  unanswered?: () => void;
}

/** A successful answer: the status and the parsed JSON body (undefined when empty), its fences bigints. */
export interface Answer {
  status: number;
  body: any;
}

const CERT_ERRORS = new Set(["UNABLE_TO_VERIFY_LEAF_SIGNATURE", "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN", "CERT_HAS_EXPIRED", "ERR_TLS_CERT_ALTNAME_INVALID", "UNABLE_TO_GET_ISSUER_CERT_LOCALLY"]);

/**
 * Percent-encodes one path segment (a name, a table, a key): everything but unreserved characters. Throws
 * InvalidNameError (status 0: nothing was sent) for text with a lone surrogate, which has no UTF-8 spelling:
 * the gateway answers a malformed sequence in a path so. Callers throw it from async functions only, so
 * that it rejects their promise.
 */
export function segment(s: string | number): string {
  let encoded: string;
  try {
    encoded = encodeURIComponent(String(s));
  } catch {
    throw new InvalidNameError({ status: 0, code: "invalid_name",
      detail: "a path parameter (a name, a table, a key) is not Unicode text: it holds a lone surrogate" });
  }
  return encoded.replace(/[!'()*]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase());
}

/** Sleeps ms, or until signal aborts (then throws its reason). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Whether a try that failed with error may have taken effect: it was sent and got no answer, or a 5xx (the
 * gateway answers 503 when its connection to a backend failed during the commit).
 */
function mayHaveApplied(error: Error): boolean {
  return (error instanceof UnreachableError && error.sent) || (error instanceof ProblemError && error.status >= 500);
}

/**
 * Whether a 2xx answer is one the gateway gives: a JSON object (raw, read as JSON since its Content-Type says
 * json, as body), or no body at all in a 204 to a call that asked for Prefer: return=minimal.
 */
function gatewaySuccess(status: number, raw: string, json: boolean, body: unknown, minimal: boolean): boolean {
  if (status === 204) return minimal && raw === "";
  return json && body !== null && typeof body === "object" && !Array.isArray(body);
}

/** What ended a call (a lease check's error, an abort's reason) as an Error, the last of an OutcomeUnknownError. */
function asError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}

interface TryResult {
  answer?: Answer;
  error?: Error;
  again: boolean;
  retryAfterS?: number | undefined;
}

/** url parsed, or undefined: URL's own error would carry the text whole (its input), credentials too. */
function parsedURL(url: string): URL | undefined {
  try {
    return new URL(url);
  } catch {
    return undefined;
  }
}

/**
 * The URL text url as an error may show it: what comes before the last "@" after its scheme (user:password)
 * as "***". Read as text, not parsed, so that a URL that does not parse is cut too; an "@" later in the URL
 * only hides more of it.
 */
function withoutCredentials(url: string): string {
  const scheme = url.indexOf("://");
  const start = scheme < 0 ? 0 : scheme + 3;
  const at = url.lastIndexOf("@");
  return at < start ? url : url.slice(0, start) + "***" + url.slice(at);
}

/** Sends JSON calls to one gateway through one connection pool. */
export class Transport {
  readonly base: URL;
  /** The base URL's host for node:http: an IPv6 literal without the brackets of its URL form. */
  private readonly hostname: string;
  readonly timeoutMs: number;
  readonly retry: RetryPolicy;
  private readonly key: string;
  private readonly agent: http.Agent;

  constructor(options: ClientOptions = {}) {
    const url = options.url || process.env.FENCEGATE_URL || "http://127.0.0.1:8480";
    const base = parsedURL(url);
    if (!base || (base.protocol !== "http:" && base.protocol !== "https:") || !base.hostname) {
      throw new TypeError("the gateway URL must be http://host[:port] or https://host[:port], not " +
        withoutCredentials(url));
    }
    this.base = base;
    // Credentials in the URL are never sent (the key goes in apiKey), so they are not kept either.
    this.base.username = "";
    this.base.password = "";
    // node:http looks "[::1]" up as a name; given "::1" it connects, and writes the Host header "[::1]:port"
    // itself (no port when it is the scheme's default, as URL.port leaves it out).
    this.hostname = this.base.hostname.replace(/^\[(.*)\]$/, "$1");
    this.key = options.apiKey ?? process.env.FENCEGATE_KEY ?? "";
    this.timeoutMs = options.timeoutMs ?? 10000;
    if (!(this.timeoutMs > 0 && this.timeoutMs <= MAX_TIMEOUT_MS)) {
      // Node fires a timer of more than 2^31-1 ms (Infinity included) after 1 ms: every call would be cut.
      throw new RangeError(`timeoutMs must be a number of milliseconds from 1 to ${MAX_TIMEOUT_MS}, ` +
        `not ${this.timeoutMs}`);
    }
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    const caFile = options.caFile || process.env.FENCEGATE_CACERT;
    // No cap on the pool's sockets: each held lease parks one in a watch's long poll (25 s), a waiting
    // acquire one for its wait, and a cap would queue renewals, releases and writes behind them until the
    // leases ran out unrenewed.
    this.agent = this.base.protocol === "https:"
      ? new https.Agent({ keepAlive: true, ca: caFile ? readFileSync(caFile) : undefined, minVersion: "TLSv1.2" })
      : new http.Agent({ keepAlive: true });
  }

  /** Closes the pool's connections. */
  close(): void {
    this.agent.destroy();
  }

  /**
   * Sends a call and returns its answer; throws a ProblemError subclass for an error answer, an
   * UnreachableError when none came, what call.check threw, or the signal's reason when it aborted, after
   * the retries that the call's effect allows. For a write, any of these after a try that may have been
   * applied, or a 5xx answer to its last try, is an OutcomeUnknownError instead (one with no answer at all
   * says so itself: an UnreachableError, sent).
   */
  async call(call: Call): Promise<Answer> {
    const policy = call.retry ?? this.retry;
    const op = `${call.method} ${call.path}`;
    let waited = 0;
    let earlier: Error | undefined; // the failure of an earlier try of a write that may have been applied
    // The error that ends a write: after a try that may have been applied, its outcome is unknown.
    const unknownAfter = (error: unknown): unknown =>
      earlier === undefined ? error : new OutcomeUnknownError(op, earlier, asError(error));
    for (let attempt = 1; ; attempt++) {
      try {
        call.check?.();
      } catch (e) {
        throw unknownAfter(e);
      }
      const result = await this.try(call);
      if (result.answer) return result.answer;
      const error = result.error!;
      if (error instanceof UnreachableError && error.sent) call.unanswered?.();
      if (call.write && earlier === undefined && mayHaveApplied(error)) earlier = error;
      if (call.signal?.aborted) throw unknownAfter(call.signal.reason);
      const pause = result.retryAfterS !== undefined
        ? result.retryAfterS * 1000
        : Math.min(policy.maxBackoffMs, policy.backoffMs * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2);
      if (!result.again || attempt >= policy.attempts || waited + pause > policy.budgetMs) {
        // A write's last failure leaves its outcome unknown after a try that may have been applied, this
        // one included (a 5xx), unless it says so itself.
        if (earlier === undefined || (error instanceof UnreachableError && error.sent)) throw error;
        throw new OutcomeUnknownError(op, earlier, error);
      }
      try {
        await sleep(pause, call.signal);
      } catch (e) {
        throw unknownAfter(e);
      }
      waited += pause;
    }
  }

  private try(call: Call): Promise<TryResult> {
    let target = this.base.pathname.replace(/\/$/, "") + call.path;
    const query = Object.entries(call.query ?? {}).filter(([, v]) => v !== undefined);
    if (query.length) target += "?" + new URLSearchParams(query.map(([k, v]): [string, string] => [k, String(v)])).toString();
    const payload = typeof call.body === "function" ? (call.body as () => unknown)() : call.body;
    const data = payload === undefined ? undefined : Buffer.from(stringifyJson(payload));
    const headers: Record<string, string> = { Accept: "application/json", "User-Agent": `fencegate-node/${VERSION}` };
    if (data) {
      headers["Content-Type"] = "application/json";
      headers["Content-Length"] = String(data.length);
    }
    if (this.key) headers.Authorization = `Bearer ${this.key}`;
    Object.assign(headers, call.headers);
    // Node writes a header's string one byte per character (Latin-1): each value is handed over as the
    // Latin-1 spelling of its UTF-8 bytes, so text beyond ASCII (an owner, a key) arrives as UTF-8.
    for (const [name, value] of Object.entries(headers)) headers[name] = Buffer.from(value, "utf8").toString("latin1");
    const op = `${call.method} ${call.path}`;
    const module = this.base.protocol === "https:" ? https : http;
    return new Promise<TryResult>((resolve) => {
      let connected = false;
      let settled = false;
      let stopListening: (() => void) | undefined; // removes the listener of a socket still connecting
      const settle = (r: TryResult): void => {
        if (!settled) {
          settled = true;
          clearTimeout(timer);
          call.signal?.removeEventListener("abort", onAbort);
          stopListening?.();
          resolve(r);
        }
      };
      const req = module.request({
        agent: this.agent, protocol: this.base.protocol, hostname: this.hostname, port: this.base.port,
        method: call.method, path: target, headers,
      }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", (e) => settle({ error: new UnreachableError(`${op}: ${e.message}`, true, { cause: e }),
          again: call.effect !== "once" }));
        res.on("end", () => {
          const raw = Buffer.concat(chunks).toString("utf8");
          const json = (res.headers["content-type"] ?? "").includes("json");
          let body: unknown = raw || undefined;
          if (raw && json) {
            try {
              body = parseJson(raw);
            } catch {
              body = raw;
            }
          }
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300) {
            if (!gatewaySuccess(status, raw, json, body, call.headers?.Prefer === "return=minimal")) {
              // Something else at the gateway's address answered: no answer of the call, as a lost reply.
              settle({ error: new UnreachableError(`${op}: no answer from the gateway: a ${status} whose body is not `
                + `the gateway's (Content-Type ${JSON.stringify(res.headers["content-type"] ?? "")}, ${raw.length} `
                + "characters)", true), again: call.effect !== "once" });
              return;
            }
            settle({ answer: { status, body }, again: false });
            return;
          }
          if (status >= 300 && status < 400) {
            const redirect = new RedirectError({ status, code: `http_${status}`,
              detail: `${op}: answered ${status} ${res.statusMessage ?? ""}, a redirect, which the client does not follow`
                + (res.headers.location ? ` (Location: ${res.headers.location})` : "") });
            redirect.location = res.headers.location;
            settle({ error: redirect, again: false });
            return;
          }
          const ra = Number(res.headers["retry-after"]);
          const retryAfterS = res.headers["retry-after"] !== undefined && ra >= 0 ? ra : undefined;
          const rid = res.headers["x-request-id"];
          settle({ error: problemError(status, body, typeof rid === "string" ? rid : undefined, retryAfterS),
            again: status === 503 && call.effect !== "once", retryAfterS });
        });
      });
      req.on("socket", (socket) => {
        if (call.background) socket.unref();
        // A kept-alive socket is connected already and never emits the event again: a listener there would
        // stay, holding this call, for as long as the socket lives.
        if (!socket.connecting) {
          connected = true;
          return;
        }
        const event = this.base.protocol === "https:" ? "secureConnect" : "connect";
        const onConnect = (): void => { connected = true; };
        socket.once(event, onConnect);
        stopListening = () => socket.removeListener(event, onConnect);
      });
      req.on("error", (e: NodeJS.ErrnoException) => {
        const certificate = CERT_ERRORS.has(e.code ?? "");
        const sent = connected && !certificate;
        settle({ error: new UnreachableError(`${op}: no answer from ${this.base.origin}: ${e.message}`, sent, { cause: e }),
          again: !certificate && (!sent || call.effect !== "once") && !call.signal?.aborted });
      });
      const onAbort = (): void => {
        req.destroy(call.signal?.reason instanceof Error ? call.signal.reason : new Error("aborted"));
      };
      call.signal?.addEventListener("abort", onAbort, { once: true });
      const timeoutMs = (call.timeoutMs ?? this.timeoutMs) + (call.waitMs ?? 0);
      const timer = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)),
        Math.min(timeoutMs, 2 ** 31 - 1));
      if (call.background) timer.unref();
      if (call.signal?.aborted) onAbort();
      req.end(data);
    });
  }
}
