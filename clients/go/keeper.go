// SPDX-License-Identifier: Apache-2.0

// keeper.go keeps a lease alive in the background and notices its loss: one renewal goroutine, and one
// watch goroutine per watched lock or semaphore slot. It owns when to renew, how long a lease counts as
// valid without a successful renewal, and the long polls of the watch endpoint. It must not release the
// lease (its owner does, after stop).
//
// Renewal: every third of the TTL. A renewal is valid for the ttl_ms it answers, which is less than the TTL
// asked once the hold deadline (acquire time + max_hold_ms) cuts it, counted from the moment it was sent;
// the next one goes a third of that later. A renewal whose expiry reached the hold deadline is the last:
// no renewal can move it, and the lease is lost ("max_hold_exceeded") when that validity runs out. A
// refusal (410 lease_lost, 409 max_hold_exceeded, 401, 403, ...) ends the lease at once. No answer, or a
// 5xx, is tried again after a short pause until the lease would have run out, counted from the moment the
// last successful renewal was sent; then the lease is lost ("unrenewed").
//
// Watch: GET <status path>?watch=true&fence=N&wait_ms=W answers as soon as the lease ends ("released",
// "expired", "revoked"), so the loss is known within a round trip instead of at the next renewal. A
// gateway without the endpoint answers the plain status at once (or 400): the watch then stops and
// renewals alone detect the loss. A poll that gets no answer, a 5xx, or 429 too_many_waiters (the API key's
// quota of parked waits and watches is full for now) is repeated after Retry-After when the gateway gives
// one, else after a pause that doubles from watchRetry up to watchWait.

package fencegate

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// watchWait is the longest single watch poll (below the idle timeouts of common proxies).
const watchWait = 25 * time.Second

// watchRetry is the first pause before polling again after a watch poll that got no answer, a 5xx or a 429
// without Retry-After; it doubles with each such poll in a row, up to watchWait.
const watchRetry = time.Second

// watchPause is the pause before polling again after the failures-th failed watch poll in a row: the
// gateway's Retry-After (0: none), else watchRetry doubled for each earlier failure, up to watchWait.
func watchPause(failures int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return retryAfter
	}
	pause := watchRetry
	for i := 1; i < failures && pause < watchWait; i++ {
		pause *= 2
	}
	if pause > watchWait {
		pause = watchWait
	}
	return pause
}

// retryMin is the shortest pause between renewals that got no answer.
const retryMin = 50 * time.Millisecond

// watch is a lease to watch: its status path and fence.
type watch struct {
	path  string
	fence int64
}

type keeper struct {
	client  *Client
	ttl     time.Duration
	renew   func(ctx context.Context, timeout time.Duration) (*RenewResult, error)
	onLost  func(reason string)
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	stopped bool
	until   time.Time // valid until, by this host's clock
	final   bool      // the last grant reached the hold deadline: nothing renews past until
}

// startKeeper keeps a lease whose validity began at start, by this host's clock: for the grant of the
// renewal sent then, or for the whole TTL when grant is nil (the acquire's own). It renews a third of the
// granted time later and watches each of watches, calling onLost once, from a keeper goroutine, when the
// lease is lost.
func startKeeper(c *Client, ttl time.Duration, renew func(context.Context, time.Duration) (*RenewResult, error),
	watches []watch, onLost func(string), start time.Time, grant *RenewResult) *keeper {
	ctx, cancel := context.WithCancel(context.Background())
	k := &keeper{client: c, ttl: ttl, renew: renew, onLost: onLost, ctx: ctx, cancel: cancel}
	next := k.renewed(start, grant)
	k.wg.Add(1 + len(watches))
	go k.renewLoop(next)
	for _, w := range watches {
		go k.watchLoop(w)
	}
	return k
}

// stop ends renewing and watching, cutting in-flight calls short, and waits for the goroutines unless
// the keeper already stopped itself (then it may be running on one of them).
func (k *keeper) stop() {
	if k.halt() {
		k.wg.Wait()
	}
}

// halt marks the keeper stopped and cuts its calls short; false if it already was.
func (k *keeper) halt() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return false
	}
	k.stopped = true
	k.cancel()
	return true
}

// renewed takes the grant of the renewal sent at sent (nil: a whole TTL) and answers when to renew next.
// The lease is valid for the ttl_ms granted counted from the sending, which is never later than the
// gateway's expiry; an answer without ttl_ms (an older gateway) counts as the TTL asked. A grant that
// reached the hold deadline is final: the next wake-up is the end of its validity.
func (k *keeper) renewed(sent time.Time, grant *RenewResult) time.Time {
	granted, final := k.ttl, false
	if grant != nil {
		if grant.TTLms > 0 {
			granted = time.Duration(grant.TTLms) * time.Millisecond
		}
		final = grant.HoldUntilMs > 0 && grant.ExpiresAtMs >= grant.HoldUntilMs
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.until, k.final = sent.Add(granted), final
	if final {
		return k.until
	}
	return sent.Add(granted / 3)
}

// lapsed is why the lease counts as lost once its validity ran out without a successful renewal
// ("max_hold_exceeded" after a final grant, else "unrenewed"), or "" while it is valid.
func (k *keeper) lapsed() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lapsedLocked(time.Now())
}

func (k *keeper) lapsedLocked(now time.Time) string {
	switch {
	case now.Before(k.until):
		return ""
	case k.final:
		return "max_hold_exceeded"
	default:
		return "unrenewed"
	}
}

func (k *keeper) lost(reason string) {
	if k.halt() {
		k.onLost(reason)
	}
}

func (k *keeper) sleep(d time.Duration) bool {
	if d < 0 {
		d = 0
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-k.ctx.Done():
		return false
	}
}

func (k *keeper) renewLoop(next time.Time) {
	defer k.wg.Done()
	for k.sleep(time.Until(next)) {
		now := time.Now()
		k.mu.Lock()
		left, lapsed := k.until.Sub(now), k.lapsedLocked(now)
		k.mu.Unlock()
		if lapsed != "" {
			k.lost(lapsed)
			return
		}
		timeout := k.client.timeout
		if left < timeout {
			timeout = left
		}
		if timeout < retryMin {
			timeout = retryMin
		}
		res, err := k.renew(k.ctx, timeout)
		if k.ctx.Err() != nil {
			return
		}
		var p *Problem
		switch {
		case err == nil:
			next = k.renewed(now, res)
			continue
		case errors.As(err, &p) && p.Status < 500:
			reason := p.Code
			if r := p.text("reason"); r != "" {
				reason = r
			}
			k.lost(reason)
			return
		}
		k.mu.Lock()
		left = time.Until(k.until)
		k.mu.Unlock()
		pause := left / 4
		if pause > time.Second {
			pause = time.Second
		}
		if pause < retryMin {
			pause = retryMin
		}
		next = time.Now().Add(pause)
	}
}

func (k *keeper) watchLoop(w watch) {
	defer k.wg.Done()
	query := url.Values{"watch": {"true"}, "fence": {strconv.FormatInt(w.fence, 10)},
		"wait_ms": {strconv.FormatInt(watchWait.Milliseconds(), 10)}}
	failures := 0
	for k.ctx.Err() == nil {
		started := time.Now()
		a, err := k.client.call(k.ctx, request{method: "GET", path: w.path, query: query, effect: Read,
			wait: watchWait, retry: &noRetry})
		if k.ctx.Err() != nil {
			return
		}
		if err != nil {
			var p *Problem
			var retryAfter time.Duration
			if errors.As(err, &p) {
				if p.Status < 500 && p.Status != http.StatusTooManyRequests {
					return // no watch endpoint (400 for the unknown parameter): renewals detect the loss
				}
				retryAfter = p.RetryAfter
			}
			failures++
			k.sleep(watchPause(failures, retryAfter))
			continue
		}
		failures = 0
		status, ok := decodeWatch(a.body)
		switch {
		case !ok || status.Held == nil:
			return
		case !*status.Held:
			reason := status.Reason
			if reason == "" {
				reason = "not held"
			}
			k.lost(reason)
			return
		case status.Fence != nil && *status.Fence != w.fence:
			k.lost("taken over")
			return
		}
		if status.Waiting != nil || time.Since(started) < watchWait/2 {
			return // the plain status answered instead of a watch
		}
	}
}

// watchStatus is what the keeper reads of a watch answer (or of the plain status answered instead). The
// fence is decoded as an integer: fences count up from a sequence that may pass 2^53, beyond which a
// float64 would take a held lease's fence for another.
type watchStatus struct {
	Held    *bool           `json:"held"`
	Reason  string          `json:"reason"`
	Fence   *int64          `json:"fence"`
	Waiting json.RawMessage `json:"waiting"`
}

// decodeWatch reads a watch answer; false if it is not a JSON object of that shape.
func decodeWatch(body []byte) (watchStatus, bool) {
	var status watchStatus
	if err := json.Unmarshal(body, &status); err != nil {
		return watchStatus{}, false
	}
	return status, true
}
