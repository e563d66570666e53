// SPDX-License-Identifier: Apache-2.0

// transport.go owns the client's side of HTTP: the one connection pool, bearer keys, the CA file for
// HTTPS, timeouts, JSON in and out, the conversion of error answers into typed errors, and the one rule of
// retries. It must not know what a route means beyond the Effect its caller declares.
//
// A call is sent again only if sending it twice cannot do more than sending it once. Read and Idempotent
// calls are retried after a connection error and after a 503, waiting as Retry-After says (else an
// exponential backoff with jitter), within the RetryPolicy. Acquires are Idempotent because they always carry
// a request_id that the gateway answers a repeat of with the same lease. Once calls (inserts, deletes,
// batches with them, revoking a lock) are sent again only when the request certainly never left (the
// connection could not be opened).
//
// Every 2xx of the gateway is a JSON object, but for its 204 to Prefer: return=minimal. A 2xx that is not
// comes from something else at the gateway's address (a web server at a wrong URL, a proxy's own page) and
// says nothing of the call: it is no answer, as a lost reply is (an *UnreachableError with Sent true, retried
// as the call's effect allows), never a result.
//
// A fenced write sent again after a try that may have been applied (it got no answer, or a 5xx: the
// gateway's own commit may have been lost) is answered for the retry alone: the gateway takes a fence equal
// to the stored one, so a retry of an applied write is applied again, but a refusal (a newer fence wrote, the
// lease was revoked meanwhile) does not say that the earlier try changed nothing. Such a write fails with an
// *OutcomeUnknownError, not with the refusal. So does a write whose last try got a 5xx, retried or not (an
// insert, a delete): a 503 is also the answer to a write whose backend failed to answer its commit.

package fencegate

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Version is the client's version, the gateway's.
const Version = "0.1.0"

const defaultURL = "http://127.0.0.1:8480"

// Effect says what sending a call twice would do.
type Effect int

const (
	// Read calls change nothing.
	Read Effect = iota
	// Idempotent calls leave the same state when repeated (renewals, releases, acquires with their request_id,
	// PUT and PATCH writes under the same fence).
	Idempotent
	// Once calls may do more when repeated (an insert, a delete, a revoke).
	Once
)

// RetryPolicy says how calls that may be repeated are retried.
type RetryPolicy struct {
	Attempts   int           // most tries of one call, the first included (default 5)
	Budget     time.Duration // most time spent waiting between tries of one call (default 15 s)
	Backoff    time.Duration // first pause when the gateway names none, doubled each time (default 50 ms)
	MaxBackoff time.Duration // largest such pause (default 2 s)
}

func (r RetryPolicy) withDefaults() RetryPolicy {
	if r.Attempts <= 0 {
		r.Attempts = 5
	}
	if r.Budget <= 0 {
		r.Budget = 15 * time.Second
	}
	if r.Backoff <= 0 {
		r.Backoff = 50 * time.Millisecond
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = 2 * time.Second
	}
	return r
}

// pause is the wait before try attempt+1: Retry-After when the gateway said it, else backoff with jitter.
func (r RetryPolicy) pause(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return retryAfter
	}
	ceiling := r.Backoff << (attempt - 1)
	if ceiling > r.MaxBackoff || ceiling <= 0 {
		ceiling = r.MaxBackoff
	}
	return ceiling/2 + time.Duration(rand.Int63n(int64(ceiling/2)+1))
}

// Config configures a Client. Every field is optional.
type Config struct {
	URL     string        // http://host:port or https://host:port (default $FENCEGATE_URL, else http://127.0.0.1:8480); user:password@ in it is dropped
	APIKey  string        // bearer key (default $FENCEGATE_KEY); NoKey sends none
	CAFile  string        // PEM file of the CA that signed the gateway's certificate (default $FENCEGATE_CACERT, else the system's)
	Timeout time.Duration // to connect and to wait for an answer, on top of any wait the call asks for (default 10 s); an acquire without a wait allows for the gateway's longest default wait, an hour
	Retry   RetryPolicy   // how calls that may be repeated are retried
	Owner   string        // default owner of leases and Fence-Owner of writes, shown in status and audit records
}

// NoKey as Config.APIKey sends no key even when $FENCEGATE_KEY is set.
const NoKey = "-"

// Client talks to one gateway through one connection pool; safe for concurrent use. Close it when done.
type Client struct {
	base    string
	key     string
	timeout time.Duration
	retry   RetryPolicy
	owner   string
	http    *http.Client
}

// New makes a client from cfg (see Config for the defaults).
func New(cfg Config) (*Client, error) {
	base := firstOf(cfg.URL, os.Getenv("FENCEGATE_URL"), defaultURL)
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("fencegate: the gateway URL must be http://host[:port] or https://host[:port], not %q",
			withoutCredentials(base))
	}
	// Credentials in the URL are never sent (net/http would send them as Basic auth) nor shown in an
	// error: the key goes in APIKey.
	u.User = nil
	base = u.String()
	key := firstOf(cfg.APIKey, os.Getenv("FENCEGATE_KEY"))
	if key == NoKey {
		key = ""
	}
	transport := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	if caFile := firstOf(cfg.CAFile, os.Getenv("FENCEGATE_CACERT")); caFile != "" && u.Scheme == "https" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("fencegate: reading the CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("fencegate: no PEM certificate in %s", caFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	// The gateway never redirects: a 3xx comes from something else on the way, and following it would send a
	// fenced write elsewhere as a GET, its Fence-Token with it. It is an error of its own (see try).
	noRedirects := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{base: strings.TrimRight(base, "/"), key: key, timeout: timeout, retry: cfg.Retry.withDefaults(),
		owner: cfg.Owner, http: &http.Client{Transport: transport, CheckRedirect: noRedirects}}, nil
}

// Close closes the idle connections of the pool (leases still held keep renewing until released).
func (c *Client) Close() {
	c.http.CloseIdleConnections()
}

// withoutCredentials is the URL text raw as an error may show it: what comes before the last '@' after its
// scheme (user:password), "***" in its place. Read as text, not parsed, so that a URL url.Parse refuses is
// cut too; a '@' later in the URL only hides more of it.
func withoutCredentials(raw string) string {
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 {
		start = i + len("://")
	}
	at := strings.LastIndex(raw[start:], "@")
	if at < 0 {
		return raw
	}
	return raw[:start] + "***" + raw[start+at:]
}

func firstOf(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// request is one call: its route, body and headers, what repeating it does, and how long the gateway may
// hold it before answering (an acquire's wait, a watch).
type request struct {
	method  string
	path    string      // percent-encoded
	query   url.Values  // nil for none
	body    func() any  // called before each try (an acquire sends what is left of its wait); nil for none
	headers http.Header // extra headers
	effect  Effect
	wait    time.Duration   // added to the timeout
	timeout time.Duration   // replaces the client's timeout when > 0
	retry   *RetryPolicy    // replaces the client's policy when set
	write   bool            // a fenced write, or a revoke: a try that may have been applied leaves the outcome unknown
	check   func() error    // called before each try: its error (the lease is lost) ends the call, that try unsent
	lost    <-chan struct{} // closed when the lease is lost: it cuts a pause between tries short
	// unanswered, when set, is set to true once a try was sent and got no answer: it may have been served
	unanswered *bool
}

// answer is a successful answer: the status and the raw JSON body (nil when empty).
type answer struct {
	status int
	body   []byte
}

func (a *answer) decode(into any) error {
	if len(a.body) == 0 {
		return nil
	}
	return json.Unmarshal(a.body, into)
}

var noRetry = RetryPolicy{Attempts: 1, Budget: time.Nanosecond, Backoff: time.Millisecond, MaxBackoff: time.Millisecond}

// call sends r, retrying as its effect and the policy allow; the error is a typed problem error, an
// *UnreachableError, an *OutcomeUnknownError (writes), or the context's error when ctx ended.
func (c *Client) call(ctx context.Context, r request) (*answer, error) {
	policy := c.retry
	if r.retry != nil {
		policy = *r.retry
	}
	var waited time.Duration
	var earlier error // the failure of the first try of a write that may have been applied
	for attempt := 1; ; attempt++ {
		if r.check != nil {
			if err := r.check(); err != nil {
				return nil, outcome(r, earlier, err)
			}
		}
		a, err, again, retryAfter := c.try(ctx, r)
		if err == nil {
			return a, nil
		}
		if r.write && earlier == nil && mayHaveApplied(err) {
			earlier = err
		}
		var unreachable *UnreachableError
		if r.unanswered != nil && errors.As(err, &unreachable) && unreachable.Sent {
			*r.unanswered = true
		}
		if ctx.Err() != nil {
			return nil, ended(ctx, r, earlier, err)
		}
		pause := policy.pause(attempt, retryAfter)
		if !again || attempt >= policy.Attempts || waited+pause > policy.Budget {
			return nil, outcome(r, earlier, err)
		}
		select {
		case <-time.After(pause):
		case <-r.lost:
		case <-ctx.Done():
			return nil, ended(ctx, r, earlier, nil)
		}
		waited += pause
	}
}

// ended is the error of a call whose ctx ended, its last try failed with err (nil: ctx ended between
// tries): ctx's error, but not for a write that may have been applied. The try in flight as ctx ended, if
// it was sent, is an *UnreachableError with Sent true (caused by ctx's error); after an earlier try that
// may have been applied, the write fails with an *OutcomeUnknownError whose Last is ctx's error.
func ended(ctx context.Context, r request, earlier, err error) error {
	if !r.write {
		return ctx.Err()
	}
	var unreachable *UnreachableError
	if errors.As(err, &unreachable) && unreachable.Sent {
		return err
	}
	return outcome(r, earlier, ctx.Err())
}

// try sends r once; again says whether a retry may help and is allowed by r's effect.
func (c *Client) try(ctx context.Context, r request) (a *answer, err error, again bool, retryAfter time.Duration) {
	timeout := c.timeout
	if r.timeout > 0 {
		timeout = r.timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+r.wait)
	defer cancel()
	// The request is written only on a connection the transport got (opened, and through its TLS handshake
	// for HTTPS): until then, it certainly never left.
	var connected atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected.Store(true) }})
	target := c.base + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	var body io.Reader
	var data []byte
	if r.body != nil {
		payload := r.body()
		if err = checkText(payload); err != nil {
			return nil, err, false, 0
		}
		if data, err = json.Marshal(payload); err != nil {
			return nil, fmt.Errorf("fencegate: encoding the request: %w", err), false, 0
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return nil, fmt.Errorf("fencegate: %w", err), false, 0
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "fencegate-go/"+Version)
	if data != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	for name, values := range r.headers {
		req.Header[name] = values
	}
	op := r.method + " " + r.path
	resp, err := c.http.Do(req)
	if err != nil {
		sent := connected.Load()
		return nil, &UnreachableError{Op: op, Sent: sent, Err: err}, !handshakeRefused(err) && (!sent || r.effect != Once), 0
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, &UnreachableError{Op: op, Sent: true, Err: err}, r.effect != Once, 0
	}
	if resp.StatusCode < 300 {
		if !gatewaySuccess(resp, raw, r.headers.Get("Prefer") == "return=minimal") {
			// Something else at the gateway's address answered: no answer of the call, as a lost reply.
			return nil, &UnreachableError{Op: op, Sent: true, Err: fmt.Errorf("a %d whose body is not the gateway's "+
				"(Content-Type %q, %d bytes)", resp.StatusCode, resp.Header.Get("Content-Type"), len(raw))}, r.effect != Once, 0
		}
		return &answer{status: resp.StatusCode, body: raw}, nil, false, 0
	}
	if resp.StatusCode < 400 {
		return nil, redirected(op, resp), false, 0
	}
	retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"))
	p := &Problem{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id"), RetryAfter: retryAfter}
	if json.Unmarshal(raw, &p.Members) == nil {
		p.body = raw
		ptype, _ := p.Members["type"].(string)
		p.Code = strings.TrimPrefix(ptype, "/problems/")
		if p.Code == ptype {
			p.Code = ""
		}
		p.Title = p.text("title")
		p.Detail = p.text("detail")
	} else if len(raw) > 200 {
		p.Detail = string(raw[:200])
	} else {
		p.Detail = string(raw)
	}
	if p.Code == "" {
		p.Code = "http_" + strconv.Itoa(resp.StatusCode)
	}
	return nil, typedError(p), resp.StatusCode == http.StatusServiceUnavailable && r.effect != Once, retryAfter
}

// gatewaySuccess says whether a 2xx answer with body raw is one the gateway gives: a JSON object, or no body
// at all in a 204 to a call that asked for Prefer: return=minimal (minimal). Any other 2xx (an HTML page of a
// web server at a wrong URL or of a proxy, an empty 200) comes from something else and says nothing of the
// call.
func gatewaySuccess(resp *http.Response, raw []byte, minimal bool) bool {
	if resp.StatusCode == http.StatusNoContent {
		return minimal && len(raw) == 0
	}
	if !strings.Contains(resp.Header.Get("Content-Type"), "json") {
		return false
	}
	var object map[string]json.RawMessage
	return json.Unmarshal(raw, &object) == nil && object != nil
}

// redirected is the error of a 3xx answer to op, which the client does not follow.
func redirected(op string, resp *http.Response) error {
	location := resp.Header.Get("Location")
	return &RedirectError{Problem: &Problem{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode),
		RequestID: resp.Header.Get("X-Request-Id"),
		Detail: fmt.Sprintf("%s was answered %s (Location: %q), which the gateway never answers: something else on the "+
			"way answered it; the client follows no redirect", op, resp.Status, location)}, Location: location}
}

// mayHaveApplied says whether a try that failed with err may have taken effect: it was sent and got no
// answer, or a 5xx (the gateway answers 503 when its connection to a backend failed during the commit).
func mayHaveApplied(err error) bool {
	var unreachable *UnreachableError
	var p *Problem
	return errors.As(err, &unreachable) && unreachable.Sent || errors.As(err, &p) && p.Status >= 500
}

// outcome is the error of a call whose last try failed with err, after a try that may have been applied
// failed with earlier (nil: none did; err itself when it was the first such try, a 5xx): an
// *OutcomeUnknownError unless err already leaves the outcome unknown (no answer to a request that was
// sent).
func outcome(r request, earlier, err error) error {
	var unreachable *UnreachableError
	if earlier == nil || errors.As(err, &unreachable) && unreachable.Sent {
		return err
	}
	return &OutcomeUnknownError{Op: r.method + " " + r.path, Earlier: earlier, Last: err}
}

// handshakeRefused says whether err ended a TLS handshake for good: the gateway's certificate failed
// verification (an unknown CA, another host name, expired), the server does not speak TLS, or either side
// sent a TLS alert. Trying again would meet the same refusal; a handshake timeout is not one.
func handshakeRefused(err error) bool {
	var unknownAuthority x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	var roots x509.SystemRootsError
	var record tls.RecordHeaderError
	var op *net.OpError
	return errors.As(err, &unknownAuthority) || errors.As(err, &invalid) || errors.As(err, &hostname) ||
		errors.As(err, &roots) || errors.As(err, &record) ||
		errors.As(err, &op) && (op.Op == "remote error" || op.Op == "local error")
}

// parseRetryAfter reads the delay-seconds form of Retry-After (the gateway sends no dates). A delay past
// what a time.Duration holds (about 292 years, "1e400" included) is the longest one, which no retry budget
// waits out: converted as it is, it wrapped to a negative duration, read as no Retry-After at all.
func parseRetryAfter(value string) time.Duration {
	seconds, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
	if errors.Is(err, strconv.ErrRange) && seconds > 0 {
		return time.Duration(math.MaxInt64)
	}
	if err != nil || !(seconds >= 0) {
		return 0
	}
	if seconds >= float64(math.MaxInt64)/float64(time.Second) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(seconds * float64(time.Second))
}

// segment percent-encodes one path segment (a name, a table, a key): everything but unreserved characters.
func segment(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch >= 'A' && ch <= 'Z' || ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || strings.IndexByte("-._~", ch) >= 0 {
			b.WriteByte(ch)
		} else {
			fmt.Fprintf(&b, "%%%02X", ch)
		}
	}
	return b.String()
}

// jsonBody is a request body that is the same on every try.
func jsonBody(v any) func() any {
	return func() any { return v }
}
