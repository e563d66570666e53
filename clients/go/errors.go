// SPDX-License-Identifier: Apache-2.0

// errors.go owns the errors of the client: one type per problem code of the gateway, each carrying the
// problem's fields, the Problem they all share, and the errors of calls that got no answer. It must not
// send anything; transport.go turns error answers into these types.

package fencegate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"
)

// Problem is an RFC 9457 problem answered by the gateway, or one with Status 0 raised by the client itself:
// a LeaseLostError when it already knows a lease has ended, an InvalidJSONError for a body whose text is
// not UTF-8. Every typed error embeds one, so
//
//	var p *fencegate.Problem
//	if errors.As(err, &p) { log.Print(p.Code, p.RequestID) }
//
// works for all of them.
type Problem struct {
	Status     int            // HTTP status; 0 when the client raised it without asking the gateway
	Code       string         // last segment of the problem type, e.g. "lock_busy"
	Title      string         // the problem's title
	Detail     string         // what exactly was wrong with this request
	RequestID  string         // the gateway's X-Request-Id, to find the request in its log
	RetryAfter time.Duration  // from Retry-After; 0 when absent
	Members    map[string]any // the whole problem body, extra members included
	body       []byte         // the body as answered, for the members read as exact integers
}

func (p *Problem) Error() string {
	detail := p.Detail
	if detail == "" {
		detail = p.Title
	}
	if p.Status == 0 {
		return fmt.Sprintf("fencegate: %s: %s", p.Code, detail)
	}
	return fmt.Sprintf("fencegate: %d %s: %s", p.Status, p.Code, detail)
}

// As lets errors.As find the Problem inside any typed error.
func (p *Problem) As(target any) bool {
	if t, ok := target.(**Problem); ok {
		*t = p
		return true
	}
	return false
}

func (p *Problem) text(member string) string {
	s, _ := p.Members[member].(string)
	return s
}

// number reads an integer member exactly from the body as answered (a fence may pass 2^53, where the
// float64 of Members would round it), else from Members (a Problem the client built itself).
func (p *Problem) number(member string) int64 {
	var members map[string]json.RawMessage
	var n int64
	if json.Unmarshal(p.body, &members) == nil && json.Unmarshal(members[member], &n) == nil {
		return n
	}
	f, _ := p.Members[member].(float64)
	return int64(f)
}

// InvalidJSONError is 400 invalid_json: the request body is not valid JSON.
type InvalidJSONError struct{ *Problem }

// InvalidNameError is 400 invalid_name: a name outside 1-200 bytes of A-Z a-z 0-9 . _ : / -.
type InvalidNameError struct{ *Problem }

// InvalidFieldError is 400 invalid_field: a field of the wrong type or out of range, or an unknown one.
type InvalidFieldError struct{ *Problem }

// UnauthorizedError is 401 unauthorized: a missing or unknown bearer key while the gateway requires one.
type UnauthorizedError struct{ *Problem }

// ForbiddenError is 403 forbidden: the key is valid but lacks the scope the call needs.
type ForbiddenError struct {
	*Problem
	Scope string // the scope the call needs, e.g. "lock:invoice:42"
}

// InvalidFenceTokenError is 403 invalid_fence_token: a forged or altered token, one issued for another
// lock, a revoked one, or one signed by a key the gateway no longer has.
type InvalidFenceTokenError struct{ *Problem }

// NotFoundError is 404 not_found: unknown route, table, row or key.
type NotFoundError struct{ *Problem }

// MethodNotAllowedError is 405 method_not_allowed.
type MethodNotAllowedError struct{ *Problem }

// LockBusyError is 409 lock_busy: the lock or slot was not obtained within the wait.
type LockBusyError struct {
	*Problem
	Waiting int64  // the queue length the gateway reported
	Lock    string // for a lock set: the lock that was not obtained
}

// StaleFenceError is 409 stale_fence: the write's fence is older than the highest stored for the
// resource; nothing changed and the gateway kept an audit record.
type StaleFenceError struct {
	*Problem
	PresentedFence int64  // the fence of the refused write
	CurrentFence   int64  // the highest fence stored for the resource
	Resource       string // e.g. "pg:invoices/42" or "redis:app:x"
}

// LimitMismatchError is 409 limit_mismatch: a semaphore acquire named another limit than the one in force.
type LimitMismatchError struct{ *Problem }

// MaxHoldExceededError is 409 max_hold_exceeded: the lease reached its max_hold_ms deadline.
type MaxHoldExceededError struct{ *Problem }

// ConflictError is 409 conflict: an insert whose key already exists.
type ConflictError struct{ *Problem }

// LeaseLostError is 410 lease_lost: the token no longer holds its lease (expired, taken over, revoked). The
// client also returns it, with Status 0 and without a round trip, when it already knows the lease ended.
type LeaseLostError struct {
	*Problem
	Reason string // why the lease ended, when known ("expired", "revoked", "unrenewed", ...)
}

// BodyTooLargeError is 413 body_too_large.
type BodyTooLargeError struct{ *Problem }

// UnsupportedMediaTypeError is 415 unsupported_media_type.
type UnsupportedMediaTypeError struct{ *Problem }

// MisdirectedRequestError is 421 misdirected_request: the Host header is not one the gateway serves.
type MisdirectedRequestError struct{ *Problem }

// TooManyWaitersError is 429 too_many_waiters: a waiter cap or the key's quota is reached.
type TooManyWaitersError struct{ *Problem }

// BackendUnavailableError is 503 backend_unavailable: Redis or Postgres is unreachable; RetryAfter says
// when to come back. A fenced write answered 503 fails with an *OutcomeUnknownError that holds it.
type BackendUnavailableError struct{ *Problem }

// InternalError is a 500 (internal, or config for a configuration the gateway cannot use); the gateway's
// log has the details under RequestID.
type InternalError struct{ *Problem }

// problemTypes maps each problem code of the gateway to the error that carries it (checked against the
// gateway's table, clients/conformance/codes.json, by the tests).
var problemTypes = map[string]func(p *Problem) error{
	"invalid_json":        func(p *Problem) error { return &InvalidJSONError{p} },
	"invalid_name":        func(p *Problem) error { return &InvalidNameError{p} },
	"invalid_field":       func(p *Problem) error { return &InvalidFieldError{p} },
	"unauthorized":        func(p *Problem) error { return &UnauthorizedError{p} },
	"forbidden":           func(p *Problem) error { return &ForbiddenError{p, p.text("scope")} },
	"invalid_fence_token": func(p *Problem) error { return &InvalidFenceTokenError{p} },
	"not_found":           func(p *Problem) error { return &NotFoundError{p} },
	"method_not_allowed":  func(p *Problem) error { return &MethodNotAllowedError{p} },
	"lock_busy":           func(p *Problem) error { return &LockBusyError{p, p.number("waiting"), p.text("lock")} },
	"stale_fence": func(p *Problem) error {
		return &StaleFenceError{p, p.number("presented_fence"), p.number("current_fence"), p.text("resource")}
	},
	"limit_mismatch":         func(p *Problem) error { return &LimitMismatchError{p} },
	"max_hold_exceeded":      func(p *Problem) error { return &MaxHoldExceededError{p} },
	"conflict":               func(p *Problem) error { return &ConflictError{p} },
	"lease_lost":             func(p *Problem) error { return &LeaseLostError{p, p.text("reason")} },
	"body_too_large":         func(p *Problem) error { return &BodyTooLargeError{p} },
	"unsupported_media_type": func(p *Problem) error { return &UnsupportedMediaTypeError{p} },
	"misdirected_request":    func(p *Problem) error { return &MisdirectedRequestError{p} },
	"too_many_waiters":       func(p *Problem) error { return &TooManyWaitersError{p} },
	"backend_unavailable":    func(p *Problem) error { return &BackendUnavailableError{p} },
	"internal":               func(p *Problem) error { return &InternalError{p} },
	"config":                 func(p *Problem) error { return &InternalError{p} },
}

// ProblemCodes lists the problem codes this client maps to an error type of their own.
func ProblemCodes() []string {
	codes := make([]string, 0, len(problemTypes))
	for code := range problemTypes {
		codes = append(codes, code)
	}
	return codes
}

// typedError wraps p in the type of its code (a *Problem itself for a code this version does not know).
func typedError(p *Problem) error {
	if wrap, ok := problemTypes[p.Code]; ok {
		return wrap(p)
	}
	return p
}

// leaseLost is the LeaseLostError the client returns on its own for the lease on name, ended for reason.
func leaseLost(name, reason string) error {
	return &LeaseLostError{&Problem{Code: "lease_lost", Detail: fmt.Sprintf("the lease on %s is lost (%s)", name, reason),
		Members: map[string]any{"reason": reason}}, reason}
}

// UnreachableError means no answer came from the gateway: the connection was refused or reset, or no
// reply came in time. Sent says whether the request may have reached the gateway (false: it certainly
// did not), so whether its effect is unknown.
type UnreachableError struct {
	Op   string // "POST /v1/locks/x/acquire"
	Sent bool
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("fencegate: %s: no answer from the gateway: %v", e.Op, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// RedirectError is a 3xx answer (Status, Code "http_301" and so on), which the gateway never gives: a proxy
// or a wrong URL answered in its place. The client follows no redirect, so the call was not sent on (a
// fenced write would have gone elsewhere as a GET, with its Fence-Token); it is not retried.
type RedirectError struct {
	*Problem
	Location string // the Location header of the answer
}

// OutcomeUnknownError is the error of a fenced write whose effect is unknown: a write (PUT, PATCH, a batch
// of them) sent again after a try that may have been applied (Earlier: it got no answer, or a 5xx), when
// the last try failed too (Last: a *StaleFenceError because a newer fence wrote meanwhile, a
// *LeaseLostError, ...) or its context ended before the next try (Last: the context's error, which
// errors.Is finds); or any write whose last try got a 5xx (Earlier and Last are that answer: the gateway
// also answers 503 when a backend failed to answer the write's commit), and so a revoke, of a lock or of a
// semaphore's holder, whose last try got a 5xx (the revocation may have been recorded all the same). Last
// speaks for that try alone: whether the call took effect is unknown, so read the resource to find out. (A
// retry of an applied write is not refused for it: the gateway takes a fence equal to the stored one.) Like
// an *UnreachableError with Sent true, which errors.As finds in it, it means that the effect is unknown.
type OutcomeUnknownError struct {
	Op      string // "PATCH /v1/pg/invoices/42"
	Earlier error  // the failure of the earlier try that may have been applied
	Last    error  // the failure of the last try (Earlier itself when that try is the one)
}

func (e *OutcomeUnknownError) Error() string {
	if t := reflect.TypeOf(e.Last); t != nil && t.Comparable() && e.Earlier == e.Last {
		return fmt.Sprintf("fencegate: %s: outcome unknown: it may have been applied before this failure: %v",
			e.Op, e.Last)
	}
	return fmt.Sprintf("fencegate: %s: outcome unknown: an earlier try may have been applied (%v); the last one failed: %v",
		e.Op, e.Earlier, e.Last)
}

// Is lets errors.Is find context.Canceled or context.DeadlineExceeded when the write ended with its
// context (Last): the earlier try may have been applied all the same.
func (e *OutcomeUnknownError) Is(target error) bool {
	return (target == context.Canceled || target == context.DeadlineExceeded) && errors.Is(e.Last, target)
}

// Unwrap is the earlier try's failure as an *UnreachableError with Sent true (the effect is unknown); Last
// is left out, so errors.As finds no refusal that would say that nothing changed.
func (e *OutcomeUnknownError) Unwrap() error {
	var unreachable *UnreachableError
	if errors.As(e.Earlier, &unreachable) {
		return unreachable
	}
	return &UnreachableError{Op: e.Op, Sent: true, Err: e.Earlier}
}

// Code is the problem code of err ("lock_busy", "stale_fence", ...), or "" when err carries no problem.
func Code(err error) string {
	var p *Problem
	if errors.As(err, &p) {
		return p.Code
	}
	return ""
}
