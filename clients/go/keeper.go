// SPDX-License-Identifier: Apache-2.0

// keeper.go keeps a lease alive in the background and notices its loss: one renewal goroutine, and one
// watch goroutine per watched lock or semaphore slot. It owns when to renew, how long a lease counts as
// valid without a successful renewal, and the long polls of the watch endpoint. It must not release the
// lease (its owner does, after stop).
//
// Renewal: every third of the TTL. A refusal (410 lease_lost, 409 max_hold_exceeded, 401, 403, ...) ends
// the lease at once. No answer, or a 5xx, is tried again after a short pause until the lease would have run
// out, counted from the moment the last successful renewal was sent; then the lease is lost ("unrenewed").
//
// Watch: GET <status path>?watch=true&fence=N&wait_ms=W answers as soon as the lease ends ("released",
// "expired", "revoked"), so the loss is known within a round trip instead of at the next renewal. A
// gateway without the endpoint answers the plain status at once (or 400): the watch then stops and
// renewals alone detect the loss.

package fencegate

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// watchWait is the longest single watch poll (below the idle timeouts of common proxies).
const watchWait = 25 * time.Second

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
}

// startKeeper renews every ttl/3 from start (when the lease's validity began) and watches each of watches,
// calling onLost once, from a keeper goroutine, when the lease is lost.
func startKeeper(c *Client, ttl time.Duration, renew func(context.Context, time.Duration) (*RenewResult, error),
	watches []watch, onLost func(string), start time.Time) *keeper {
	ctx, cancel := context.WithCancel(context.Background())
	k := &keeper{client: c, ttl: ttl, renew: renew, onLost: onLost, ctx: ctx, cancel: cancel, until: start.Add(ttl)}
	k.wg.Add(1 + len(watches))
	go k.renewLoop(start)
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

// expired is true once the lease has gone a full TTL without a successful renewal.
func (k *keeper) expired() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return !time.Now().Before(k.until)
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

func (k *keeper) renewLoop(start time.Time) {
	defer k.wg.Done()
	next := start.Add(k.ttl / 3)
	for k.sleep(time.Until(next)) {
		now := time.Now()
		k.mu.Lock()
		left := k.until.Sub(now)
		k.mu.Unlock()
		if left <= 0 {
			k.lost("unrenewed")
			return
		}
		timeout := k.client.timeout
		if left < timeout {
			timeout = left
		}
		if timeout < retryMin {
			timeout = retryMin
		}
		_, err := k.renew(k.ctx, timeout)
		if k.ctx.Err() != nil {
			return
		}
		var p *Problem
		switch {
		case err == nil:
			k.mu.Lock()
			k.until = now.Add(k.ttl)
			k.mu.Unlock()
			next = now.Add(k.ttl / 3)
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
	for k.ctx.Err() == nil {
		started := time.Now()
		a, err := k.client.call(k.ctx, request{method: "GET", path: w.path, query: query, effect: Read,
			wait: watchWait, retry: &noRetry})
		if k.ctx.Err() != nil {
			return
		}
		var p *Problem
		if errors.As(err, &p) && p.Status < 500 {
			return // no watch endpoint (400 for the unknown parameter): renewals detect the loss
		}
		if err != nil {
			k.sleep(time.Second)
			continue
		}
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
