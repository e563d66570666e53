// SPDX-License-Identifier: Apache-2.0
/**
 * Errors of the fencegate client: one class per problem code of the gateway, each carrying the problem's
 * fields, and the error of calls that got no answer. Owns: the classes and the map from codes to them.
 * Must not: send anything (transport.ts turns error answers into these classes).
 */

/** Base class of every error of this package. */
export class FencegateError extends Error {
  override name = "FencegateError";
  /**
   * Set on the error of an acquire that may have been granted without the client hearing the answer (a
   * try sent and not answered, or answered a 5xx), when the client could not give that grant back: the
   * acquire's request_id.
   * An acquire with it (LeaseOptions.requestId) answers that same lease while it holds, to use or release.
   */
  leaseRequestId: string | undefined;
}

/**
 * No answer from the gateway: connection refused or reset, or no reply in time. `sent` says whether the
 * request may have reached the gateway (false: it certainly did not), so whether its effect is unknown.
 */
export class UnreachableError extends FencegateError {
  override name = "UnreachableError";
  constructor(message: string, readonly sent: boolean, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * A fenced write whose effect is unknown: a try that may have been applied (it got no answer, or a 5xx: the
 * gateway's own commit may have been lost), `earlier`, was followed by a failure that says nothing of it,
 * `last`: a refusal of a retry (a StaleFenceError because a newer fence wrote meanwhile, a LeaseLostError,
 * ...), the lease known lost before a retry, the caller's signal aborting, or, for a write that is not
 * retried (an insert, a delete, a batch with them) and for a lock's revoke (which may have been recorded),
 * that 5xx itself (then `last` is `earlier`), for a semaphore's revoke (retried) the 5xx of its last try.
 * Read the resource to find out. (A retry of an applied write is not refused for it: the gateway takes a
 * fence equal to the stored one.) An UnreachableError with `sent` true, since it means the same: the effect
 * is unknown.
 */
export class OutcomeUnknownError extends UnreachableError {
  override name = "OutcomeUnknownError";
  constructor(op: string, readonly earlier: Error, readonly last: Error) {
    super(earlier === last ? `${op}: outcome unknown: it may have been applied (${last.message})`
      : `${op}: outcome unknown: an earlier try may have been applied (${earlier.message}); the last one failed: `
        + last.message, true, { cause: earlier });
  }
}

/** What a problem error is made of. */
export interface ProblemInit {
  /** HTTP status; 0 when the client raised it without asking the gateway. */
  status: number;
  /** The last segment of the problem type, e.g. "lock_busy". */
  code: string;
  title?: string;
  detail?: string;
  /** The whole problem body, extra members included. */
  problem?: Record<string, unknown>;
  /** The gateway's X-Request-Id, to find the request in its log. */
  requestId?: string | undefined;
  /** Seconds, from Retry-After. */
  retryAfter?: number | undefined;
}

/** The gateway refused a request with an RFC 9457 problem. */
export class ProblemError extends FencegateError {
  override name = "ProblemError";
  readonly status: number;
  readonly code: string;
  readonly title: string;
  readonly detail: string;
  readonly problem: Record<string, unknown>;
  readonly requestId: string | undefined;
  readonly retryAfter: number | undefined;

  constructor(init: ProblemInit) {
    const prefix = init.status ? `${init.status} ${init.code}` : init.code;
    super(`${prefix}: ${init.detail || init.title || "no detail"}`);
    this.status = init.status;
    this.code = init.code;
    this.title = init.title ?? "";
    this.detail = init.detail ?? "";
    this.problem = init.problem ?? {};
    this.requestId = init.requestId;
    this.retryAfter = init.retryAfter;
  }

  /** A member of the problem body beyond type/title/status/detail. */
  extra(member: string): unknown {
    return this.problem[member];
  }

  protected num(member: string): number | undefined {
    const v = this.problem[member];
    return typeof v === "number" ? v : undefined;
  }

  /** A fence member, exact (the transport reads fences as bigints). */
  protected fence(member: string): bigint | undefined {
    const v = this.problem[member];
    return typeof v === "bigint" ? v : typeof v === "number" && Number.isSafeInteger(v) ? BigInt(v) : undefined;
  }

  protected str(member: string): string | undefined {
    const v = this.problem[member];
    return typeof v === "string" ? v : undefined;
  }
}

/** 400: the request body is not valid JSON. */
export class InvalidJsonError extends ProblemError { override name = "InvalidJsonError"; }
/** 400: a name outside 1-200 bytes of A-Z a-z 0-9 . _ : / -. */
export class InvalidNameError extends ProblemError { override name = "InvalidNameError"; }
/** 400: a field of the wrong type or out of range, or an unknown field or query parameter. */
export class InvalidFieldError extends ProblemError { override name = "InvalidFieldError"; }
/** 401: a missing or unknown bearer key while the gateway requires one. */
export class UnauthorizedError extends ProblemError { override name = "UnauthorizedError"; }
/** 403: the key is valid but lacks the scope this call needs. */
export class ForbiddenError extends ProblemError {
  override name = "ForbiddenError";
  /** The scope the call needs, e.g. "lock:invoice:42". */
  get scope(): string | undefined { return this.str("scope"); }
}
/** 403: a forged or altered token, one issued for another lock, a revoked one, or one of a retired key. */
export class InvalidFenceTokenError extends ProblemError { override name = "InvalidFenceTokenError"; }
/** 404: unknown route, table, row or key. */
export class NotFoundError extends ProblemError { override name = "NotFoundError"; }
/** 405: the route exists but not for this method. */
export class MethodNotAllowedError extends ProblemError { override name = "MethodNotAllowedError"; }
/** 409: the lock or slot was not obtained within the wait. */
export class LockBusyError extends ProblemError {
  override name = "LockBusyError";
  /** The queue length the gateway reported. */
  get waiting(): number | undefined { return this.num("waiting"); }
  /** For a lock set: the lock that was not obtained. */
  get lock(): string | undefined { return this.str("lock"); }
}
/** 409: the write's fence is older than the highest stored for the resource; nothing changed. */
export class StaleFenceError extends ProblemError {
  override name = "StaleFenceError";
  /** The fence of the refused write (exact, a bigint). */
  get presentedFence(): bigint | undefined { return this.fence("presented_fence"); }
  /** The highest fence stored for the resource (exact, a bigint). */
  get currentFence(): bigint | undefined { return this.fence("current_fence"); }
  /** The resource, e.g. "pg:invoices/42" or "redis:app:x". */
  get resource(): string | undefined { return this.str("resource"); }
}
/** 409: a semaphore acquire named another limit than the one in force. */
export class LimitMismatchError extends ProblemError { override name = "LimitMismatchError"; }
/** 409: the lease reached its max_hold_ms deadline. */
export class MaxHoldExceededError extends ProblemError { override name = "MaxHoldExceededError"; }
/** 409: an insert whose key already exists. */
export class ConflictError extends ProblemError { override name = "ConflictError"; }
/**
 * 410: the token no longer holds its lease (expired, taken over, revoked). Also thrown by the client with
 * status 0, without a round trip, when it already knows the lease ended.
 */
export class LeaseLostError extends ProblemError {
  override name = "LeaseLostError";
  /** Why the lease ended, when known ("expired", "revoked", "unrenewed", ...). */
  get reason(): string | undefined { return this.str("reason"); }
}
/** 413: the request body is over the gateway's maximum. */
export class BodyTooLargeError extends ProblemError { override name = "BodyTooLargeError"; }
/** 415: a body without Content-Type: application/json. */
export class UnsupportedMediaTypeError extends ProblemError { override name = "UnsupportedMediaTypeError"; }
/** 421: the Host header is not one the gateway serves. */
export class MisdirectedRequestError extends ProblemError { override name = "MisdirectedRequestError"; }
/** 429: a waiter cap or the key's quota is reached. */
export class TooManyWaitersError extends ProblemError { override name = "TooManyWaitersError"; }
/** 503: Redis or Postgres is unreachable; `retryAfter` says when to come back. */
export class BackendUnavailableError extends ProblemError { override name = "BackendUnavailableError"; }
/** 500: internal, or config for a configuration the gateway cannot use; its log has the details. */
export class InternalError extends ProblemError { override name = "InternalError"; }

/**
 * A 3xx answer, which the gateway's API never gives (a proxy in front of it, or a URL that names another
 * service, does). The client follows no redirect: a write and its Fence-Token, or the API key, must not go
 * to another address. Not retried. `code` is "http_" and the status (say "http_301"), not a gateway code.
 */
export class RedirectError extends ProblemError {
  override name = "RedirectError";
  /** The Location header of the answer, if any. */
  location: string | undefined;
}

/** Problem code → error class (checked against the gateway's table, clients/conformance/codes.json). */
export const PROBLEM_CLASSES: Readonly<Record<string, new (init: ProblemInit) => ProblemError>> = {
  invalid_json: InvalidJsonError,
  invalid_name: InvalidNameError,
  invalid_field: InvalidFieldError,
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  invalid_fence_token: InvalidFenceTokenError,
  not_found: NotFoundError,
  method_not_allowed: MethodNotAllowedError,
  lock_busy: LockBusyError,
  stale_fence: StaleFenceError,
  limit_mismatch: LimitMismatchError,
  max_hold_exceeded: MaxHoldExceededError,
  conflict: ConflictError,
  lease_lost: LeaseLostError,
  body_too_large: BodyTooLargeError,
  unsupported_media_type: UnsupportedMediaTypeError,
  misdirected_request: MisdirectedRequestError,
  too_many_waiters: TooManyWaitersError,
  backend_unavailable: BackendUnavailableError,
  internal: InternalError,
  config: InternalError,
};

/** The error for an error answer: its status, parsed body, X-Request-Id and Retry-After (seconds). */
export function problemError(status: number, body: unknown, requestId?: string, retryAfter?: number): ProblemError {
  const problem = body !== null && typeof body === "object" ? (body as Record<string, unknown>) : {};
  const type = typeof problem.type === "string" ? problem.type : "";
  const code = type.startsWith("/problems/") ? type.slice("/problems/".length) : `http_${status}`;
  // Its own members only: a type naming one of Object.prototype's ("/problems/constructor", "toString") is
  // no code of the gateway's, and must not pick a function that is no error class.
  const Class = Object.prototype.hasOwnProperty.call(PROBLEM_CLASSES, code) ? PROBLEM_CLASSES[code]! : ProblemError;
  const detail = typeof problem.detail === "string" ? problem.detail : typeof body === "string" ? body.slice(0, 200) : "";
  const title = typeof problem.title === "string" ? problem.title : "";
  return new Class({ status, code, title, detail, problem, requestId, retryAfter });
}

/** The LeaseLostError the client throws on its own for the lease on `name`, ended for `reason`. */
export function leaseLost(name: string, reason: string): LeaseLostError {
  return new LeaseLostError({ status: 0, code: "lease_lost", detail: `the lease on ${name} is lost (${reason})`,
    problem: { reason } });
}
