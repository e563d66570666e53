// SPDX-License-Identifier: Apache-2.0

// main_test.go runs the invoice worker against a real gateway (tests/conformance/driver.py sets
// FG_CONF_URL and FG_CONF_ADMIN_KEY; skipped without them): two workers, 30 concurrent pay requests over 3
// invoices; each invoice is paid exactly once, by the worker whose answer says so.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	fencegate "fencegate/client"
)

func TestWorkersPayEachInvoiceOnce(t *testing.T) {
	if os.Getenv("FG_CONF_URL") == "" {
		t.Skip("FG_CONF_URL is not set: run through tests/conformance/driver.py")
	}
	ctx := context.Background()
	var servers []*httptest.Server
	for _, name := range []string{"w1", "w2"} {
		client, err := fencegate.New(fencegate.Config{URL: os.Getenv("FG_CONF_URL"), APIKey: os.Getenv("FG_CONF_ADMIN_KEY"), Owner: name})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(&worker{client: client, name: name, wait: 20 * time.Second, work: 20 * time.Millisecond})
		defer srv.Close()
		servers = append(servers, srv)
	}
	setup, _ := fencegate.New(fencegate.Config{URL: os.Getenv("FG_CONF_URL"), APIKey: os.Getenv("FG_CONF_ADMIN_KEY")})
	var invoices []string
	for i := 0; i < 3; i++ {
		id := fmt.Sprintf("go-example-%d-%d", time.Now().UnixNano(), i)
		invoices = append(invoices, id)
		err := setup.WithLock(ctx, "invoice:"+id, fencegate.LeaseOptions{}, func(ctx context.Context, l *fencegate.Lease) error {
			_, err := l.PG("invoices").Put(ctx, id, map[string]any{"status": "open"})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var answers []payment
	var wg sync.WaitGroup
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			resp, err := http.Post(servers[i%2].URL+"/invoices/"+invoices[i%3]+"/pay", "application/json", nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var p payment
			if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&p) != nil {
				t.Errorf("a pay request answered %d", resp.StatusCode)
			}
			mu.Lock()
			answers = append(answers, p)
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	for _, id := range invoices {
		var paid []payment
		for _, a := range answers {
			if a.ID == id && a.Paid {
				paid = append(paid, a)
			}
		}
		if len(paid) != 1 {
			t.Fatalf("invoice %s paid %d times: %+v", id, len(paid), answers)
		}
		row, err := setup.PG("invoices", "").Get(ctx, id)
		want := fmt.Sprintf("paid by %s fence %d", paid[0].Worker, paid[0].Fence)
		if err != nil || row.Row["status"] != "paid" || row.Row["note"] != want {
			t.Fatalf("invoice %s: %+v %v, expected note %q", id, row, err, want)
		}
	}
}
