// SPDX-License-Identifier: Apache-2.0

// An invoice worker service built on the fencegate Go client, end to end.
//
//	POST /invoices/<id>/pay  takes the lock invoice:<id> (waiting up to -wait), reads the row and, if it is
//	                         still unpaid, "charges" it (-work of work) and marks it paid: the row in
//	                         Postgres and app:invoice:<id>:state in Redis, both fenced writes under the
//	                         lease. Answers {"id", "paid", "fence", "worker"}; "paid": false when another
//	                         request had paid it already; 503 when the lease was lost during the work.
//	GET  /healthz            200 while the service runs.
//
// Any number of workers may run side by side: the lock makes each payment happen once, and the fence
// makes a worker that stalled past its lease unable to overwrite a newer payment.
//
//	FENCEGATE_URL=http://127.0.0.1:8480 go run . -listen 127.0.0.1:8500 -name w1
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	fencegate "fencegate/client"
)

// worker pays invoices through one gateway client.
type worker struct {
	client *fencegate.Client
	name   string
	wait   time.Duration
	work   time.Duration
}

type payment struct {
	ID     string `json:"id"`
	Paid   bool   `json:"paid"`
	Fence  int64  `json:"fence"`
	Worker string `json:"worker"`
}

// pay pays the invoice id once, under its lock.
func (w *worker) pay(ctx context.Context, id string) (*payment, error) {
	result := &payment{ID: id, Worker: w.name}
	err := w.client.WithLock(ctx, "invoice:"+id, fencegate.LeaseOptions{TTL: 10 * time.Second, Wait: w.wait},
		func(ctx context.Context, lease *fencegate.Lease) error {
			invoices := lease.PG("invoices")
			current, err := invoices.Get(ctx, id)
			if err != nil || current.Row["status"] == "paid" {
				return err
			}
			select { // the charge: cut short if the lease is lost meanwhile
			case <-time.After(w.work):
			case <-ctx.Done():
				return ctx.Err()
			}
			note := fmt.Sprintf("paid by %s fence %d", w.name, lease.Fence)
			if _, err := invoices.Patch(ctx, id, map[string]any{"status": "paid", "note": note}); err != nil {
				return err
			}
			if _, err := lease.Redis().Put(ctx, "app:invoice:"+id+":state", "paid"); err != nil {
				return err
			}
			result.Paid, result.Fence = true, lease.Fence
			return nil
		})
	return result, err
}

func (w *worker) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		rw.WriteHeader(http.StatusOK)
		return
	}
	id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/invoices/"), "/pay")
	if r.Method != http.MethodPost || id == "" || id == r.URL.Path || strings.Contains(id, "/") {
		http.NotFound(rw, r)
		return
	}
	result, err := w.pay(r.Context(), id)
	var notFound *fencegate.NotFoundError
	var lost *fencegate.LeaseLostError
	var busy *fencegate.LockBusyError
	status := http.StatusOK
	switch {
	case errors.As(err, &notFound):
		status = http.StatusNotFound
	case errors.As(err, &lost), errors.As(err, &busy), errors.Is(err, context.Canceled):
		status = http.StatusServiceUnavailable
	case err != nil:
		log.Printf("paying %s: %v", id, err)
		status = http.StatusBadGateway
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	_ = json.NewEncoder(rw).Encode(result)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8500", "address to serve on")
	name := flag.String("name", "worker", "this worker's name, the owner of its leases")
	wait := flag.Duration("wait", 10*time.Second, "how long to wait for an invoice's lock")
	work := flag.Duration("work", 50*time.Millisecond, "how long a charge takes")
	flag.Parse()
	client, err := fencegate.New(fencegate.Config{Owner: *name}) // $FENCEGATE_URL, $FENCEGATE_KEY, $FENCEGATE_CACERT
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	srv := &http.Server{Addr: *listen, Handler: &worker{client: client, name: *name, wait: *wait, work: *work},
		ReadHeaderTimeout: 10 * time.Second}
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
		<-stop
		_ = srv.Shutdown(context.Background())
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
