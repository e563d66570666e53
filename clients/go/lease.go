// SPDX-License-Identifier: Apache-2.0

// lease.go owns leases held through the gateway: a lock, a semaphore slot, or a lock set; acquiring them
// with a request_id that makes retries safe, giving back what a cancelled acquire was granted, their lost
// state and Lost() channel, explicit renew and release, and handing their token to fenced writes. It must
// not schedule renewals or watch (keeper.go does) or build write calls (writes.go does).
//
// A lease is lost when the client learns that it no longer holds it: a renewal refused, or not answered for
// a whole TTL; the watch reporting it released, expired or revoked; or a 410 answer to a write, renew or
// release. From then on Lost() is closed, Reason() says why, nothing renews it, and its writes fail with a
// LeaseLostError without being sent, also a write that was waiting to try again (each try is checked).
// The gateway's fence check still guards the moment between the client's check and the write's arrival.

package fencegate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"
)

// LeaseOptions are the options of an acquire; every field is optional.
type LeaseOptions struct {
	TTL       time.Duration // lease time to live (default: the gateway's, 30 s; lock sets always send it)
	Wait      time.Duration // how long to wait in the FIFO queue (0: the gateway's defaults.wait_ms; TryOnce: try once)
	MaxHold   time.Duration // longest hold, renewals included (default: the gateway's)
	Owner     string        // shown in status and audit records (default: the client's Owner)
	RequestID string        // makes the acquire idempotent (default: a fresh one, reused by retries)
	NoRenew   bool          // no background renewal nor watch: call Renew yourself
	NoWatch   bool          // renew in the background but do not watch
}

// TryOnce as LeaseOptions.Wait asks the gateway not to wait (wait_ms 0), whatever its defaults.wait_ms.
const TryOnce time.Duration = -1

// maxGatewayWait is the longest wait_ms a gateway takes, and so the longest its defaults.wait_ms may be.
const maxGatewayWait = time.Hour

// gatewayWait is how long the gateway may hold an acquire with the wait o.Wait before it answers: what the
// call adds to its timeout. An acquire that names no wait gets the gateway's defaults.wait_ms, which the
// client cannot know: up to an hour.
func gatewayWait(wait time.Duration) time.Duration {
	switch {
	case wait == 0:
		return maxGatewayWait
	case wait < 0:
		return 0
	}
	return wait
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "go-" + hex.EncodeToString(b[:])
}

// lostState is the lost flag of a lease; a lock set shares one among its locks.
type lostState struct {
	name      string
	mu        sync.Mutex
	lost      chan struct{}
	reason    string
	releasing bool    // a release was asked for: nothing renews the lease and no write goes out through it
	released  bool    // the gateway answered the release (200, or 410: already over): it is not sent again
	keeper    *keeper // nil when not kept alive
}

func newLostState(name string) *lostState {
	return &lostState{name: name, lost: make(chan struct{})}
}

// mark records the loss once and stops the keeper.
func (s *lostState) mark(reason string) {
	s.mu.Lock()
	select {
	case <-s.lost:
		s.mu.Unlock()
		return
	default:
	}
	s.reason = reason
	close(s.lost)
	k := s.keeper
	s.mu.Unlock()
	if k != nil {
		k.stop()
	}
}

func (s *lostState) isLost() bool {
	select {
	case <-s.lost:
		return true
	default:
		return false
	}
}

// check fails with a LeaseLostError when the lease is known lost, is being or was released, or (while kept
// alive) has outlived what its last successful renewal granted: a write must never leave under a lease its
// holder gave up.
func (s *lostState) check() error {
	s.mu.Lock()
	releasing, k := s.releasing, s.keeper
	s.mu.Unlock()
	if releasing {
		return leaseLost(s.name, "released")
	}
	if k != nil {
		if reason := k.lapsed(); reason != "" {
			s.mark(reason)
		}
	}
	if s.isLost() {
		return leaseLost(s.name, s.Reason())
	}
	return nil
}

// Reason is why the lease was lost, or "" while it is held.
func (s *lostState) Reason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// heard is told about every refusal of a call made with the lease: a 410 or max_hold_exceeded ends it,
// also when it answered the retry of a write whose outcome is unknown. A LeaseLostError the client made
// itself (Status 0, from check) is no news: the lease's state already says it.
func (s *lostState) heard(err error) {
	var unknown *OutcomeUnknownError
	if errors.As(err, &unknown) {
		err = unknown.Last
	}
	var gone *LeaseLostError
	var maxHold *MaxHoldExceededError
	switch {
	case errors.As(err, &gone) && gone.Status != 0:
		reason := gone.Reason
		if reason == "" {
			reason = "lease_lost"
		}
		s.mark(reason)
	case errors.As(err, &maxHold):
		s.mark("max_hold_exceeded")
	}
}

// beginRelease stops the keeper and blocks writes through the lease for good; false once the gateway has
// answered a release, which then needs no sending again.
func (s *lostState) beginRelease() bool {
	s.mu.Lock()
	k, pending := s.keeper, !s.released
	s.keeper, s.releasing = nil, true
	s.mu.Unlock()
	if k != nil {
		k.stop()
	}
	return pending
}

// release sends the release until the gateway answers it, and answers the error Release returns: a
// LeaseLostError if the lease was lost before or the gateway says it had ended, another error only for a
// lease still counted as held. The first call ends renewals and writes; only a 200 or a 410 marks the
// release done. Any other failure (a cancelled context, no answer within the retry budget, a 503) leaves
// it to the next call: the lease may still be held, and nothing renews it any more, so a retry that
// skipped the release would leave the lock held for the rest of its TTL. The gateway answers a repeated
// release 200 again.
func (s *lostState) release(send func() error) error {
	if s.beginRelease() {
		err := send()
		s.heard(err)
		var p *Problem
		if err == nil || (errors.As(err, &p) && p.Status == http.StatusGone) {
			s.mu.Lock()
			s.released = true
			s.mu.Unlock()
		} else if !s.isLost() {
			return err
		}
	}
	if s.isLost() {
		return leaseLost(s.name, s.Reason())
	}
	return nil
}

// Lease is a lease on a lock or on one slot of a semaphore, from Client.Lock or Client.Semaphore.
type Lease struct {
	client    *Client
	state     *lostState
	Kind      string // "lock" or "semaphore"
	Name      string // the lock's or semaphore's name
	Token     string // the holder's secret, sent as Fence-Token
	Fence     int64  // the lease's fencing token
	TTL       time.Duration
	ExpiresAt time.Time // by the gateway's clock, as of the last acquire or renewal
	Owner     string
	RequestID string
}

// Lost is closed as soon as the client knows the lease is lost.
func (l *Lease) Lost() <-chan struct{} { return l.state.lost }

// Reason is why the lease was lost ("expired", "revoked", "released", "lease_lost", "unrenewed",
// "max_hold_exceeded", "taken over"), or "" while it is held.
func (l *Lease) Reason() string { return l.state.Reason() }

// Check returns a LeaseLostError if the lease is known to be lost or was released: a cheap call between
// steps of work.
func (l *Lease) Check() error { return l.state.check() }

func (l *Lease) path() string { return "/v1/" + l.Kind + "s/" + segment(l.Name) }

// acquireResult is the answer of an acquire.
type acquireResult struct {
	Token       string `json:"token"`
	Fence       int64  `json:"fence"`
	TTLms       int64  `json:"ttl_ms"`
	ExpiresAtMs int64  `json:"expires_at_ms"`
}

// RenewResult is the answer of a renewal. TTLms is the time to live granted: less than the lease's TTL
// once the hold deadline (HoldUntilMs, the acquire time + max_hold_ms) cuts it.
type RenewResult struct {
	Fence       int64 `json:"fence"`
	TTLms       int64 `json:"ttl_ms"`
	ExpiresAtMs int64 `json:"expires_at_ms"`
	HoldUntilMs int64 `json:"hold_until_ms"`
}

// acquireBody builds the acquire body for each try: a retry asks only for what is left of the wait.
func acquireBody(fields map[string]any, wait time.Duration) func() any {
	deadline := time.Now().Add(wait)
	return func() any {
		if wait > 0 {
			left := time.Until(deadline).Milliseconds()
			if left < 0 {
				left = 0
			}
			fields["wait_ms"] = left
		}
		return fields
	}
}

func (c *Client) leaseFields(o LeaseOptions) map[string]any {
	f := map[string]any{"request_id": o.RequestID}
	if o.TTL > 0 {
		f["ttl_ms"] = o.TTL.Milliseconds()
	}
	if o.Wait > 0 {
		f["wait_ms"] = o.Wait.Milliseconds()
	} else if o.Wait < 0 {
		f["wait_ms"] = 0
	}
	if o.MaxHold > 0 {
		f["max_hold_ms"] = o.MaxHold.Milliseconds()
	}
	if owner := firstOf(o.Owner, c.owner); owner != "" {
		f["owner"] = owner
	}
	return f
}

// releaseOf gives the release of what an acquire answered: its path and body.
type releaseOf func(a *answer) (path string, body any, err error)

// sendAcquire sends the acquire of fields to path, waiting up to wait, and returns the gateway's answer. An
// acquire that fails may have been granted all the same: its ctx ended as the gateway granted it, or a
// try whose answer never came was granted (the retries used up, the last failure no refusal), or the last
// try was answered with a 5xx (the gateway answers 503 when Redis's reply to the grant missed its
// deadline). The gateway keeps such a grant for a retry of its request_id, holding the lock until the
// lease's TTL ends, and the caller, who has no lease, could not release it. The caller then gets the error,
// as it was, only once giveBack has asked for that grant and released it. A refusal (a 4xx) answers for
// the request_id, so for every try; a failure none of whose tries went out unanswered and whose last one
// was no 5xx (every connection refused) leaves nothing to give back. A ctx ended before the call sends
// nothing.
func (c *Client) sendAcquire(ctx context.Context, path string, fields map[string]any, wait time.Duration,
	release releaseOf) (*answer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var unanswered bool
	a, err := c.call(ctx, request{method: "POST", path: path, body: acquireBody(fields, wait), effect: Idempotent,
		wait: gatewayWait(wait), unanswered: &unanswered})
	var p *Problem
	answered := errors.As(err, &p)
	refused := answered && p.Status >= 400 && p.Status < 500
	if err != nil && (ctx.Err() != nil || unanswered && !refused || answered && p.Status >= 500) {
		c.giveBack(path, fields, release)
	}
	return a, err
}

// giveBack asks once more for the acquire of fields at path, under its request_id and without waiting
// (wait_ms 0), and releases what that answers: the lease the gateway granted as the caller went, if it
// did. A refusal (409 lock_busy: not granted, and the place kept for a retry passes its turn on by itself;
// 410: over) or no answer leaves nothing to do. Each call is tried once, within the client's timeout, apart
// from the caller's ctx, which may have ended.
func (c *Client) giveBack(path string, fields map[string]any, release releaseOf) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	again := make(map[string]any, len(fields))
	for name, value := range fields {
		again[name] = value
	}
	again["wait_ms"] = 0
	a, err := c.call(ctx, request{method: "POST", path: path, body: jsonBody(again), effect: Idempotent, retry: &noRetry})
	if err != nil {
		return
	}
	releasePath, body, err := release(a)
	if err != nil {
		return
	}
	_, _ = c.call(ctx, request{method: "POST", path: releasePath, body: jsonBody(body), effect: Idempotent, retry: &noRetry})
}

// noGrant is the error of an acquire at path answered a JSON object that is no grant (no token, no fence:
// something else at the gateway's address answered), or one that does not decode (err): no answer of the
// gateway's, never a lease without a token.
func noGrant(path string, err error) error {
	if err == nil {
		err = errors.New("an answer without a token and a fence is no grant")
	}
	return &UnreachableError{Op: "POST " + path, Sent: true, Err: err}
}

// Lock acquires a lease on the lock name, waiting up to o.Wait in the gateway's FIFO queue (cancelling ctx
// ends the wait, and gives back a grant that came as it ended: see sendAcquire), and keeps it alive in the
// background until Release. Without o.Wait the gateway waits as its defaults.wait_ms says, and the call
// waits for its answer as long as that may be (up to an hour, on top of the timeout); TryOnce never waits.
// A refusal is a *LockBusyError, *TooManyWaitersError, *InvalidNameError, *UnauthorizedError,
// *ForbiddenError, ...
func (c *Client) Lock(ctx context.Context, name string, o LeaseOptions) (*Lease, error) {
	return c.acquire(ctx, "lock", name, 0, o)
}

// Semaphore acquires one of the limit slots of the semaphore name; otherwise as Lock.
// *LimitMismatchError if another limit is in force.
func (c *Client) Semaphore(ctx context.Context, name string, limit int, o LeaseOptions) (*Lease, error) {
	return c.acquire(ctx, "semaphore", name, limit, o)
}

func (c *Client) acquire(ctx context.Context, kind, name string, limit int, o LeaseOptions) (*Lease, error) {
	if o.RequestID == "" {
		o.RequestID = newRequestID()
	}
	l := &Lease{client: c, state: newLostState(name), Kind: kind, Name: name, Owner: firstOf(o.Owner, c.owner),
		RequestID: o.RequestID}
	fields := c.leaseFields(o)
	if kind == "semaphore" {
		fields["limit"] = limit
	}
	sentAt := time.Now()
	a, err := c.sendAcquire(ctx, l.path()+"/acquire", fields, o.Wait, func(a *answer) (string, any, error) {
		var granted acquireResult
		err := a.decode(&granted)
		return l.path() + "/release", map[string]any{"token": granted.Token}, err
	})
	if err != nil {
		return nil, err
	}
	var res acquireResult
	if err := a.decode(&res); err != nil || res.Token == "" || res.Fence <= 0 {
		return nil, noGrant(l.path()+"/acquire", err)
	}
	l.Token, l.Fence, l.TTL = res.Token, res.Fence, time.Duration(res.TTLms)*time.Millisecond
	l.ExpiresAt = time.UnixMilli(res.ExpiresAtMs)
	if o.NoRenew {
		return l, nil
	}
	var watches []watch
	if !o.NoWatch {
		watches = []watch{{path: l.path(), fence: l.Fence}}
	}
	start, grant := l.state.freshStart(ctx, sentAt, l.TTL, c.timeout, l.renewOnce)
	l.state.keep(func() *keeper { return startKeeper(c, l.TTL, l.renewOnce, watches, l.state.mark, start, grant) })
	return l, nil
}

// freshStart is when the validity of a lease of this ttl, acquired with a call sent at sentAt, starts by
// this host's clock, and the grant it starts with (nil: the acquire's whole TTL); timeout bounds the
// renewal. Counting from the moment the acquire was sent is safe but, after a long wait in the queue,
// would make a fresh lease look nearly expired: an acquire whose answer took over a third of the TTL is
// renewed once at once, and validity counts from that renewal once it succeeds. A 410 or
// max_hold_exceeded answer to it marks the lease lost; after any other failure (no answer, a 5xx, ctx
// ended) validity still counts from the acquire, which is all the gateway granted, and the keeper's
// renewals try again.
func (s *lostState) freshStart(ctx context.Context, sentAt time.Time, ttl, timeout time.Duration,
	renew func(context.Context, time.Duration) (*RenewResult, error)) (time.Time, *RenewResult) {
	if time.Since(sentAt) <= ttl/3 {
		return sentAt, nil
	}
	renewedAt := time.Now()
	res, err := renew(ctx, timeout)
	if err != nil {
		s.heard(err)
		return sentAt, nil
	}
	return renewedAt, res
}

// keep starts the keeper with start and records it, under the lock that mark reads it with, unless the
// lease is already lost or released: a keeper would renew a lease that is over.
func (s *lostState) keep(start func() *keeper) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.releasing || s.isLost() {
		return
	}
	s.keeper = start()
}

func (l *Lease) renewOnce(ctx context.Context, timeout time.Duration) (*RenewResult, error) {
	a, err := l.client.call(ctx, request{method: "POST", path: l.path() + "/renew",
		body:   jsonBody(map[string]any{"token": l.Token, "ttl_ms": l.TTL.Milliseconds()}),
		effect: Idempotent, timeout: timeout, retry: &noRetry})
	if err != nil {
		return nil, err
	}
	var res RenewResult
	return &res, a.decode(&res)
}

// Renew renews the lease now, for leases acquired with NoRenew. A refusal (*LeaseLostError,
// *MaxHoldExceededError) also marks the lease lost.
func (l *Lease) Renew(ctx context.Context) (*RenewResult, error) {
	if err := l.Check(); err != nil {
		return nil, err
	}
	a, err := l.client.call(ctx, request{method: "POST", path: l.path() + "/renew",
		body: jsonBody(map[string]any{"token": l.Token, "ttl_ms": l.TTL.Milliseconds()}), effect: Idempotent})
	if err != nil {
		l.state.heard(err)
		return nil, err
	}
	var res RenewResult
	if err := a.decode(&res); err != nil {
		return nil, err
	}
	l.ExpiresAt = time.UnixMilli(res.ExpiresAtMs)
	return &res, nil
}

// Release stops keeping the lease alive and releases it (the next waiter gets it at once). It returns a
// *LeaseLostError if the lease had been lost: the work done under it may not have been exclusive. From the
// first call on, nothing renews the lease and writes through it fail; when the release itself fails (ctx
// ended, no answer, a 503), the lease may still be held until its TTL runs out: call Release again, which
// sends it again, until it returns nil or a *LeaseLostError.
func (l *Lease) Release(ctx context.Context) error {
	return l.state.release(func() error {
		_, err := l.client.call(ctx, request{method: "POST", path: l.path() + "/release",
			body: jsonBody(map[string]any{"token": l.Token}), effect: Idempotent})
		return err
	})
}

// PG is a configured Postgres table written with this lease's token.
func (l *Lease) PG(table string) *PGTable {
	return &PGTable{client: l.client, table: table, holder: holder{token: l.Token, owner: l.Owner, state: l.state}}
}

// Redis is the keys under the configured Redis prefixes, written with this lease's token.
func (l *Lease) Redis() *RedisKeys {
	return &RedisKeys{client: l.client, holder: holder{token: l.Token, owner: l.Owner, state: l.state}}
}

// WithLock acquires the lock name, runs fn with a context that is cancelled as soon as the lease is lost,
// and releases the lock, also when fn panics (the panic then goes on). It returns fn's error, else a
// *LeaseLostError if the lease was lost meanwhile.
func (c *Client) WithLock(ctx context.Context, name string, o LeaseOptions, fn func(ctx context.Context, l *Lease) error) error {
	l, err := c.Lock(ctx, name, o)
	if err != nil {
		return err
	}
	return l.state.run(ctx, func(inner context.Context) error { return fn(inner, l) }, l.Release)
}

// run calls fn with a context cancelled on loss, then release; fn's error wins over release's. The release
// goes out even when ctx ended (a lock left held would keep the next holder waiting a TTL), and when fn
// panics or calls runtime.Goexit, which then goes on: the keeper would renew a lock left held for as long as
// the process lives, and a panic that net/http recovers leaves the process running.
func (s *lostState) run(ctx context.Context, fn func(context.Context) error, release func(context.Context) error) error {
	inner, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		select {
		case <-s.lost:
			cancel()
		case <-done:
		}
	}()
	finished := false
	defer func() {
		if !finished {
			close(done)
			cancel()
			_ = release(context.Background())
		}
	}()
	err := fn(inner)
	finished = true
	close(done)
	cancel()
	releaseErr := release(context.Background())
	if err != nil {
		return err
	}
	return releaseErr
}

// LockSet holds leases on several locks, all or none, kept alive and released together.
type LockSet struct {
	client  *Client
	state   *lostState
	TTL     time.Duration
	Owner   string
	Members []*LockSetMember // in the order the gateway answered
}

// LockSetMember is one lock of a held set: its own token and fence, for writes to that lock's resources.
type LockSetMember struct {
	set         *LockSet
	Name        string
	Token       string
	Fence       int64
	ExpiresAtMs int64
}

// LockSet acquires every lock of names (1-32 distinct) or none: a *LockBusyError names the lock that was
// not obtained within o.Wait. The TTL is always sent (default 30 s), since renewals are scheduled from it.
func (c *Client) LockSet(ctx context.Context, names []string, o LeaseOptions) (*LockSet, error) {
	if o.RequestID == "" {
		o.RequestID = newRequestID()
	}
	if o.TTL <= 0 {
		o.TTL = 30 * time.Second
	}
	s := &LockSet{client: c, state: newLostState(strings.Join(names, ",")), TTL: o.TTL, Owner: firstOf(o.Owner, c.owner)}
	fields := c.leaseFields(o)
	fields["names"] = names
	sentAt := time.Now()
	a, err := c.sendAcquire(ctx, "/v1/locksets/acquire", fields, o.Wait, func(a *answer) (string, any, error) {
		var granted struct {
			Locks []struct {
				Token string `json:"token"`
			} `json:"locks"`
		}
		err := a.decode(&granted)
		tokens := make([]string, len(granted.Locks))
		for i, lock := range granted.Locks {
			tokens[i] = lock.Token
		}
		return "/v1/locksets/release", map[string]any{"tokens": tokens}, err
	})
	if err != nil {
		return nil, err
	}
	var res struct {
		Locks []struct {
			Lock        string `json:"lock"`
			Token       string `json:"token"`
			Fence       int64  `json:"fence"`
			ExpiresAtMs int64  `json:"expires_at_ms"`
		} `json:"locks"`
	}
	if err := a.decode(&res); err != nil || len(res.Locks) == 0 {
		return nil, noGrant("/v1/locksets/acquire", err)
	}
	for _, item := range res.Locks {
		if item.Lock == "" || item.Token == "" || item.Fence <= 0 {
			return nil, noGrant("/v1/locksets/acquire", nil)
		}
	}
	var watches []watch
	for _, item := range res.Locks {
		s.Members = append(s.Members, &LockSetMember{set: s, Name: item.Lock, Token: item.Token, Fence: item.Fence,
			ExpiresAtMs: item.ExpiresAtMs})
		watches = append(watches, watch{path: "/v1/locks/" + segment(item.Lock), fence: item.Fence})
	}
	if o.NoRenew {
		return s, nil
	}
	if o.NoWatch {
		watches = nil
	}
	start, grant := s.state.freshStart(ctx, sentAt, s.TTL, c.timeout, s.renewOnce)
	s.state.keep(func() *keeper { return startKeeper(c, s.TTL, s.renewOnce, watches, s.state.mark, start, grant) })
	return s, nil
}

// Member is the lock name of the set, or nil.
func (s *LockSet) Member(name string) *LockSetMember {
	for _, m := range s.Members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Lost is closed as soon as the client knows any lock of the set is lost.
func (s *LockSet) Lost() <-chan struct{} { return s.state.lost }

// Reason is why the set was lost, or "".
func (s *LockSet) Reason() string { return s.state.Reason() }

// Check returns a LeaseLostError if the set is known to be lost or was released.
func (s *LockSet) Check() error { return s.state.check() }

func (s *LockSet) tokens() []string {
	tokens := make([]string, len(s.Members))
	for i, m := range s.Members {
		tokens[i] = m.Token
	}
	return tokens
}

// renewOnce renews the set once; the result is the shortest grant of its locks: the set is valid as long
// as the first of them to end.
func (s *LockSet) renewOnce(ctx context.Context, timeout time.Duration) (*RenewResult, error) {
	a, err := s.client.call(ctx, request{method: "POST", path: "/v1/locksets/renew",
		body:   jsonBody(map[string]any{"tokens": s.tokens(), "ttl_ms": s.TTL.Milliseconds()}),
		effect: Idempotent, timeout: timeout, retry: &noRetry})
	if err != nil {
		return nil, err
	}
	var res struct {
		Locks []RenewResult `json:"locks"`
	}
	if err := a.decode(&res); err != nil {
		return nil, err
	}
	shortest := &RenewResult{}
	for i, lock := range res.Locks {
		if i == 0 || lock.TTLms < shortest.TTLms {
			shortest = &res.Locks[i]
		}
	}
	return shortest, nil
}

// Renew renews every lock of the set now; a refusal marks the set lost.
func (s *LockSet) Renew(ctx context.Context) error {
	if err := s.Check(); err != nil {
		return err
	}
	_, err := s.client.call(ctx, request{method: "POST", path: "/v1/locksets/renew",
		body: jsonBody(map[string]any{"tokens": s.tokens(), "ttl_ms": s.TTL.Milliseconds()}), effect: Idempotent})
	s.state.heard(err)
	return err
}

// Release stops keeping the set alive and releases every lock; a *LeaseLostError if one had been lost. As
// Lease.Release, a release that failed is sent again by the next call.
func (s *LockSet) Release(ctx context.Context) error {
	return s.state.release(func() error {
		_, err := s.client.call(ctx, request{method: "POST", path: "/v1/locksets/release",
			body: jsonBody(map[string]any{"tokens": s.tokens()}), effect: Idempotent})
		return err
	})
}

// WithLockSet acquires the set, runs fn with a context cancelled on loss, and releases it; as WithLock.
func (c *Client) WithLockSet(ctx context.Context, names []string, o LeaseOptions, fn func(ctx context.Context, s *LockSet) error) error {
	s, err := c.LockSet(ctx, names, o)
	if err != nil {
		return err
	}
	return s.state.run(ctx, func(inner context.Context) error { return fn(inner, s) }, s.Release)
}

// PG is a configured Postgres table written with this lock's token.
func (m *LockSetMember) PG(table string) *PGTable {
	return &PGTable{client: m.set.client, table: table, holder: holder{token: m.Token, owner: m.set.Owner, state: m.set.state}}
}

// Redis is the keys under the configured Redis prefixes, written with this lock's token.
func (m *LockSetMember) Redis() *RedisKeys {
	return &RedisKeys{client: m.set.client, holder: holder{token: m.Token, owner: m.set.Owner, state: m.set.state}}
}
