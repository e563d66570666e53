// SPDX-License-Identifier: Apache-2.0

// unit_test.go tests what needs no gateway: the error map against the gateway's table
// (clients/conformance/codes.json), the retry rule of each Effect, Retry-After, Prefer: return=minimal's
// 204, redirects (never followed), and HTTPS with a CA file. The HTTP servers here answer canned replies to the client's transport; the
// behaviour against a real gateway is gateway_test.go's and the conformance scenarios'.

package fencegate

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestUnitCodesMatchTheGateway(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "conformance", "codes.json"))
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Codes []struct {
			Code   string `json:"code"`
			Status int    `json:"status"`
		} `json:"codes"`
	}
	if err := json.Unmarshal(data, &table); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, row := range table.Codes {
		want = append(want, row.Code)
		err := typedError(&Problem{Code: row.Code, Status: row.Status})
		if _, plain := err.(*Problem); plain {
			t.Errorf("%s has no error type of its own", row.Code)
		}
		var p *Problem
		if !errors.As(err, &p) || p.Code != row.Code {
			t.Errorf("%s: errors.As does not find its Problem", row.Code)
		}
	}
	got := ProblemCodes()
	sort.Strings(want)
	sort.Strings(got)
	if len(got) != len(want) {
		t.Fatalf("the client maps %v, the gateway has %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("the client maps %v, the gateway has %v", got, want)
		}
	}
}

// dropper answers every request by closing the connection without a reply, counting them.
func dropper(t *testing.T) (*httptest.Server, *int32) {
	var count int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt32(&count, 1)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &count
}

func TestUnitOnceIsNotRetriedAfterALostReply(t *testing.T) {
	srv, count := dropper(t)
	c, _ := New(Config{URL: srv.URL, APIKey: NoKey, Retry: RetryPolicy{Attempts: 3, Backoff: time.Millisecond}})
	_, err := c.PG("invoices", "token").Insert(context.Background(), map[string]any{"id": "1"})
	var unreachable *UnreachableError
	if !errors.As(err, &unreachable) || !unreachable.Sent || atomic.LoadInt32(count) != 1 {
		t.Fatalf("an insert whose reply was lost: %v after %d tries", err, atomic.LoadInt32(count))
	}
	atomic.StoreInt32(count, 0)
	_, err = c.PG("invoices", "token").Put(context.Background(), "1", map[string]any{"status": "x"})
	if !errors.As(err, &unreachable) || atomic.LoadInt32(count) != 3 {
		t.Fatalf("a put whose reply was lost: %v after %d tries, expected 3", err, atomic.LoadInt32(count))
	}
}

func TestUnitRefusedConnectionIsRetriedForOnce(t *testing.T) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := listener.Addr().String()
	listener.Close()
	c, _ := New(Config{URL: "http://" + addr, APIKey: NoKey, Retry: RetryPolicy{Attempts: 2, Backoff: time.Millisecond}})
	_, err = c.PG("invoices", "token").Delete(context.Background(), "1")
	var unreachable *UnreachableError
	if !errors.As(err, &unreachable) || unreachable.Sent {
		t.Fatalf("a refused connection: %v", err)
	}
}

func TestUnitReturnMinimal(t *testing.T) {
	var prefer atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prefer.Store(r.Header.Get("Prefer"))
		w.Header().Set("Preference-Applied", "return=minimal")
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	c, _ := New(Config{URL: srv.URL, APIKey: NoKey})
	res, err := c.PG("invoices", "token").ReturnMinimal().Patch(context.Background(), "1", map[string]any{"a": 1})
	if err != nil || !res.Applied || !res.Minimal || prefer.Load() != "return=minimal" {
		t.Fatalf("a minimal write: %+v %v (Prefer %v)", res, err, prefer.Load())
	}
}

// TestUnitURLCredentialsAreNotSent gives the client a URL with user:password@: neither goes out, as Basic
// auth or otherwise, nor shows in an error; a key goes as its bearer, as without them. Broken variant
// caught: net/http sent the URL's userinfo as Authorization: Basic when no key was configured.
func TestUnitURLCredentialsAreNotSent(t *testing.T) {
	var authorization atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		authorization.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"lock":"x","held":false,"fence":null,"waiting":0}`))
	}))
	defer srv.Close()
	withCredentials := strings.Replace(srv.URL, "http://", "http://alice:s3cret@", 1)
	for key, want := range map[string]string{NoKey: "", "k1": "Bearer k1"} {
		c, err := New(Config{URL: withCredentials, APIKey: key})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.LockStatus(context.Background(), "x"); err != nil || authorization.Load() != want {
			t.Fatalf("key %q: Authorization %q, want %q (%v)", key, authorization.Load(), want, err)
		}
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://alice:s3cret@" + listener.Addr().String()
	listener.Close()
	c, _ := New(Config{URL: closed, APIKey: NoKey, Retry: RetryPolicy{Attempts: 1}})
	if _, err := c.LockStatus(context.Background(), "x"); err == nil || strings.Contains(err.Error(), "alice") ||
		strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("an unreachable gateway: %v", err)
	}
}

// TestUnitMalformedURLErrorHidesCredentials gives New gateway URLs it refuses, each with user:password@: its
// error says what is wrong with the URL without quoting the password (nor the user). Broken variant caught:
// the error quoted the URL whole, "not \"ftp://alice:s3cret@gw:8480\"".
func TestUnitMalformedURLErrorHidesCredentials(t *testing.T) {
	for _, raw := range []string{"ftp://alice:s3cret@gw:8480", "http://alice:s3cret@", "alice:s3cret@gw:8480",
		"http://alice:s3cret@gw:port", "http://alice:s3/cret@gw", "ftp://alice:s3cret@gw/a@b?c#d@e",
		"http://alice:s3cret@[::1"} {
		_, err := New(Config{URL: raw, APIKey: NoKey})
		if err == nil {
			t.Fatalf("%q: accepted", raw)
		}
		if msg := err.Error(); strings.Contains(msg, "s3") || strings.Contains(msg, "cret") ||
			strings.Contains(msg, "alice") || !strings.Contains(msg, "http://host[:port]") {
			t.Fatalf("%q: %v", raw, err)
		}
	}
	_, err := New(Config{URL: "ftp://alice:s3cret@gw:8480/x", APIKey: NoKey})
	if want := `not "ftp://***@gw:8480/x"`; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("the URL shown: %v, want it to end %s", err, want)
	}
}

func TestUnitHTTPSWithCAFile(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"semaphore":"s","limit":2,"holders":1,"waiting":0}`))
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{URL: srv.URL, CAFile: ca, APIKey: NoKey})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := c.SemaphoreStatus(context.Background(), "s"); err != nil || s.Holders != 1 {
		t.Fatalf("over HTTPS with the CA file: %+v %v", s, err)
	}
	untrusting, _ := New(Config{URL: srv.URL, APIKey: NoKey, Retry: RetryPolicy{Attempts: 3}})
	if _, err := untrusting.SemaphoreStatus(context.Background(), "s"); err == nil {
		t.Fatal("a certificate no CA vouches for was accepted")
	}
}

// bigFence is 2^53 + 1: the first fence a float64 cannot hold (it rounds to 2^53).
const bigFence = 9007199254740993

// TestUnitFencesAboveTwoToThe53 reads fences past 2^53 from a watch answer and from a stale_fence problem:
// both must come out exact. Broken variant caught: the watch answer decoded into map[string]any, its
// fence a float64, took the held lease for "taken over"; StaleFenceError's fences read through float64
// came out as 2^53.
func TestUnitFencesAboveTwoToThe53(t *testing.T) {
	status, ok := decodeWatch([]byte(`{"lock":"x","held":true,"fence":9007199254740993,"expires_in_ms":900}`))
	if !ok || status.Fence == nil || *status.Fence != bigFence {
		t.Fatalf("the watch answer's fence: %+v %v", status, ok)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case "GET": // the plain status of a lock held under the watched fence, answered at once
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"lock":"x","held":true,"fence":9007199254740993,"owner":"o","expires_in_ms":900,"waiting":0}`))
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"type":"/problems/stale_fence","status":409,"presented_fence":9007199254740993,` +
				`"current_fence":9007199254740995,"resource":"redis:app:x"}`))
		}
	}))
	defer srv.Close()
	c, _ := New(Config{URL: srv.URL, APIKey: NoKey})
	var lost []string
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := &keeper{client: c, ctx: ctx, cancel: cancel, onLost: func(reason string) { lost = append(lost, reason) }}
	k.wg.Add(1)
	k.watchLoop(watch{path: "/v1/locks/x", fence: bigFence}) // returns on the plain status
	if len(lost) != 0 {
		t.Fatalf("a lease held under its own fence was taken for lost: %v", lost)
	}
	_, err := c.Redis("token").Put(context.Background(), "app:x", "v")
	var stale *StaleFenceError
	if !errors.As(err, &stale) || stale.PresentedFence != bigFence || stale.CurrentFence != bigFence+2 {
		t.Fatalf("expected a StaleFenceError with exact fences, got %#v", err)
	}
}

// fakeLockGateway answers a lock's acquire after delay with a lease of ttl, each renewal with renew's
// status and body, and the status (watch) with held; it counts the calls by their last path segment.
func fakeLockGateway(t *testing.T, delay time.Duration, ttl time.Duration, renewStatus int, renewBody string,
	watchBody string) (*Client, func(string) int32) {
	var mu sync.Mutex
	counts := map[string]int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		what := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		if r.Method == "GET" {
			what = "status"
		}
		mu.Lock()
		counts[what]++
		mu.Unlock()
		status, body := http.StatusOK, ""
		switch what {
		case "acquire":
			time.Sleep(delay)
			body = fmt.Sprintf(`{"lock":"x","token":"t","fence":7,"ttl_ms":%d,"expires_at_ms":%d}`, ttl.Milliseconds(),
				time.Now().Add(ttl).UnixMilli())
		case "renew":
			status, body = renewStatus, renewBody
		case "release":
			body = `{"released":true}`
		case "status":
			body = watchBody
		}
		if status >= 400 {
			w.Header().Set("Content-Type", "application/problem+json")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	c, _ := New(Config{URL: srv.URL, APIKey: NoKey, Timeout: 2 * time.Second})
	t.Cleanup(c.Close)
	return c, func(what string) int32 {
		mu.Lock()
		defer mu.Unlock()
		return counts[what]
	}
}

// TestUnitNoKeeperForALeaseLostAtItsFreshStart: an acquire answered after over a third of the TTL is
// renewed at once; when that renewal answers 410, the lease is lost and nothing keeps it: no renewal nor
// watch follows. Broken variant caught: the keeper started all the same, renewing and watching a lease
// that was over (a second renewal and a watch poll arrived).
func TestUnitNoKeeperForALeaseLostAtItsFreshStart(t *testing.T) {
	c, count := fakeLockGateway(t, 150*time.Millisecond, 300*time.Millisecond, http.StatusGone,
		`{"type":"/problems/lease_lost","status":410,"reason":"expired"}`, `{"lock":"x","held":true,"fence":7}`)
	l, err := c.Lock(context.Background(), "x", LeaseOptions{TTL: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	default:
		t.Fatal("the lease whose fresh-start renewal answered 410 is not lost")
	}
	time.Sleep(400 * time.Millisecond) // more than a TTL: a keeper would have renewed and watched by now
	if l.Reason() != "expired" || count("renew") != 1 || count("status") != 0 {
		t.Fatalf("reason %q, %d renewals, %d watch polls; expected expired, 1, 0", l.Reason(), count("renew"), count("status"))
	}
	var lost *LeaseLostError
	if err := l.Release(context.Background()); !errors.As(err, &lost) {
		t.Fatalf("the release of a lost lease: %v", err)
	}
}

// TestUnitLossReportedWhileTheAcquireRecordsItsKeeper: the watch answers "revoked" at once, so the keeper
// marks the lease lost while the acquire is still recording it. Broken variant caught, by the race
// detector (go test -race): the acquire wrote state.keeper without the lock that mark reads it under.
func TestUnitLossReportedWhileTheAcquireRecordsItsKeeper(t *testing.T) {
	c, _ := fakeLockGateway(t, 0, 5*time.Second, http.StatusOK, `{"fence":7,"ttl_ms":5000}`,
		`{"lock":"x","held":false,"reason":"revoked"}`)
	for i := 0; i < 20; i++ {
		l, err := c.Lock(context.Background(), "x", LeaseOptions{TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.Lost():
		case <-time.After(2 * time.Second):
			t.Fatal("the watch's revoked was not reported")
		}
		if l.Reason() != "revoked" {
			t.Fatalf("reason %q", l.Reason())
		}
		_ = l.Release(context.Background())
	}
}

// TestUnitAcquireWithoutWaitOutlastsTheTimeout: an acquire that names no wait leaves it to the gateway's
// defaults.wait_ms, which may hold the request up to an hour; the gateway here answers after 300 ms, past
// the client's 100 ms timeout. The acquire must wait for that answer, sent once and without wait_ms.
// Broken variant caught: the per-try timeout had no room for the gateway's wait; the acquire gave up after
// 100 ms on a request the gateway went on to grant.
func TestUnitAcquireWithoutWaitOutlastsTheTimeout(t *testing.T) {
	var mu sync.Mutex
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		time.Sleep(300 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"lock":"x","token":"t","fence":7,"ttl_ms":30000,"expires_at_ms":%d}`, time.Now().UnixMilli()+30000)
	}))
	defer srv.Close()
	c, _ := New(Config{URL: srv.URL, APIKey: NoKey, Timeout: 100 * time.Millisecond, Retry: RetryPolicy{Attempts: 1}})
	defer c.Close()
	l, err := c.Lock(context.Background(), "x", LeaseOptions{NoRenew: true})
	mu.Lock()
	defer mu.Unlock()
	if err != nil || l.Fence != 7 {
		t.Fatalf("an acquire without a wait, answered after 300 ms: %v", err)
	}
	if _, named := bodies[0]["wait_ms"]; len(bodies) != 1 || named {
		t.Fatalf("sent %d times, the first body %v: expected once, without wait_ms", len(bodies), bodies[0])
	}
	mu.Unlock()
	// TryOnce sends wait_ms 0, and then the plain timeout applies. The try that got no answer may have been
	// granted, so the acquire asks for it once more under its request_id to give it back (no answer to that
	// either, here), before it fails.
	_, err = c.Lock(context.Background(), "x", LeaseOptions{NoRenew: true, Wait: TryOnce})
	var unreachable *UnreachableError
	mu.Lock()
	if !errors.As(err, &unreachable) || len(bodies) < 2 || bodies[1]["wait_ms"] != float64(0) {
		t.Fatalf("a TryOnce acquire answered after 300 ms: %v, sent %v", err, bodies)
	}
	for _, body := range bodies[2:] {
		if body["request_id"] != bodies[1]["request_id"] || body["wait_ms"] != float64(0) {
			t.Fatalf("the give-back of the TryOnce acquire: sent %v", bodies)
		}
	}
}

// writeGateway answers an acquire with a lease (fence 7), and the tries of a PATCH of row key with
// answers[key][try]: "drop" closes the connection without a reply (as after a commit whose reply was
// lost), else a status and problem code ("200" applies it).
func writeGateway(t *testing.T, answers map[string][]string) *Client {
	var mu sync.Mutex
	tries := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/acquire") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"lock":"x","token":"t","fence":7,"ttl_ms":30000,"expires_at_ms":%d}`, time.Now().UnixMilli()+30000)
			return
		}
		key := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		mu.Lock()
		answer := answers[key][tries[key]]
		tries[key]++
		mu.Unlock()
		var status int
		var code string
		if answer != "drop" {
			_, _ = fmt.Sscan(answer, &status, &code)
		}
		switch {
		case answer == "drop":
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
		case status == http.StatusOK:
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"applied":true,"resource":"pg:t/%s","fence":7,"row":{"id":"%s"}}`, key, key)
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(status)
			_, _ = fmt.Fprintf(w, `{"type":"/problems/%s","status":%d,"presented_fence":7,"current_fence":9,"reason":"revoked"}`,
				code, status)
		}
	}))
	t.Cleanup(srv.Close)
	c, _ := New(Config{URL: srv.URL, APIKey: NoKey, Retry: RetryPolicy{Attempts: 3, Backoff: time.Millisecond}})
	t.Cleanup(c.Close)
	return c
}

// TestUnitWriteRefusedAfterALostReplyHasAnUnknownOutcome: a PATCH whose first try got no reply may have
// been applied; a refusal of its retry (a newer fence wrote meanwhile, or the lease was revoked) speaks for
// the retry alone. The client must say the outcome is unknown (an *UnreachableError with Sent true is in
// the error) instead of a plain refusal, which promises that nothing changed; a lease still hears the 410.
// A refusal of a write's only try, or of a retry after tries that were certainly not applied, stays a
// refusal. Broken variant caught: the retry's 409 was returned as a *StaleFenceError.
func TestUnitWriteRefusedAfterALostReplyHasAnUnknownOutcome(t *testing.T) {
	c := writeGateway(t, map[string][]string{"stale": {"drop", "409 stale_fence"}, "applied": {"drop", "200"},
		"plain": {"409 stale_fence"}, "revoked": {"drop", "410 lease_lost"}, "busy": {"503 backend_unavailable", "409 stale_fence"}})
	ctx := context.Background()
	var stale *StaleFenceError
	var unreachable *UnreachableError
	_, err := c.PG("t", "t").Patch(ctx, "stale", map[string]any{"a": 1})
	if errors.As(err, &stale) || !errors.As(err, &unreachable) || !unreachable.Sent || !strings.Contains(err.Error(), "outcome unknown") {
		t.Fatalf("a PATCH refused stale_fence after a lost reply: %T %v; expected its outcome unknown", err, err)
	}
	var unknown *OutcomeUnknownError
	if !errors.As(err, &unknown) || !errors.As(unknown.Last, &stale) || stale.CurrentFence != 9 {
		t.Fatalf("the unknown outcome does not carry the retry's refusal: %#v", err)
	}
	if res, err := c.PG("t", "t").Patch(ctx, "applied", map[string]any{"a": 1}); err != nil || !res.Applied {
		t.Fatalf("a PATCH applied by its retry: %v", err)
	}
	if _, err := c.PG("t", "t").Patch(ctx, "plain", map[string]any{"a": 1}); !errors.As(err, &stale) || stale.CurrentFence != 9 {
		t.Fatalf("a PATCH refused at its only try: %v", err)
	}
	_, err = c.PG("t", "t").Patch(ctx, "busy", map[string]any{"a": 1})
	if errors.As(err, &stale) || !strings.Contains(err.Error(), "outcome unknown") {
		t.Fatalf("a PATCH refused stale_fence after a 503 (the gateway's own commit may have been lost): %T %v", err, err)
	}
	l, err := c.Lock(ctx, "x", LeaseOptions{NoRenew: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.PG("t").Patch(ctx, "revoked", map[string]any{"a": 1})
	if !errors.As(err, &unreachable) || !strings.Contains(err.Error(), "outcome unknown") || l.Reason() != "revoked" {
		t.Fatalf("a lease's PATCH refused 410 after a lost reply: %T %v; lease lost for %q", err, err, l.Reason())
	}
}

// TestUnitWatchAnswered429GoesOn: a watch poll answered 429 too_many_waiters (the key's quota of parked
// waits and watches is full) is polled again after Retry-After; the next poll reports the revoke. Broken
// variant caught: the keeper stopped watching at the 429, as for a gateway without the watch endpoint, and
// the revoke went unnoticed until a renewal.
func TestUnitWatchAnswered429GoesOn(t *testing.T) {
	var mu sync.Mutex
	var polls []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "GET" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"lock":"x","token":"t","fence":7,"ttl_ms":30000,"expires_at_ms":%d,"released":true}`,
				time.Now().UnixMilli()+30000)
			return
		}
		mu.Lock()
		polls = append(polls, time.Now())
		first := len(polls) == 1
		mu.Unlock()
		if first {
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"type":"/problems/too_many_waiters","status":429,"detail":"limits.max_waiters_per_key"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"lock":"x","fence":7,"held":false,"reason":"revoked"}`))
	}))
	defer srv.Close()
	c, _ := New(Config{URL: srv.URL, APIKey: NoKey})
	defer c.Close()
	l, err := c.Lock(context.Background(), "x", LeaseOptions{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(context.Background()) }()
	select {
	case <-l.Lost():
	case <-time.After(3 * time.Second):
		t.Fatal("the revoke answered to the poll after a 429 was not reported: the watch stopped at the 429")
	}
	mu.Lock()
	defer mu.Unlock()
	if l.Reason() != "revoked" || len(polls) != 2 || polls[1].Sub(polls[0]) < 900*time.Millisecond {
		t.Fatalf("reason %q after %d polls (%v); expected revoked at the second poll, a Retry-After later", l.Reason(),
			len(polls), polls)
	}
	// Without Retry-After, the pause doubles from a second up to a watch poll's length.
	for failures, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 5: 16 * time.Second, 6: watchWait, 40: watchWait} {
		if got := watchPause(failures, 0); got != want {
			t.Errorf("watchPause(%d, 0) = %v, want %v", failures, got, want)
		}
	}
	if got := watchPause(3, 5*time.Second); got != 5*time.Second {
		t.Errorf("watchPause with Retry-After 5 s = %v", got)
	}
}

// TestUnitReleaseAnswered503IsSentAgain: the first release of a lease is answered 503 (no retry here), so
// the lease may still be held. From that call on nothing renews it and a write through it fails without
// being sent; the next Release sends the release again and succeeds, and one after that sends nothing.
// Broken variant caught: the lease was marked released before the release was sent, so the second Release
// returned nil without sending anything (1 release arrived, not 2) and the lock stayed held for its TTL.
func TestUnitReleaseAnswered503IsSentAgain(t *testing.T) {
	var mu sync.Mutex
	counts := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		what := r.Method + " " + r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		mu.Lock()
		counts[what]++
		n := counts[what]
		mu.Unlock()
		switch {
		case what == "POST release" && n == 1:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"type":"/problems/backend_unavailable","status":503}`))
		case what == "POST release":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"released":true}`))
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"lock":"x","token":"t","fence":7,"ttl_ms":300,"expires_at_ms":%d}`,
				time.Now().UnixMilli()+300)
		}
	}))
	defer srv.Close()
	count := func(what string) int {
		mu.Lock()
		defer mu.Unlock()
		return counts[what]
	}
	c, _ := New(Config{URL: srv.URL, APIKey: NoKey, Retry: RetryPolicy{Attempts: 1}})
	defer c.Close()
	ctx := context.Background()
	l, err := c.Lock(ctx, "x", LeaseOptions{TTL: 300 * time.Millisecond, NoWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	var unavailable *BackendUnavailableError
	if err := l.Release(ctx); !errors.As(err, &unavailable) {
		t.Fatalf("the release answered 503: %v", err)
	}
	renewals := count("POST renew")
	time.Sleep(250 * time.Millisecond) // over two renewal periods of a 300 ms lease
	var lost *LeaseLostError
	if _, err := l.Redis().Put(ctx, "app:x", "v"); !errors.As(err, &lost) || count("PUT x") != 0 {
		t.Fatalf("a write after the failed release: %v (%d sent)", err, count("PUT x"))
	}
	if count("POST renew") != renewals {
		t.Fatalf("the lease was renewed %d times after the release was asked for", count("POST renew")-renewals)
	}
	if err := l.Release(ctx); err != nil || count("POST release") != 2 {
		t.Fatalf("the second release: %v, %d releases sent; expected nil and 2", err, count("POST release"))
	}
	if err := l.Release(ctx); err != nil || count("POST release") != 2 {
		t.Fatalf("a release after the gateway answered one: %v, %d releases sent; expected nil and 2", err,
			count("POST release"))
	}
}

// TestUnitTextThatIsNotUTF8IsRefusedUnsent: encoding/json writes each byte of a string that is not UTF-8 as
// U+FFFD, so a value, a field name, a row or an owner holding such bytes would be stored changed. The client
// refuses the call instead, as the gateway refuses such a body (400), and sends nothing; a genuine U+FFFD
// and bytes in a []byte (base64 in JSON) go out as they are. Broken variant caught: Put of "hello \xff\xfe"
// stored "hello \ufffd\ufffd" and answered applied.
func TestUnitTextThatIsNotUTF8IsRefusedUnsent(t *testing.T) {
	var bodies []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(body))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"applied":true,"lock":"x","token":"t","fence":7,"ttl_ms":30000,"expires_at_ms":1}`))
	}))
	t.Cleanup(srv.Close)
	c, _ := New(Config{URL: srv.URL, APIKey: NoKey})
	ctx := context.Background()
	bad := "hello \xff\xfe"
	type label string
	type inner struct{ Inner string }
	type note struct {
		Text   label
		hidden string
		inner
	}
	rows := map[string]map[string]any{
		"a value": {"a": bad}, "a column name": {bad: 1}, "a list item": {"a": []any{1, bad}},
		"a struct field": {"a": &note{Text: label(bad)}}, "an embedded struct's field": {"a": note{inner: inner{bad}}},
		"a map of strings": {"a": map[string]string{"k": bad}},
	}
	calls := map[string]func() error{
		"redis put":   func() error { _, err := c.Redis("t").Put(ctx, "app:x", bad); return err },
		"redis patch": func() error { _, err := c.Redis("t").Patch(ctx, "app:x", map[string]any{"f": bad}); return err },
		"pg batch": func() error {
			_, err := c.PG("t", "t").Batch(ctx, []BatchOp{{Op: "put", Key: "1", Row: map[string]any{"a": "ok"}},
				{Op: "patch", Key: bad, Set: map[string]any{"a": 1}}})
			return err
		},
		"lock owner": func() error { _, err := c.Lock(ctx, "x", LeaseOptions{Owner: bad, NoRenew: true}); return err },
	}
	for what, row := range rows {
		row := row
		calls["pg put of "+what] = func() error { _, err := c.PG("t", "t").Put(ctx, "1", row); return err }
		calls["pg patch of "+what] = func() error { _, err := c.PG("t", "t").Patch(ctx, "1", row); return err }
		calls["pg insert of "+what] = func() error { _, err := c.PG("t", "t").Insert(ctx, row); return err }
	}
	for what, call := range calls {
		err := call()
		var invalid *InvalidJSONError
		if !errors.As(err, &invalid) || invalid.Status != 0 || !strings.Contains(err.Error(), "not UTF-8") {
			t.Errorf("%s: %v", what, err)
		}
	}
	if len(bodies) != 0 {
		t.Fatalf("sent: %q", bodies)
	}
	good := map[string]any{"text": "\uFFFD", "bytes": []byte{0xff}, "note": note{Text: "ok", hidden: bad}}
	want := `{"row":{"bytes":"/w==","note":{"Text":"ok","Inner":""},"text":"` + "\uFFFD" + `"}}`
	if _, err := c.PG("t", "t").Put(ctx, "1", good); err != nil || len(bodies) != 1 || bodies[0] != want {
		t.Fatalf("a row of UTF-8 text and bytes: %v, sent %q", err, bodies)
	}
}

// TestUnitRedirectIsAnError: a 3xx answer, which the gateway never gives, is a *RedirectError naming the
// status, and the client does not follow it: neither a fenced PATCH (with its Fence-Token) nor a read
// reaches the Location. Failed before the fix: the client followed the 301 as a GET to the other server,
// which got the Fence-Token, and the PATCH returned no error (Applied false).
func TestUnitRedirectIsAnError(t *testing.T) {
	var reached int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt32(&reached, 1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer elsewhere.Close()
	var tries int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt32(&tries, 1)
		status := http.StatusMovedPermanently
		if r.Method == "GET" {
			status = http.StatusFound
		}
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, status)
	}))
	defer srv.Close()
	c, _ := New(Config{URL: srv.URL, APIKey: NoKey, Retry: RetryPolicy{Attempts: 3, Backoff: time.Millisecond}})
	defer c.Close()
	ctx := context.Background()
	var redirect *RedirectError
	_, err := c.PG("invoices", "token").Patch(ctx, "1", map[string]any{"status": "paid"})
	if !errors.As(err, &redirect) || redirect.Status != http.StatusMovedPermanently || Code(err) != "http_301" ||
		redirect.Location != elsewhere.URL+"/v1/pg/invoices/1" {
		t.Fatalf("a PATCH answered 301: %#v", err)
	}
	if _, err := c.LockStatus(ctx, "x"); !errors.As(err, &redirect) || redirect.Status != http.StatusFound {
		t.Fatalf("a read answered 302: %#v", err)
	}
	if atomic.LoadInt32(&reached) != 0 || atomic.LoadInt32(&tries) != 2 {
		t.Fatalf("the Location got %d requests and the gateway %d: expected 0 and 2 (no retry)",
			atomic.LoadInt32(&reached), atomic.LoadInt32(&tries))
	}
}

// TestUnitTLSRefusalIsNotSentNorRetried: a certificate that fails verification ends the call before the
// request is written: an *UnreachableError with Sent false, and no second handshake, for an unknown CA and
// for a certificate of another host name, on a read (which is retried after other failures). Failed
// before the fix: the unknown CA gave Sent true, and the host name mismatch was retried (3 handshakes).
func TestUnitTLSRefusalIsNotSentNorRetried(t *testing.T) {
	var handshakes int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"semaphore":"s","limit":2,"holders":1,"waiting":0}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			atomic.AddInt32(&handshakes, 1)
		}
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	retry := RetryPolicy{Attempts: 3, Backoff: time.Millisecond}
	// The test certificate names 127.0.0.1 and example.com, not localhost.
	otherName := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	for what, cfg := range map[string]Config{
		"an unknown CA":        {URL: srv.URL, APIKey: NoKey, Retry: retry},
		"another host name":    {URL: otherName, CAFile: ca, APIKey: NoKey, Retry: retry},
		"a trusted, good name": {URL: srv.URL, CAFile: ca, APIKey: NoKey, Retry: retry},
	} {
		atomic.StoreInt32(&handshakes, 0)
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.SemaphoreStatus(context.Background(), "s")
		c.Close()
		var unreachable *UnreachableError
		switch {
		case cfg.CAFile != "" && cfg.URL == srv.URL:
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		case !errors.As(err, &unreachable) || unreachable.Sent || atomic.LoadInt32(&handshakes) != 1:
			t.Errorf("%s: %v (Sent %v) after %d handshakes; expected Sent false after 1", what, err,
				unreachable != nil && unreachable.Sent, atomic.LoadInt32(&handshakes))
		}
	}
}

// TestUnitWriteAnswered5xxHasAnUnknownOutcome: a 503 or 500 answered to a write that is not retried (an
// insert, a delete, a batch with one) or to the last try of one that is may follow its commit (the backend
// failed to answer it), so the write fails with an *OutcomeUnknownError, in which errors.As finds an
// *UnreachableError with Sent true and the gateway's answer; a 4xx stays a refusal. Failed before the fix:
// a single 503 came back as a *BackendUnavailableError, a refusal that says nothing changed.
func TestUnitWriteAnswered5xxHasAnUnknownOutcome(t *testing.T) {
	c := writeGateway(t, map[string][]string{"t": {"503 backend_unavailable"}, "gone": {"500 internal"},
		"batch": {"503 backend_unavailable"}, "once": {"503 backend_unavailable"}, "missing": {"404 not_found"}})
	ctx := context.Background()
	once, _ := New(Config{URL: c.base, APIKey: NoKey, Retry: RetryPolicy{Attempts: 1}})
	defer once.Close()
	writes := map[string]func() error{
		"an insert": func() error { _, err := c.PG("t", "t").Insert(ctx, map[string]any{"id": "1"}); return err },
		"a delete":  func() error { _, err := c.PG("t", "t").Delete(ctx, "gone"); return err },
		"a batch with an insert": func() error {
			_, err := c.PG("t", "t").Batch(ctx, []BatchOp{{Op: "post", Row: map[string]any{"id": "2"}}})
			return err
		},
		"a PATCH tried once": func() error { _, err := once.PG("t", "t").Patch(ctx, "once", map[string]any{"a": 1}); return err },
	}
	for what, write := range writes {
		err := write()
		var unknown *OutcomeUnknownError
		var unreachable *UnreachableError
		var p *Problem
		if !errors.As(err, &unknown) || !errors.As(err, &unreachable) || !unreachable.Sent || !errors.As(err, &p) ||
			p.Status < 500 || !strings.Contains(err.Error(), "outcome unknown") {
			t.Errorf("%s answered %d: %T %v; expected its outcome unknown", what, statusOf(err), err, err)
		}
	}
	var notFound *NotFoundError
	if _, err := c.PG("t", "t").Delete(ctx, "missing"); !errors.As(err, &notFound) {
		t.Errorf("a delete answered 404: %T %v; expected the refusal", err, err)
	}
}

// TestUnitRevokeAnswered5xxHasAnUnknownOutcome: a revoke answered 503 may have been recorded before the
// gateway's backend failed to answer, so it fails with an *OutcomeUnknownError holding the 503 (an
// *UnreachableError with Sent true): a lock's revoke after its one try, a semaphore's (it names the fence it
// ends, so a repeat ends nobody else) after the policy's three, each answered 503; a 403 stays a refusal.
// Failed before the fixes: the 503 came back as a *BackendUnavailableError, a refusal that says the lease
// was not revoked (a semaphore's still did once a lock's was fixed).
func TestUnitRevokeAnswered5xxHasAnUnknownOutcome(t *testing.T) {
	ctx := context.Background()
	revokes := []struct {
		what   string
		tries  int
		revoke func(c *Client) error
	}{
		{what: "a lock's revoke", tries: 1,
			revoke: func(c *Client) error { _, err := c.RevokeLock(ctx, "invoice:42", "test"); return err }},
		{what: "a semaphore's revoke", tries: 3,
			revoke: func(c *Client) error { _, err := c.RevokeSemaphore(ctx, "exporters", 7, "test"); return err }},
	}
	for _, r := range revokes {
		answers := make([]string, r.tries, r.tries+1)
		for i := range answers {
			answers[i] = "503 backend_unavailable"
		}
		c := writeGateway(t, map[string][]string{"revoke": append(answers, "403 forbidden")})
		err := r.revoke(c)
		var unknown *OutcomeUnknownError
		var unreachable *UnreachableError
		var p *Problem
		if !errors.As(err, &unknown) || !errors.As(err, &unreachable) || !unreachable.Sent || !errors.As(err, &p) ||
			p.Status != http.StatusServiceUnavailable {
			t.Errorf("%s answered 503: %T %v; expected its outcome unknown", r.what, err, err)
		}
		var forbidden *ForbiddenError
		if err := r.revoke(c); !errors.As(err, &forbidden) {
			t.Errorf("the next of %s, after %d tries, answered 403: %T %v; expected the refusal", r.what, r.tries,
				err, err)
		}
	}
}

func statusOf(err error) int {
	var p *Problem
	if errors.As(err, &p) {
		return p.Status
	}
	return 0
}

// TestUnitWriteEndedByItsContextKeepsAnUnknownOutcome: a write whose context ends after a try that may
// have been applied says so. A PUT answered 503 (Retry-After 1) and cancelled during the pause fails with
// an *OutcomeUnknownError whose Last is context.Canceled (errors.Is finds it); a PUT whose context ends
// while its reply is awaited fails with an *UnreachableError with Sent true (errors.Is finds
// context.DeadlineExceeded). Failed before the fix: both returned the bare context error, which reads as
// nothing sent.
func TestUnitWriteEndedByItsContextKeepsAnUnknownOutcome(t *testing.T) {
	answered := make(chan struct{}, 10)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/slow") {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"type":"/problems/backend_unavailable","status":503}`))
		answered <- struct{}{}
	}))
	defer srv.Close()
	defer close(release)
	c, _ := New(Config{URL: srv.URL, APIKey: NoKey})
	defer c.Close()

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-answered
		time.Sleep(100 * time.Millisecond) // within the second Retry-After asks for
		cancel()
	}()
	_, err := c.Redis("t").Put(ctx, "app:x", "v")
	var unknown *OutcomeUnknownError
	var unreachable *UnreachableError
	var unavailable *BackendUnavailableError
	if !errors.As(err, &unknown) || !errors.Is(err, context.Canceled) || !errors.As(unknown.Earlier, &unavailable) ||
		!errors.As(err, &unreachable) || !unreachable.Sent {
		t.Errorf("a PUT answered 503 and cancelled before its retry: %T %v; expected its outcome unknown", err, err)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = c.Redis("t").Put(ctx, "app:slow", "v")
	if !errors.As(err, &unreachable) || !unreachable.Sent || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a PUT whose context ended while its reply was awaited: %T %v; expected Sent true", err, err)
	}
}

// TestUnitFailedFreshRenewalCountsFromTheAcquire: an acquire answered after 1.5 s of a 3 s TTL is renewed
// at once, and that renewal gets a 503. The gateway granted no more than the acquire's TTL, counted from
// when the acquire was sent, so by then (the answer's arrival, less the 1.5 s it took, plus the TTL) Check
// must fail; no timing of this machine can make it pass. Failed before the fix: validity was counted from
// the failed renewal's sending, and Check passed for another 1.5 s, while another holder could have the
// lock.
func TestUnitFailedFreshRenewalCountsFromTheAcquire(t *testing.T) {
	const delay, ttl = 1500 * time.Millisecond, 3 * time.Second
	c, count := fakeLockGateway(t, delay, ttl, http.StatusServiceUnavailable,
		`{"type":"/problems/backend_unavailable","status":503}`, `{"lock":"x","held":true,"fence":7}`)
	l, err := c.Lock(context.Background(), "x", LeaseOptions{TTL: ttl, NoWatch: true})
	answered := time.Now() // the acquire was sent at least delay earlier
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(context.Background()) }()
	if count("renew") < 1 {
		t.Fatal("the slow acquire was not renewed at once")
	}
	time.Sleep(time.Until(answered.Add(ttl - delay + 100*time.Millisecond)))
	var lost *LeaseLostError
	if err := l.Check(); !errors.As(err, &lost) || lost.Reason != "unrenewed" {
		t.Fatalf("%v after the acquire's answer, past its TTL with no renewal answered: %v; expected the lease lost (unrenewed)",
			time.Since(answered), err)
	}
}

// TestUnitA2xxThatIsNotTheGatewaysIsNoAnswer puts a web server that answers every request 200 with an HTML
// page (a single-page app's fallback at a wrong URL, a captive portal) where the gateway should be: no
// acquire, write or read takes the page for the gateway's answer. It is no answer, as a lost reply: an
// *UnreachableError with Sent true, retried as the effect allows, and an acquire gives back what it may have
// been granted. A 204 only answers a call that asked for Prefer: return=minimal, and a JSON object is no
// grant without a token and a fence, nor a write's success without "applied": true. Broken variant caught: the
// acquire failed with a *json.SyntaxError and gave nothing back, and a 204 to an acquire made a lease with
// no token and no fence.
func TestUnitA2xxThatIsNotTheGatewaysIsNoAnswer(t *testing.T) {
	var acquires, giveBacks int32
	status := int32(http.StatusOK)
	jsonService := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		if strings.HasSuffix(r.URL.Path, "/acquire") {
			if body["wait_ms"] == float64(0) {
				atomic.AddInt32(&giveBacks, 1)
			} else {
				atomic.AddInt32(&acquires, 1)
			}
		}
		if atomic.LoadInt32(&status) == http.StatusNoContent {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if jsonService {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"status": "ok"}`)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<!doctype html><html><body>app</body></html>")
	}))
	defer srv.Close()
	c, _ := New(Config{URL: srv.URL, APIKey: NoKey, Retry: RetryPolicy{Attempts: 2, Backoff: time.Millisecond}})
	ctx := context.Background()
	var unreachable *UnreachableError
	l, err := c.Lock(ctx, "page", LeaseOptions{TTL: 3 * time.Second, Wait: time.Second})
	if l != nil || !errors.As(err, &unreachable) || !unreachable.Sent {
		t.Fatalf("an acquire answered a page: %+v, %T %v", l, err, err)
	}
	if atomic.LoadInt32(&acquires) != 2 || atomic.LoadInt32(&giveBacks) != 1 {
		t.Fatalf("an acquire answered a page: %d tries and %d give-backs, expected 2 and 1",
			atomic.LoadInt32(&acquires), atomic.LoadInt32(&giveBacks))
	}
	res, err := c.PG("invoices", "token").Patch(ctx, "1", map[string]any{"status": "paid"})
	if res != nil || !errors.As(err, &unreachable) || !unreachable.Sent {
		t.Fatalf("a write answered a page: %+v, %T %v", res, err, err)
	}
	if _, err := c.LockStatus(ctx, "page"); !errors.As(err, &unreachable) {
		t.Fatalf("a status answered a page: %T %v", err, err)
	}
	atomic.StoreInt32(&status, http.StatusNoContent)
	if l, err := c.Lock(ctx, "page", LeaseOptions{NoRenew: true, Wait: TryOnce}); l != nil || !errors.As(err, &unreachable) {
		t.Fatalf("an acquire answered 204: %+v, %T %v", l, err, err)
	}
	if res, err := c.PG("invoices", "token").ReturnMinimal().Patch(ctx, "1", map[string]any{"a": 1}); err != nil || !res.Minimal {
		t.Fatalf("a minimal write answered 204: %+v %v", res, err)
	}
	// Another JSON service at the gateway's URL, answering {"status": "ok"} to everything: no lease, no
	// write applied. Broken variant caught: a lease with an empty token and fence 0, and a write that
	// answered a result with Applied false and no error.
	atomic.StoreInt32(&status, http.StatusOK)
	jsonService = true
	if l, err := c.Lock(ctx, "json", LeaseOptions{NoRenew: true, Wait: TryOnce}); l != nil || !errors.As(err, &unreachable) || !unreachable.Sent {
		t.Fatalf("an acquire answered a JSON object that is no grant: %+v, %T %v", l, err, err)
	}
	if s, err := c.LockSet(ctx, []string{"a", "b"}, LeaseOptions{NoRenew: true, Wait: TryOnce}); s != nil || !errors.As(err, &unreachable) {
		t.Fatalf("a lock set answered a JSON object that is no grant: %+v, %T %v", s, err, err)
	}
	if res, err := c.PG("invoices", "token").Patch(ctx, "1", map[string]any{"a": 1}); res != nil || !errors.As(err, &unreachable) || !unreachable.Sent {
		t.Fatalf("a write answered a JSON object that does not say applied: %+v, %T %v", res, err, err)
	}
}

// TestUnitAHugeRetryAfterEndsTheRetries answers 503 with a Retry-After longer than any budget: the call is
// not tried again. Broken variant caught: a delay past what a time.Duration holds ("99999999999", "1e400")
// wrapped to a negative duration or failed to parse, was read as no Retry-After at all, and the call was
// retried at once with the backoff, against a backend that had asked to be left alone.
func TestUnitAHugeRetryAfterEndsTheRetries(t *testing.T) {
	for _, value := range []string{"99999999999", "1e400", "3600"} {
		var tries int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			atomic.AddInt32(&tries, 1)
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", value)
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"type": "/problems/backend_unavailable", "status": 503}`)
		}))
		c, _ := New(Config{URL: srv.URL, APIKey: NoKey, Retry: RetryPolicy{Attempts: 5, Budget: time.Minute, Backoff: time.Millisecond}})
		_, err := c.LockStatus(context.Background(), "x")
		var busy *BackendUnavailableError
		if !errors.As(err, &busy) || busy.RetryAfter < time.Hour || atomic.LoadInt32(&tries) != 1 {
			t.Errorf("Retry-After %s: %v (RetryAfter %v) after %d tries, expected one", value, err, busy, atomic.LoadInt32(&tries))
		}
		srv.Close()
	}
	for value, want := range map[string]time.Duration{"1": time.Second, "0.5": 500 * time.Millisecond, "-1": 0, "NaN": 0, "x": 0} {
		if got := parseRetryAfter(value); got != want {
			t.Errorf("Retry-After %q read as %v, expected %v", value, got, want)
		}
	}
}
