# SPDX-License-Identifier: Apache-2.0
"""Errors raised by the fencegate client: one exception class per problem code of the gateway.

Every error the gateway answers is an RFC 9457 problem (``{"type": "/problems/<code>", ...}``); the
client raises the class that :data:`PROBLEM_CLASSES` maps that code to, carrying the status, the
title, the detail, the extra members (``presented_fence``, ``waiting``, ...) and the gateway's
``X-Request-Id``. A code this version does not know raises the plain :class:`ProblemError`, and a
status the gateway never answers (a redirect, say) :class:`UnexpectedStatus`.

When no answer came at all (connection refused, reset, timed out) the client raises
:class:`GatewayUnreachable`; a fenced write that may have been applied (a try of it got no answer or a
5xx) and whose last try failed raises :class:`OutcomeUnknown`, one of them. :class:`LeaseLost` is also
raised by the client itself, without asking the gateway, when it already knows that a lease has ended.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Type


class FencegateError(Exception):
    """Base class of every error of this package."""


class GatewayUnreachable(FencegateError, ConnectionError):
    """No answer from the gateway: connection refused or reset, or no reply within the timeout.

    ``sent`` says whether the request may have reached the gateway, any of its tries (False: none did, for
    example because every connection was refused), so whether its effect is unknown.
    """

    def __init__(self, message: str, sent: bool = True) -> None:
        super().__init__(message)
        self.sent = sent


class OutcomeUnknown(GatewayUnreachable):
    """A fenced write may have been applied, but no answer says so: a try was answered with a 5xx (the
    gateway's own commit may have been lost), or the write was sent again after a try that may have been
    applied (it got no answer, or a 5xx) and the last try failed too. Also a revoke, of a lock or of a
    semaphore's holder, whose last try was answered with a 5xx: it may have been recorded all the same.

    ``last`` (a BackendUnavailable; a StaleFence because a newer fence wrote meanwhile, a LeaseLost, ...)
    speaks for the last try alone, so whether the write took effect is unknown: read the resource to find
    out. ``earlier`` is the failure of the first try that may have been applied (``last`` itself when that
    was the only one). (A retry of an applied write is not refused for it: the gateway takes a fence equal
    to the stored one.) A GatewayUnreachable with ``sent`` True, since it means the same.
    """

    def __init__(self, op: str, earlier: Exception, last: Exception) -> None:
        if earlier is last:
            message = f"{op}: outcome unknown: it may have been applied ({last})"
        else:
            message = (f"{op}: outcome unknown: an earlier try may have been applied ({earlier}); "
                       f"the last one failed: {last}")
        super().__init__(message, sent=True)
        self.earlier = earlier
        self.last = last


class ProblemError(FencegateError):
    """The gateway refused a request with a problem+json answer.

    Attributes: ``status`` (HTTP status, or None when raised by the client itself), ``code`` (the last
    segment of the problem type, e.g. ``"lock_busy"``), ``title``, ``detail``, ``problem`` (the whole
    problem body, extra members included), ``request_id`` (the gateway's X-Request-Id, to find the
    request in its log) and ``retry_after`` (seconds, from Retry-After, or None).
    """

    code = "problem"

    def __init__(self, status: Optional[int], code: str, detail: str = "", title: str = "",
                 problem: Optional[Mapping[str, Any]] = None, request_id: Optional[str] = None,
                 retry_after: Optional[float] = None) -> None:
        prefix = f"{status} {code}" if status is not None else code
        super().__init__(f"{prefix}: {detail or title or 'no detail'}")
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.problem: Dict[str, Any] = dict(problem or {})
        self.request_id = request_id
        self.retry_after = retry_after

    def extra(self, member: str) -> Any:
        """A member of the problem body beyond type/title/status/detail (None when absent)."""
        return self.problem.get(member)


class InvalidJson(ProblemError):
    """400: the request body is not valid JSON."""


class InvalidName(ProblemError):
    """400: a lock or semaphore name outside 1-200 bytes of ``A-Z a-z 0-9 . _ : / -``."""


class InvalidField(ProblemError):
    """400: a field of the wrong type or out of range, or an unknown field or query parameter."""


class Unauthorized(ProblemError):
    """401: missing or unknown bearer key while the gateway requires one."""


class Forbidden(ProblemError):
    """403: the key is valid but lacks the scope this call needs."""

    @property
    def scope(self) -> Optional[str]:
        """The scope the call needs, e.g. ``lock:invoice:42``."""
        return self.extra("scope")


class InvalidFenceToken(ProblemError):
    """403: the gateway does not accept this Fence-Token (forged, altered, issued for another lock,
    revoked, or signed by a key it no longer has)."""


class NotFound(ProblemError):
    """404: unknown route, table, row or key."""


class MethodNotAllowed(ProblemError):
    """405: the route exists but not for this method (also what a gateway without a newer route of the
    same shape answers, e.g. ``revoke`` before version 1.1)."""


class LockBusy(ProblemError):
    """409: the lock (or semaphore slot) was not obtained within ``wait_ms``."""

    @property
    def waiting(self) -> Optional[int]:
        """How many waiters were queued, as the gateway reported it."""
        return self.extra("waiting")

    @property
    def lock(self) -> Optional[str]:
        """For a lock set: the lock that was not obtained."""
        return self.extra("lock")


class StaleFence(ProblemError):
    """409: the write's fence is older than the highest fence stored for the resource; nothing changed."""

    @property
    def presented_fence(self) -> Optional[int]:
        """The fence of the refused write."""
        return self.extra("presented_fence")

    @property
    def current_fence(self) -> Optional[int]:
        """The highest fence stored for the resource."""
        return self.extra("current_fence")

    @property
    def resource(self) -> Optional[str]:
        """The resource, e.g. ``pg:invoices/42`` or ``redis:app:x``."""
        return self.extra("resource")


class LimitMismatch(ProblemError):
    """409: a semaphore acquire named a different limit than the one in force."""


class MaxHoldExceeded(ProblemError):
    """409: the lease reached its ``max_hold_ms`` deadline and cannot be renewed further."""


class Conflict(ProblemError):
    """409: an insert whose key already exists."""


class LeaseLost(ProblemError):
    """410: the token no longer holds its lease (expired, taken over, revoked).

    Also raised by the client without a round trip when it already knows the lease ended; ``status``
    is None then and ``reason`` says how the client learnt it (``expired``, ``revoked``, ...).
    """

    @property
    def reason(self) -> Optional[str]:
        """Why the lease ended, when known."""
        return self.extra("reason")


class BodyTooLarge(ProblemError):
    """413: the request body is over the gateway's maximum."""


class UnsupportedMediaType(ProblemError):
    """415: a body without ``Content-Type: application/json``."""


class MisdirectedRequest(ProblemError):
    """421: the ``Host`` header is not one the gateway serves."""


class TooManyWaiters(ProblemError):
    """429: the per-lock or per-process waiter cap is reached."""


class BackendUnavailable(ProblemError):
    """503: Redis or Postgres is unreachable; ``retry_after`` says when to try again. A fenced write
    answered so raises OutcomeUnknown instead, with this as its ``last``: it may have been applied."""


class UnexpectedStatus(ProblemError):
    """An answer with a status the gateway never gives: a 3xx (a redirect, from a proxy in between or a URL
    that points elsewhere), a 1xx, or one past 599. Nothing was done for the call where it was answered, and
    the client follows no redirect: the Fence-Token and the API key would go to another address, and a
    write redirected as a GET would read as done. ``code`` is ``http_<status>``; ``location`` the target
    a redirect named (None without one)."""

    def __init__(self, status: int, location: Optional[str] = None, request_id: Optional[str] = None) -> None:
        super().__init__(status, f"http_{status}", detail=f"the gateway never answers {status}; the client "
                         "follows no redirect", title="Unexpected status", request_id=request_id)
        self.location = location


class InternalError(ProblemError):
    """500: the gateway failed in a way that is not the request's fault (``internal``, or ``config`` for a
    configuration it cannot use); its log has the details under the request's ``request_id``."""


PROBLEM_CLASSES: Dict[str, Type[ProblemError]] = {
    "invalid_json": InvalidJson,
    "invalid_name": InvalidName,
    "invalid_field": InvalidField,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "invalid_fence_token": InvalidFenceToken,
    "not_found": NotFound,
    "method_not_allowed": MethodNotAllowed,
    "lock_busy": LockBusy,
    "stale_fence": StaleFence,
    "limit_mismatch": LimitMismatch,
    "max_hold_exceeded": MaxHoldExceeded,
    "conflict": Conflict,
    "lease_lost": LeaseLost,
    "body_too_large": BodyTooLarge,
    "unsupported_media_type": UnsupportedMediaType,
    "misdirected_request": MisdirectedRequest,
    "too_many_waiters": TooManyWaiters,
    "backend_unavailable": BackendUnavailable,
    "internal": InternalError,
    "config": InternalError,
}
"""Problem code → exception class; a code missing here raises :class:`ProblemError`."""


def problem_error(status: int, body: Any, request_id: Optional[str] = None,
                  retry_after: Optional[float] = None) -> ProblemError:
    """The exception for an error answer: status, its parsed body (a problem dict, or anything else for
    an answer that is not problem+json), the X-Request-Id and Retry-After headers."""
    problem: Mapping[str, Any] = body if isinstance(body, dict) else {}
    ptype = str(problem.get("type", ""))
    code = ptype.rsplit("/", 1)[-1] if ptype.startswith("/problems/") else f"http_{status}"
    cls = PROBLEM_CLASSES.get(code, ProblemError)
    detail = str(problem.get("detail", "")) if problem else (body if isinstance(body, str) else "")[:200]
    return cls(status, code, detail=detail, title=str(problem.get("title", "")), problem=problem,
               request_id=request_id, retry_after=retry_after)


def lease_lost(name: str, reason: str) -> LeaseLost:
    """The LeaseLost the client raises on its own for lease ``name`` that ended for ``reason``."""
    return LeaseLost(None, "lease_lost", detail=f"the lease on {name} is lost ({reason})",
                     problem={"reason": reason})
