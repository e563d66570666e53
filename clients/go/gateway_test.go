// SPDX-License-Identifier: Apache-2.0

// gateway_test.go tests the Go client against a real gateway (started by tests/conformance/driver.py, whose
// FG_CONF_* variables name it; skipped without them): what the conformance scenarios do not cover, namely
// contexts that end waits (and give back a grant that came as they ended) and bodies, WithLock's context
// on loss, every kind of fenced write, batches, Prefer: return=minimal, and audit paging; and, through a
// fault proxy of the test's own in front of the gateway, retries that meet a lost lease.

package fencegate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// gatewayClient is a client of the main gateway through the driver's proxy, or directly with direct.
func gatewayClient(t *testing.T, direct bool) *Client {
	t.Helper()
	url := os.Getenv("FG_CONF_URL")
	if direct {
		url = os.Getenv("FG_CONF_DIRECT_URL")
	}
	if url == "" {
		t.Skip("FG_CONF_URL is not set: run through tests/conformance/driver.py")
	}
	c, err := New(Config{URL: url, APIKey: os.Getenv("FG_CONF_ADMIN_KEY"), Owner: "go-tests", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// faultProxy is a reverse proxy in front of the main gateway (FG_CONF_DIRECT_URL) that answers each request
// as its rule says, given the request and how many of the same method and path came before it: "forward";
// "refuse503", a 503 backend_unavailable with Retry-After: 1 that the gateway never saw; "forward503",
// forwarded and that 503 answered in place of the gateway's answer (as a gateway whose Redis reply missed
// its deadline would); or "dropreply", forwarded and its reply lost (the connection closes without one).
type faultProxy struct {
	*httptest.Server
	mu        sync.Mutex
	seen      map[string]int // requests by method and path
	forwarded map[string]int // of which the gateway got
}

func newFaultProxy(t *testing.T, rule func(r *http.Request, before int) string) *faultProxy {
	t.Helper()
	gateway, err := url.Parse(os.Getenv("FG_CONF_DIRECT_URL"))
	if err != nil || gateway.Host == "" {
		t.Skip("FG_CONF_DIRECT_URL is not set: run through tests/conformance/driver.py")
	}
	upstream := httputil.NewSingleHostReverseProxy(gateway)
	upstream.ErrorLog = log.New(io.Discard, "", 0) // a client that hung up (a watch ended) is no news
	director := upstream.Director
	upstream.Director = func(r *http.Request) {
		director(r)
		r.Host = gateway.Host
	}
	p := &faultProxy{seen: map[string]int{}, forwarded: map[string]int{}}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		what := r.Method + " " + r.URL.Path
		p.mu.Lock()
		before := p.seen[what]
		p.seen[what]++
		p.mu.Unlock()
		action := rule(r, before)
		refuse := func() {
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"type":"/problems/backend_unavailable","status":503,"title":"Backend unavailable"}`))
		}
		if action == "refuse503" {
			refuse()
			return
		}
		p.mu.Lock()
		p.forwarded[what]++
		p.mu.Unlock()
		switch action {
		case "dropreply":
			upstream.ServeHTTP(httptest.NewRecorder(), r)
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
		case "forward503":
			upstream.ServeHTTP(httptest.NewRecorder(), r)
			refuse()
		default:
			upstream.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(p.Close)
	return p
}

// count is how many requests of method and path came, and how many of them the gateway got.
func (p *faultProxy) count(method, path string) (seen, forwarded int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[method+" "+path], p.forwarded[method+" "+path]
}

// client is a client of the gateway through the proxy, configured as cfg besides its URL and key.
func (p *faultProxy) client(t *testing.T, cfg Config) *Client {
	t.Helper()
	cfg.URL, cfg.APIKey, cfg.Owner = p.URL, os.Getenv("FG_CONF_ADMIN_KEY"), "go-tests"
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func unique(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
}

func TestGatewayCancelEndsWait(t *testing.T) {
	c := gatewayClient(t, true) // the proxy would keep the cancelled wait's upstream connection open
	ctx := context.Background()
	name := unique("go:cancel")
	held, err := c.Lock(ctx, name, LeaseOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	started := time.Now()
	_, err = c.Lock(waitCtx, name, LeaseOptions{Wait: 10 * time.Second})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expected the context's deadline, got %v", err)
	}
	// Half the 10 s wait: room for a loaded machine, and a wait the cancel did not end still fails.
	if took := time.Since(started); took > 5*time.Second {
		t.Fatalf("the cancelled wait took %v", took)
	}
	// The gateway keeps the place of a request_id for a retry; its turn goes on at once when nobody retried.
	// (A release before the gateway saw the hang-up, within milliseconds, would hand the lock to the wait:
	// the tests below cover that grant, which the client gives back.)
	time.Sleep(500 * time.Millisecond)
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		status, err := c.LockStatus(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if !status.Held && status.Waiting == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled waiter's place held the lock up: %+v", status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leaseKind is a kind of lease: how to take it on a name, how many wait for it, and whether anybody holds it.
type leaseKind struct {
	name    string
	take    func(ctx context.Context, c *Client, name string, o LeaseOptions) (func(context.Context) error, error)
	waiting func(ctx context.Context, c *Client, name string) (int64, error)
	held    func(ctx context.Context, c *Client, name string) (bool, error)
}

func lockHeld(ctx context.Context, c *Client, name string) (bool, error) {
	status, err := c.LockStatus(ctx, name)
	return err == nil && status.Held, err
}

func lockWaiting(ctx context.Context, c *Client, name string) (int64, error) {
	status, err := c.LockStatus(ctx, name)
	if err != nil {
		return 0, err
	}
	return status.Waiting, nil
}

var leaseKinds = []leaseKind{
	{name: "lock", waiting: lockWaiting, held: lockHeld,
		take: func(ctx context.Context, c *Client, name string, o LeaseOptions) (func(context.Context) error, error) {
			l, err := c.Lock(ctx, name, o)
			if err != nil {
				return nil, err
			}
			return l.Release, nil
		}},
	{name: "semaphore",
		take: func(ctx context.Context, c *Client, name string, o LeaseOptions) (func(context.Context) error, error) {
			l, err := c.Semaphore(ctx, name, 1, o)
			if err != nil {
				return nil, err
			}
			return l.Release, nil
		},
		waiting: func(ctx context.Context, c *Client, name string) (int64, error) {
			status, err := c.SemaphoreStatus(ctx, name)
			if err != nil {
				return 0, err
			}
			return status.Waiting, nil
		},
		held: func(ctx context.Context, c *Client, name string) (bool, error) {
			status, err := c.SemaphoreStatus(ctx, name)
			return err == nil && status.Holders > 0, err
		}},
	{name: "lockset", waiting: lockWaiting,
		take: func(ctx context.Context, c *Client, name string, o LeaseOptions) (func(context.Context) error, error) {
			s, err := c.LockSet(ctx, []string{name, name + "-b"}, o)
			if err != nil {
				return nil, err
			}
			return s.Release, nil
		},
		held: func(ctx context.Context, c *Client, name string) (bool, error) {
			first, err := lockHeld(ctx, c, name)
			if err != nil || first {
				return first, err
			}
			return lockHeld(ctx, c, name+"-b")
		}},
}

// cancelAsGranted takes name as kind through holder, queues an acquire of it through waiter, releases the
// holder's lease and then cancels the acquire's context; it returns once that acquire returned, the lease
// it got (if its answer came first) released.
func cancelAsGranted(t *testing.T, kind leaseKind, holder, waiter *Client, name string) {
	t.Helper()
	ctx := context.Background()
	release, err := kind.take(ctx, holder, name, LeaseOptions{TTL: 30 * time.Second, Wait: TryOnce, NoWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		got, err := kind.take(waitCtx, waiter, name, LeaseOptions{TTL: 30 * time.Second, Wait: 10 * time.Second})
		if err == nil {
			err = got(ctx)
		} else if errors.Is(err, context.Canceled) {
			err = nil
		}
		done <- err
	}()
	for i := 0; ; i++ {
		waiting, err := kind.waiting(ctx, holder, name)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if i == 100 {
			t.Fatal("the acquire did not queue")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the cancelled acquire: %v", err)
	}
}

// stillHeld says whether somebody still holds name (as kind) a second on: the gateway hands a place kept for
// a retry on about 200 ms after its turn came.
func stillHeld(t *testing.T, kind leaseKind, c *Client, name string) bool {
	t.Helper()
	for deadline := time.Now().Add(time.Second); ; time.Sleep(50 * time.Millisecond) {
		held, err := kind.held(context.Background(), c, name)
		if err != nil {
			t.Fatal(err)
		}
		if !held {
			return false
		}
		if time.Now().After(deadline) {
			return true
		}
	}
}

// TestGatewayCancelAfterTheGrantLeavesNoLease: the driver's proxy passes the answer to a waiting acquire of a
// "lateanswer" name on only after 2 s: the holder's release grants the wait at the gateway, then the
// context ends before the client heard of it. The gateway holds the grant for the request_id until its
// 30 s TTL; the client must ask for it again and release it before Lock returns. Broken variant caught:
// Lock, Semaphore and LockSet returned context.Canceled and the lease nobody had held the lock or slot
// for 30 s.
func TestGatewayCancelAfterTheGrantLeavesNoLease(t *testing.T) {
	proxied, direct := gatewayClient(t, false), gatewayClient(t, true)
	var leaked []string
	for _, kind := range leaseKinds {
		name := unique("go:lateanswer-" + kind.name)
		cancelAsGranted(t, kind, direct, proxied, name)
		if stillHeld(t, kind, direct, name) {
			leaked = append(leaked, kind.name)
		}
	}
	if len(leaked) > 0 {
		t.Fatalf("held by the lease of the cancelled acquire: %v", leaked)
	}
}

// TestGatewayCancelRightAfterTheGrantingRelease: as above, straight to the gateway: the cancel races the
// grant's answer, so the gateway may keep the grant for a retry (the client hung up as it was granted), or
// the client may hear the grant first.
func TestGatewayCancelRightAfterTheGrantingRelease(t *testing.T) {
	c := gatewayClient(t, true)
	var leaked []int
	for i := 0; i < 10; i++ {
		name := unique("go:cancelrace")
		cancelAsGranted(t, leaseKinds[0], c, c, name)
		if stillHeld(t, leaseKinds[0], c, name) {
			leaked = append(leaked, i)
		}
	}
	if len(leaked) > 0 {
		t.Fatalf("tries whose lock was held by the lease of the cancelled acquire: %v", leaked)
	}
}

// TestGatewayReleaseAfterAFailedRelease: a release that failed (its context was cancelled, so it never left)
// leaves the lock held at the gateway, and blocks writes through the lease at once; the next Release sends
// it and frees the lock, for a lock and for a lock set. Broken variant caught: the first call marked the
// lease released before sending, so the second returned nil without sending and LockStatus still showed
// the lock held, for the rest of its TTL with nothing renewing it.
func TestGatewayReleaseAfterAFailedRelease(t *testing.T) {
	c := gatewayClient(t, false)
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	held := func(name string) bool {
		t.Helper()
		status, err := c.LockStatus(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return status.Held
	}
	name := unique("go:rerelease")
	l, err := c.Lock(ctx, name, LeaseOptions{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("a release with a cancelled context: %v", err)
	}
	var lost *LeaseLostError
	if _, err := l.Redis().Put(ctx, "app:"+name, "v"); !errors.As(err, &lost) {
		t.Fatalf("a write once the release was asked for: %v", err)
	}
	if !held(name) {
		t.Fatal("the release with a cancelled context was sent")
	}
	if err := l.Release(ctx); err != nil || held(name) {
		t.Fatalf("the second release: %v; held afterwards: %v", err, held(name))
	}

	names := []string{unique("go:rerelease-a"), unique("go:rerelease-b")}
	s, err := c.LockSet(ctx, names, LeaseOptions{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("a lock set's release with a cancelled context: %v", err)
	}
	if err := s.Release(ctx); err != nil {
		t.Fatalf("the lock set's second release: %v", err)
	}
	for _, name := range names {
		if held(name) {
			t.Fatalf("%s is still held after the lock set's second release", name)
		}
	}
}

func TestGatewayWithLockContextEndsOnLoss(t *testing.T) {
	c := gatewayClient(t, false)
	ctx := context.Background()
	name := unique("go:withlock")
	err := c.WithLock(ctx, name, LeaseOptions{TTL: 30 * time.Second}, func(ctx context.Context, l *Lease) error {
		if _, err := c.RevokeLock(context.Background(), name, "test"); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(3 * time.Second):
			return errors.New("the context was not cancelled within 3 s of the revoke")
		}
	})
	var lost *LeaseLostError
	if !errors.As(err, &lost) || lost.Reason != "revoked" {
		t.Fatalf("expected a LeaseLostError with reason revoked, got %v", err)
	}
}

// TestGatewayWithLockReleasesOnPanic: a panic in WithLock's function (which net/http, for one, recovers)
// goes on, and the lock or set is released on its way: its keeper would otherwise renew it for as long as
// the process lives.
func TestGatewayWithLockReleasesOnPanic(t *testing.T) {
	c := gatewayClient(t, false)
	ctx := context.Background()
	name := unique("go:panic")
	panicking := func(run func()) (recovered any) {
		defer func() { recovered = recover() }()
		run()
		return nil
	}
	o := LeaseOptions{TTL: 30 * time.Second}
	if got := panicking(func() {
		_ = c.WithLock(ctx, name, o, func(context.Context, *Lease) error { panic("in the lock") })
	}); got != "in the lock" {
		t.Fatalf("WithLock's panic came back as %v", got)
	}
	if got := panicking(func() {
		_ = c.WithLockSet(ctx, []string{name + "-a", name + "-b"}, o, func(context.Context, *LockSet) error { panic("in the set") })
	}); got != "in the set" {
		t.Fatalf("WithLockSet's panic came back as %v", got)
	}
	for _, lock := range []string{name, name + "-a", name + "-b"} {
		if held, err := lockHeld(ctx, c, lock); err != nil || held {
			t.Fatalf("%s after the panic: held %v (%v)", lock, held, err)
		}
	}
}

func TestGatewayWrites(t *testing.T) {
	c := gatewayClient(t, false)
	ctx := context.Background()
	key := unique("go-row")
	err := c.WithLock(ctx, unique("go:writes"), LeaseOptions{TTL: 5 * time.Second}, func(ctx context.Context, l *Lease) error {
		invoices := l.PG("invoices")
		if res, err := invoices.Insert(ctx, map[string]any{"id": key, "status": "open", "amount_cents": 100}); err != nil || res.Row["status"] != "open" || res.Fence != l.Fence {
			return fmt.Errorf("insert: %+v %v", res, err)
		}
		var conflict *ConflictError
		if _, err := invoices.Insert(ctx, map[string]any{"id": key}); !errors.As(err, &conflict) {
			return fmt.Errorf("a second insert: %v", err)
		}
		if res, err := invoices.Patch(ctx, key, map[string]any{"status": "paid"}); err != nil || res.Row["status"] != "paid" {
			return fmt.Errorf("patch: %+v %v", res, err)
		}
		res, err := invoices.Batch(ctx, []BatchOp{{Op: "patch", Key: key, Set: map[string]any{"note": "batched"}},
			{Op: "put", Key: key + "-2", Row: map[string]any{"status": "open"}}})
		if err != nil || len(res.Results) != 2 {
			return fmt.Errorf("batch: %+v %v", res, err)
		}
		if res, err := invoices.ReturnMinimal().Patch(ctx, key, map[string]any{"note": "minimal"}); err != nil || !res.Applied || !res.Minimal || res.Row != nil {
			return fmt.Errorf("minimal patch: %+v %v", res, err)
		}
		if _, err := l.Redis().Put(ctx, "app:"+key, "v1"); err != nil {
			return err
		}
		if res, err := l.Redis().Patch(ctx, "app:"+key+":h", map[string]any{"a": "1"}); err != nil || res.Fields["a"] != "1" {
			return fmt.Errorf("redis patch: %+v %v", res, err)
		}
		if _, err := l.Redis().Delete(ctx, "app:"+key); err != nil {
			return err
		}
		var notFound *NotFoundError
		if _, err := invoices.Delete(ctx, key+"-none"); !errors.As(err, &notFound) {
			return fmt.Errorf("a delete of no row: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	row, err := c.PG("invoices", "").Get(ctx, key)
	if err != nil || row.Row["status"] != "paid" || row.Row["note"] != "minimal" {
		t.Fatalf("the row after the writes: %+v %v", row, err)
	}
}

func TestGatewayAuditPages(t *testing.T) {
	c := gatewayClient(t, false)
	ctx := context.Background()
	name, key := unique("go:audit"), unique("go-audit")
	old, err := c.Lock(ctx, name, LeaseOptions{TTL: 200 * time.Millisecond, NoRenew: true})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	err = c.WithLock(ctx, name, LeaseOptions{TTL: 5 * time.Second}, func(ctx context.Context, l *Lease) error {
		_, err := l.Redis().Put(ctx, "app:"+key, "new")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		_, err := old.Redis().Put(ctx, "app:"+key, "old")
		var stale *StaleFenceError
		if !errors.As(err, &stale) || stale.PresentedFence != old.Fence || stale.Resource != "redis:app:"+key {
			t.Fatalf("expected a stale fence naming the write, got %v", err)
		}
	}
	// Audit records are written after the refusal is answered: read until all three are there.
	var records []AuditRecord
	count := 0
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		pages := c.Audit(AuditQuery{Resource: "redis:app:" + key, PageSize: 2})
		records, count = nil, 0
		for pages.Next(ctx) {
			count++
			records = append(records, pages.Records()...)
		}
		if pages.Err() != nil {
			t.Fatal(pages.Err())
		}
		if len(records) >= 3 || time.Now().After(deadline) {
			break
		}
	}
	if len(records) != 3 || count != 2 {
		t.Fatalf("expected 3 records on 2 pages, got %d on %d", len(records), count)
	}
	for _, r := range records {
		if r.PresentedFence != old.Fence || r.Reason == "" {
			t.Fatalf("a record of another write: %+v", r)
		}
	}
}

// TestGatewayRenewalCutByMaxHold: a 3 s lease whose max_hold is 3.3 s. Its first renewal, at about 1 s, is
// granted only up to the hold deadline; the client must count the lease valid no longer than that, and
// report it lost by the deadline (plus a margin for a loaded machine), not a whole TTL after the renewal.
// The watch is off, so that only the client's own reckoning can tell. Broken variant caught: the keeper
// counting every renewal as a full TTL held the lease valid until about 4 s (Check passed at 3.8 s while
// the gateway had ended the lease at 3.3 s).
func TestGatewayRenewalCutByMaxHold(t *testing.T) {
	c := gatewayClient(t, true)
	ctx := context.Background()
	const ttl, maxHold, margin = 3 * time.Second, 3300 * time.Millisecond, 500 * time.Millisecond
	sent := time.Now()
	l, err := c.Lock(ctx, unique("go:maxhold"), LeaseOptions{TTL: ttl, MaxHold: maxHold, NoWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	time.Sleep(time.Until(sent.Add(2 * time.Second))) // renewed once, and still valid
	if err := l.Check(); err != nil {
		t.Fatalf("the lease is lost before its hold deadline: %v", err)
	}
	select {
	case <-l.Lost():
	case <-time.After(time.Until(sent.Add(maxHold + margin))):
	}
	var lost *LeaseLostError
	if err := l.Check(); !errors.As(err, &lost) || lost.Reason != "max_hold_exceeded" {
		t.Fatalf("%v after the acquire, past the hold deadline: expected a LeaseLostError (max_hold_exceeded), got %v",
			time.Since(sent), err)
	}
}

// TestGatewayWriteRetryStopsOnceTheLeaseIsLost: a 1 s lease whose max_hold is 1.5 s PUTs at 0.9 s through a
// proxy that answers the first three tries 503 with Retry-After: 1. The client counts the lease lost by
// 1.5 s (the gateway ends it then, and another holder may take the lock), so no try may go out after that:
// the write fails with a *LeaseLostError, or an *OutcomeUnknownError whose Last is one (the 503 may have
// followed a commit), and the gateway never got the PUT. Failed before the fix: the lease was checked once,
// before the first try; the fourth try went out at about 3.9 s and was applied under the lost lease's fence.
func TestGatewayWriteRetryStopsOnceTheLeaseIsLost(t *testing.T) {
	proxy := newFaultProxy(t, func(r *http.Request, before int) string {
		if r.Method == "PUT" && before < 3 {
			return "refuse503"
		}
		return "forward"
	})
	c, direct := proxy.client(t, Config{Timeout: 5 * time.Second}), gatewayClient(t, true)
	ctx := context.Background()
	key := "app:" + unique("go-retrylost")
	sent := time.Now()
	l, err := c.Lock(ctx, unique("go:retrylost"), LeaseOptions{TTL: time.Second, MaxHold: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctx) }()
	time.Sleep(time.Until(sent.Add(900 * time.Millisecond)))
	_, err = l.Redis().Put(ctx, key, "late")
	var lost *LeaseLostError
	var unknown *OutcomeUnknownError
	if !errors.As(err, &lost) && !(errors.As(err, &unknown) && errors.As(unknown.Last, &lost)) {
		t.Fatalf("a PUT retried past the loss of its lease: %T %v; expected the lease lost", err, err)
	}
	if seen, forwarded := proxy.count("PUT", "/v1/redis/"+key); forwarded != 0 {
		t.Fatalf("%d of %d tries reached the gateway after the lease was lost", forwarded, seen)
	}
	var notFound *NotFoundError
	if got, err := direct.Redis("").Get(ctx, key); !errors.As(err, &notFound) {
		t.Fatalf("the key after the write: %+v %v; expected none", got, err)
	}
}

// TestGatewayFailedAcquireLeavesNoLease: the proxy forwards the first two acquires of a lock, a semaphore and
// a lock set and does each case's fault to them; the client, allowed two tries, fails with that case's error.
// The gateway granted the first try and answered the second with the same lease, holding it for a retry of
// the request_id for its 20 s TTL; the client must give it back (one more acquire under the same request_id,
// with wait_ms 0, then its release) before it returns.
func TestGatewayFailedAcquireLeavesNoLease(t *testing.T) {
	cases := []struct {
		name  string
		fault string // what the proxy does with the first two acquires of each name
		retry RetryPolicy
		fails func(err error) bool // whether err is the error the acquire must fail with
	}{
		// The proxy loses the replies; the client fails with an *UnreachableError (Sent true). Failed before
		// the fix: only a cancelled ctx gave a grant back, and the lock, slot and lock set stayed held by a
		// lease nobody had.
		{name: "lostreplies", fault: "dropreply", retry: RetryPolicy{Attempts: 2, Backoff: 10 * time.Millisecond},
			fails: func(err error) bool {
				var unreachable *UnreachableError
				return errors.As(err, &unreachable) && unreachable.Sent
			}},
		// The proxy answers each with a 503 (Retry-After: 1) in place of the gateway's grant, as a gateway
		// whose Redis reply missed its deadline would; the client fails with the *BackendUnavailableError and
		// its RetryAfter. Failed before the fix: an acquire whose every try was answered gave nothing back,
		// and the lock, slot and lock set stayed held by a lease nobody had.
		{name: "answered503", fault: "forward503", retry: RetryPolicy{Attempts: 2},
			fails: func(err error) bool {
				var unavailable *BackendUnavailableError
				return errors.As(err, &unavailable) && unavailable.RetryAfter == time.Second
			}},
	}
	direct := gatewayClient(t, true)
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var leaked []string
			for _, kind := range leaseKinds {
				proxy := newFaultProxy(t, func(r *http.Request, before int) string {
					if strings.HasSuffix(r.URL.Path, "/acquire") && before < 2 {
						return tc.fault
					}
					return "forward"
				})
				c := proxy.client(t, Config{Retry: tc.retry})
				name := unique("go:" + tc.name + "-" + kind.name)
				_, err := kind.take(ctx, c, name, LeaseOptions{TTL: 20 * time.Second, Wait: TryOnce, NoWatch: true})
				if !tc.fails(err) {
					t.Fatalf("%s: an acquire whose two tries met %s: %T %v", kind.name, tc.fault, err, err)
				}
				path := "/v1/" + kind.name + "s/" + name + "/acquire"
				if kind.name == "lockset" {
					path = "/v1/locksets/acquire"
				}
				if seen, forwarded := proxy.count("POST", path); seen != 3 || forwarded != 3 {
					t.Errorf("%s: %d acquires (%d forwarded), expected 2 tries and the give-back", kind.name, seen,
						forwarded)
				}
				held, err := kind.held(ctx, direct, name)
				if err != nil {
					t.Fatal(err)
				}
				if held {
					leaked = append(leaked, kind.name)
				}
			}
			if len(leaked) > 0 {
				t.Fatalf("held by the lease granted to the failed acquire: %v", leaked)
			}
		})
	}
}
