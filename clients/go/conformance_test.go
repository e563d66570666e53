// SPDX-License-Identifier: Apache-2.0

// conformance_test.go is the Go client's runner of the conformance scenarios (clients/conformance/): it
// carries out each step through this package's API (Client.Lock, Lease.Renew, Lease.PG(...).Put, the typed
// errors and their fields) and compares what happened with the step's expectation. It must not speak HTTP
// to the gateway itself, only to the proxy's request log. Run by tests/conformance/driver.py, which sets
// FG_CONF_*; skipped without them.

package fencegate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

type confSpec struct {
	Settings struct {
		TimeoutMs     int64 `json:"timeout_ms"`
		RetryAttempts int   `json:"retry_attempts"`
		RetryBudgetMs int64 `json:"retry_budget_ms"`
	} `json:"settings"`
	Clients   map[string]map[string]string `json:"clients"`
	Scenarios []struct {
		Name  string           `json:"name"`
		Steps []map[string]any `json:"steps"`
	} `json:"scenarios"`
}

// confHeld is a lease of a scenario: a lock or semaphore lease, or a lock set.
type confHeld struct {
	lease *Lease
	set   *LockSet
}

func (h confHeld) fence() int64 {
	if h.lease != nil {
		return h.lease.Fence
	}
	return 0
}

func (h confHeld) lost() <-chan struct{} {
	if h.lease != nil {
		return h.lease.Lost()
	}
	return h.set.Lost()
}

func (h confHeld) reason() string {
	if h.lease != nil {
		return h.lease.Reason()
	}
	return h.set.Reason()
}

func (h confHeld) release(ctx context.Context) error {
	if h.lease != nil {
		return h.lease.Release(ctx)
	}
	return h.set.Release(ctx)
}

type confRunner struct {
	spec    *confSpec
	run     string
	clients map[string]*Client
	leases  map[string]confHeld
	pending map[string]chan error
}

func (r *confRunner) client(name string) *Client {
	if c, ok := r.clients[name]; ok {
		return c
	}
	spec := r.spec.Clients[name]
	key := NoKey
	if spec["key_env"] != "" {
		key = os.Getenv(spec["key_env"])
	} else if spec["key"] != "" {
		key = spec["key"]
	}
	c, err := New(Config{URL: os.Getenv(spec["url_env"]), APIKey: key,
		Timeout: time.Duration(r.spec.Settings.TimeoutMs) * time.Millisecond,
		Retry: RetryPolicy{Attempts: r.spec.Settings.RetryAttempts,
			Budget: time.Duration(r.spec.Settings.RetryBudgetMs) * time.Millisecond}})
	if err != nil {
		panic(err)
	}
	r.clients[name] = c
	return c
}

var confRef = regexp.MustCompile(`^\$(\w+)\.(\w+)$`)

// expand replaces {run} in strings and resolves "$lease.fence".
func (r *confRunner) expand(v any) any {
	switch x := v.(type) {
	case string:
		x = strings.ReplaceAll(x, "{run}", r.run)
		if m := confRef.FindStringSubmatch(x); m != nil {
			return float64(r.leases[m[1]].fence())
		}
		return x
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = r.expand(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = r.expand(e)
		}
		return out
	}
	return v
}

func (r *confRunner) str(step map[string]any, name string) string {
	s, _ := r.expand(step[name]).(string)
	return s
}

func num(step map[string]any, name string) int64 {
	f, _ := step[name].(float64)
	return int64(f)
}

// ms is the duration member name of step, its fraction of a millisecond kept: the client rounds it.
func ms(step map[string]any, name string) time.Duration {
	f, _ := step[name].(float64)
	return time.Duration(f * float64(time.Millisecond))
}

// normal turns a value into what encoding/json would decode it to, for comparisons.
func normal(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var out any
	_ = json.Unmarshal(data, &out)
	return out
}

func member(v any, path string) any {
	v = normal(v)
	for _, part := range strings.Split(path, ".") {
		m, _ := v.(map[string]any)
		v = m[part]
	}
	return v
}

// errorField reads a field of a refusal through the typed errors.
func errorField(err error, name string) any {
	var p *Problem
	errors.As(err, &p)
	var busy *LockBusyError
	var stale *StaleFenceError
	var forbidden *ForbiddenError
	var gone *LeaseLostError
	switch {
	case name == "status":
		return p.Status
	case name == "retry_after":
		return p.RetryAfter.Seconds()
	case name == "waiting" && errors.As(err, &busy):
		return busy.Waiting
	case name == "lock" && errors.As(err, &busy):
		return busy.Lock
	case name == "presented_fence" && errors.As(err, &stale):
		return stale.PresentedFence
	case name == "current_fence" && errors.As(err, &stale):
		return stale.CurrentFence
	case name == "resource" && errors.As(err, &stale):
		return stale.Resource
	case name == "scope" && errors.As(err, &forbidden):
		return forbidden.Scope
	case name == "reason" && errors.As(err, &gone):
		return gone.Reason
	}
	return p.Members[name]
}

func (r *confRunner) matches(want, got any) bool {
	if want == "$positive" {
		n, ok := normal(got).(float64)
		return ok && n > 0
	}
	return reflect.DeepEqual(normal(r.expand(want)), normal(got))
}

func (r *confRunner) checkFields(step map[string]any, read func(string) any, what string) error {
	fields, _ := step["fields"].(map[string]any)
	for name, want := range fields {
		if got := read(name); !r.matches(want, got) {
			return fmt.Errorf("%s: %s is %v, expected %v", what, name, normal(got), normal(r.expand(want)))
		}
	}
	return nil
}

// outcome runs call and checks its result or error against the step's expect, fields, min_ms, max_ms.
func (r *confRunner) outcome(step map[string]any, call func() (any, error)) error {
	expect, _ := step["expect"].(string)
	if expect == "" {
		expect = "ok"
	}
	started := time.Now()
	result, err := call()
	elapsed := time.Since(started)
	if expect == "ok" {
		if err != nil {
			return fmt.Errorf("expected success, got %v", err)
		}
		if e := r.checkFields(step, func(name string) any { return member(result, name) }, "answer"); e != nil {
			return e
		}
	} else {
		if err == nil {
			return fmt.Errorf("expected %s, got success: %v", expect, normal(result))
		}
		if Code(err) != expect {
			return fmt.Errorf("expected %s, got %v", expect, err)
		}
		if e := r.checkFields(step, func(name string) any { return errorField(err, name) }, expect); e != nil {
			return e
		}
	}
	if min := ms(step, "min_ms"); elapsed < min {
		return fmt.Errorf("took %v, expected at least %v", elapsed, min)
	}
	if max := ms(step, "max_ms"); max > 0 && elapsed > max {
		return fmt.Errorf("took %v, expected at most %v", elapsed, max)
	}
	return nil
}

// each is the steps that step stands for: itself, or with "copies" N, one for each of N leases (the lease
// and the name numbered, from 0).
func each(step map[string]any) []map[string]any {
	n, ok := step["copies"].(float64)
	if !ok {
		return []map[string]any{step}
	}
	var copies []map[string]any
	for i := 0; i < int(n); i++ {
		copied := map[string]any{}
		for k, v := range step {
			copied[k] = v
		}
		delete(copied, "copies")
		copied["lease"] = fmt.Sprintf("%v%d", step["lease"], i)
		if name, ok := step["name"].(string); ok {
			copied["name"] = fmt.Sprintf("%s-%d", name, i)
		}
		copies = append(copies, copied)
	}
	return copies
}

func (r *confRunner) step(ctx context.Context, step map[string]any) error {
	clientName := r.str(step, "client")
	if clientName == "" {
		clientName = "main"
	}
	c := r.client(clientName)
	leaseName := r.str(step, "lease")
	switch step["op"] {
	case "acquire":
		o := LeaseOptions{TTL: ms(step, "ttl_ms"), Wait: ms(step, "wait_ms"), Owner: r.str(step, "owner")}
		o.NoRenew = step["renew"] == false
		acquire := func() (any, error) {
			var held confHeld
			var err error
			switch step["kind"] {
			case "lockset":
				var names []string
				for _, n := range r.expand(step["names"]).([]any) {
					names = append(names, n.(string))
				}
				held.set, err = c.LockSet(ctx, names, o)
			case "semaphore":
				held.lease, err = c.Semaphore(ctx, r.str(step, "name"), int(num(step, "limit")), o)
			default:
				held.lease, err = c.Lock(ctx, r.str(step, "name"), o)
			}
			if err != nil {
				return nil, err
			}
			r.leases[leaseName] = held
			if held.lease != nil {
				return map[string]any{"fence": held.lease.Fence, "ttl_ms": held.lease.TTL.Milliseconds()}, nil
			}
			return map[string]any{}, nil
		}
		if step["background"] == true {
			done := make(chan error, 1)
			r.pending[leaseName] = done
			go func() { done <- r.outcome(step, acquire) }()
			return nil
		}
		return r.outcome(step, acquire)
	case "join":
		select {
		case err := <-r.pending[leaseName]:
			return err
		case <-time.After(ms(step, "max_ms")):
			return fmt.Errorf("the acquire of %s did not end within %v", leaseName, ms(step, "max_ms"))
		}
	case "release":
		return r.outcome(step, func() (any, error) { return nil, r.leases[leaseName].release(ctx) })
	case "renew":
		return r.outcome(step, func() (any, error) {
			held := r.leases[leaseName]
			if held.set != nil {
				return nil, held.set.Renew(ctx)
			}
			return held.lease.Renew(ctx)
		})
	case "write":
		held := r.leases[leaseName]
		var table *PGTable
		var keys *RedisKeys
		if m := r.str(step, "member"); m != "" {
			table, keys = held.set.Member(m).PG(r.str(step, "table")), held.set.Member(m).Redis()
		} else {
			table, keys = held.lease.PG(r.str(step, "table")), held.lease.Redis()
		}
		return r.outcome(step, func() (any, error) {
			if step["store"] == "pg" {
				return table.Put(ctx, r.str(step, "key"), r.expand(step["row"]).(map[string]any))
			}
			return keys.Put(ctx, r.str(step, "key"), r.str(step, "value"))
		})
	case "read":
		return r.outcome(step, func() (any, error) {
			if step["store"] == "pg" {
				return c.PG(r.str(step, "table"), "").Get(ctx, r.str(step, "key"))
			}
			return c.Redis("").Get(ctx, r.str(step, "key"))
		})
	case "revoke":
		return r.outcome(step, func() (any, error) {
			fence, err := c.RevokeLock(ctx, r.str(step, "name"), "conformance")
			return map[string]any{"revoked_fence": fence}, err
		})
	case "status":
		for deadline := time.Now().Add(ms(step, "within_ms")); ; time.Sleep(50 * time.Millisecond) {
			err := r.outcome(step, func() (any, error) {
				if step["kind"] == "semaphore" {
					return c.SemaphoreStatus(ctx, r.str(step, "name"))
				}
				return c.LockStatus(ctx, r.str(step, "name"))
			})
			if err == nil || time.Now().After(deadline) {
				return err
			}
		}
	case "lost":
		held := r.leases[leaseName]
		select {
		case <-held.lost():
		default: // not yet: wait (a select over both at once may pick the timer when both are ready)
			select {
			case <-held.lost():
			case <-time.After(ms(step, "within_ms")):
				return fmt.Errorf("lease %s not lost within %v", leaseName, ms(step, "within_ms"))
			}
		}
		for _, reason := range step["reason"].([]any) {
			if reason == held.reason() {
				return nil
			}
		}
		return fmt.Errorf("lease %s lost for %q, expected one of %v", leaseName, held.reason(), step["reason"])
	case "held":
		select {
		case <-r.leases[leaseName].lost():
			return fmt.Errorf("lease %s is lost (%s)", leaseName, r.leases[leaseName].reason())
		default:
			return nil
		}
	case "sleep":
		time.Sleep(ms(step, "ms"))
		return nil
	case "assert":
		if pair, ok := r.expand(step["lt"]).([]any); ok && !(pair[0].(float64) < pair[1].(float64)) {
			return fmt.Errorf("expected %v < %v", pair[0], pair[1])
		}
		if pair, ok := r.expand(step["eq"]).([]any); ok && !reflect.DeepEqual(pair[0], pair[1]) {
			return fmt.Errorf("expected %v == %v", pair[0], pair[1])
		}
		return nil
	case "requests":
		return r.requests(step)
	}
	return fmt.Errorf("unknown op %v", step["op"])
}

// requests checks the proxy's log of what the client sent.
func (r *confRunner) requests(step map[string]any) error {
	via := r.str(step, "via")
	if via == "" {
		via = "main"
	}
	resp, err := http.Get(os.Getenv(r.spec.Clients[via]["url_env"]) + "/_proxy/requests")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var seen []struct {
		Method string         `json:"method"`
		Path   string         `json:"path"`
		Body   map[string]any `json:"body"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&seen); err != nil {
		return err
	}
	path := r.str(step, "path_contains")
	values := map[string]map[string]bool{}
	mine := seen[:0]
	for _, s := range seen {
		if s.Method != step["method"] || !strings.Contains(s.Path, path) {
			continue
		}
		mine = append(mine, s)
		for _, name := range step["same"].([]any) {
			if values[name.(string)] == nil {
				values[name.(string)] = map[string]bool{}
			}
			values[name.(string)][fmt.Sprint(s.Body[name.(string)])] = true
		}
	}
	count := len(mine)
	if int64(count) != num(step, "count") {
		return fmt.Errorf("the gateway got %d %v requests on %s, expected %d", count, step["method"], path, num(step, "count"))
	}
	for name, distinct := range values {
		if len(distinct) != 1 || distinct["<nil>"] {
			return fmt.Errorf("the requests on %s carried different or no %s: %v", path, name, distinct)
		}
	}
	last, _ := step["last"].(map[string]any)
	for name, value := range last {
		var carried any
		if count > 0 {
			carried = mine[count-1].Body[name]
		}
		if fmt.Sprint(carried) != fmt.Sprint(value) {
			return fmt.Errorf("the last request on %s carried %s %v, expected %v", path, name, carried, value)
		}
	}
	return nil
}

func TestConformance(t *testing.T) {
	path := os.Getenv("FG_CONF_SCENARIOS")
	if path == "" {
		t.Skip("FG_CONF_SCENARIOS is not set: run through tests/conformance/driver.py")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var spec confSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	only := regexp.MustCompile(os.Getenv("FG_CONF_ONLY"))
	r := &confRunner{spec: &spec, run: os.Getenv("FG_CONF_RUN"), clients: map[string]*Client{}}
	passed, failed := 0, 0
	for _, scenario := range spec.Scenarios {
		if !only.MatchString(scenario.Name) {
			continue
		}
		ok := t.Run(scenario.Name, func(t *testing.T) {
			r.leases, r.pending = map[string]confHeld{}, map[string]chan error{}
			ctx := context.Background()
			defer func() {
				for _, held := range r.leases {
					_ = held.release(ctx)
				}
			}()
			for i, step := range scenario.Steps {
				for _, one := range each(step) {
					if err := r.step(ctx, one); err != nil {
						t.Fatalf("step %d (%v %v): %v", i+1, one["op"], firstOf(r.str(one, "lease"), r.str(one, "name")), err)
					}
				}
			}
		})
		if ok {
			passed++
		} else {
			failed++
		}
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
}
