// SPDX-License-Identifier: Apache-2.0

// admin.go owns the calls that need no lease: lock and semaphore status, the paged listings, revoking a
// holder, the audit trail of refused writes, and readiness. It must not hold lease state.

package fencegate

import (
	"context"
	"net/url"
	"strconv"
)

// LockStatus is the status of a lock; never its token.
type LockStatus struct {
	Lock        string `json:"lock"`
	Held        bool   `json:"held"`
	Fence       *int64 `json:"fence"`
	Owner       string `json:"owner"`
	ExpiresInMs int64  `json:"expires_in_ms"`
	Waiting     int64  `json:"waiting"`
}

// SemaphoreStatus is the status of a semaphore.
type SemaphoreStatus struct {
	Semaphore string `json:"semaphore"`
	Limit     int64  `json:"limit"`
	Holders   int64  `json:"holders"`
	Waiting   int64  `json:"waiting"`
}

func (c *Client) get(ctx context.Context, path string, query url.Values, into any) error {
	a, err := c.call(ctx, request{method: "GET", path: path, query: query, effect: Read})
	if err != nil {
		return err
	}
	return a.decode(into)
}

// LockStatus reads the status of the lock name.
func (c *Client) LockStatus(ctx context.Context, name string) (*LockStatus, error) {
	var s LockStatus
	return &s, c.get(ctx, "/v1/locks/"+segment(name), nil, &s)
}

// SemaphoreStatus reads the status of the semaphore name.
func (c *Client) SemaphoreStatus(ctx context.Context, name string) (*SemaphoreStatus, error) {
	var s SemaphoreStatus
	return &s, c.get(ctx, "/v1/semaphores/"+segment(name), nil, &s)
}

// RevokeLock ends the current holder's lease on name at once (scope admin); it returns the revoked fence,
// or nil when nobody held it. Not retried once sent: a repeat would revoke the next holder. Its outcome is
// unknown, as a write's, when it got no answer (an *UnreachableError with Sent true) or a 5xx (an
// *OutcomeUnknownError holding it): the gateway may have recorded the revocation before its backend failed
// to answer, so a 503 is no refusal. Read the lock's status to find out.
func (c *Client) RevokeLock(ctx context.Context, name, reason string) (*int64, error) {
	return c.revoke(ctx, request{method: "POST", path: "/v1/locks/" + segment(name) + "/revoke",
		body: jsonBody(map[string]any{"reason": reason}), effect: Once, write: true})
}

// RevokeSemaphore ends the lease of the holder of fence on semaphore name (scope admin); it returns fence,
// or nil when no live holder has it (also when an earlier try of this call, unanswered or answered 5xx,
// ended it). Retried as the policy allows: it names the lease it ends, so a repeat ends nobody else. As
// RevokeLock, its outcome is unknown when its last try got no answer or a 5xx (an *OutcomeUnknownError):
// a 503 is no refusal. Read the semaphore's status to find out.
func (c *Client) RevokeSemaphore(ctx context.Context, name string, fence int64, reason string) (*int64, error) {
	return c.revoke(ctx, request{method: "POST", path: "/v1/semaphores/" + segment(name) + "/revoke",
		body: jsonBody(map[string]any{"fence": fence, "reason": reason}), effect: Idempotent, write: true})
}

func (c *Client) revoke(ctx context.Context, r request) (*int64, error) {
	a, err := c.call(ctx, r)
	if err != nil {
		return nil, err
	}
	var res struct {
		RevokedFence *int64 `json:"revoked_fence"`
	}
	return res.RevokedFence, a.decode(&res)
}

// Ready is true when the gateway answers /readyz with 200 (Redis and Postgres reachable).
func (c *Client) Ready(ctx context.Context) bool {
	_, err := c.call(ctx, request{method: "GET", path: "/readyz", effect: Read, retry: &noRetry})
	return err == nil
}

// AuditQuery filters the audit trail; every field is optional.
type AuditQuery struct {
	Resource string // e.g. "pg:invoices/42"
	Lock     string
	SinceMs  int64 // gateway epoch milliseconds
	AfterID  int64 // start after this record
	PageSize int   // records per page (default 100)
}

// AuditRecord is one refused write.
type AuditRecord struct {
	ID             int64  `json:"id"`
	AtMs           int64  `json:"at_ms"`
	Resource       string `json:"resource"`
	Lock           string `json:"lock"`
	PresentedFence int64  `json:"presented_fence"`
	CurrentFence   *int64 `json:"current_fence"`
	Owner          string `json:"owner"`
	Principal      string `json:"principal"`
	ClientAddr     string `json:"client_addr"`
	Method         string `json:"method"`
	Reason         string `json:"reason"`
}

// AuditPages walks the audit trail page by page, oldest first:
//
//	pages := client.Audit(q)
//	for pages.Next(ctx) {
//		for _, r := range pages.Records() { ... }
//	}
//	if err := pages.Err(); err != nil { ... }
type AuditPages struct {
	client  *Client
	query   AuditQuery
	records []AuditRecord
	done    bool
	err     error
}

// Audit returns the pages of refused writes matching q.
func (c *Client) Audit(q AuditQuery) *AuditPages {
	if q.PageSize <= 0 {
		q.PageSize = 100
	}
	return &AuditPages{client: c, query: q}
}

// Next fetches the next page; false when there is none or on an error (see Err).
func (p *AuditPages) Next(ctx context.Context) bool {
	if p.done {
		return false
	}
	q := url.Values{"limit": {strconv.Itoa(p.query.PageSize)}}
	for name, value := range map[string]string{"resource": p.query.Resource, "lock": p.query.Lock} {
		if value != "" {
			q.Set(name, value)
		}
	}
	if p.query.SinceMs > 0 {
		q.Set("since_ms", strconv.FormatInt(p.query.SinceMs, 10))
	}
	if p.query.AfterID > 0 {
		q.Set("after_id", strconv.FormatInt(p.query.AfterID, 10))
	}
	var page struct {
		Items       []AuditRecord `json:"items"`
		NextAfterID *int64        `json:"next_after_id"`
	}
	if p.err = p.client.get(ctx, "/v1/audit/rejections", q, &page); p.err != nil {
		p.done = true
		return false
	}
	p.records = page.Items
	if page.NextAfterID == nil || len(page.Items) == 0 {
		p.done = true
	} else {
		p.query.AfterID = *page.NextAfterID
	}
	return len(page.Items) > 0
}

// Records is the page Next fetched.
func (p *AuditPages) Records() []AuditRecord { return p.records }

// Err is the error that ended the walk, if any.
func (p *AuditPages) Err() error { return p.err }
