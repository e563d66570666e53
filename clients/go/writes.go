// SPDX-License-Identifier: Apache-2.0

// writes.go owns fenced writes through the gateway: rows of configured Postgres tables and keys under
// configured Redis prefixes, each write carrying the Fence-Token of a lease, and the plain reads of both.
// It must not decide whether a lease is still held: the holder's lost state does, before each try of a
// write (a retry too: a lease lost during the pause sends no more tries), and hears about refusals after
// it.

package fencegate

import (
	"context"
	"fmt"
	"net/http"
)

// holder is where writes get their token: a lease (state set), or a token received from elsewhere.
type holder struct {
	token string
	owner string
	state *lostState // nil for a bare token
}

// WriteResult is the answer of a fenced write. With ReturnMinimal the gateway answers 204 and only
// Applied is set (Minimal tells so).
type WriteResult struct {
	Applied  bool             `json:"applied"`
	Resource string           `json:"resource"`
	Fence    int64            `json:"fence"`
	Row      map[string]any   `json:"row"`     // Postgres: the row after the write (nil after a delete)
	Results  []map[string]any `json:"results"` // Postgres batch: one result per op
	Value    *string          `json:"value"`   // Redis PUT: the value written
	Fields   map[string]any   `json:"fields"`  // Redis PATCH: the fields written
	Minimal  bool             `json:"-"`       // the gateway answered 204 No Content
}

// ReadResult is the answer of a read: the row (Postgres) or the value or fields (Redis), and the highest
// fence stored for the resource (0 when none).
type ReadResult struct {
	Row    map[string]any `json:"row"`
	Value  *string        `json:"value"`
	Fields map[string]any `json:"fields"`
	Fence  int64          `json:"fence"`
}

// write sends a fenced write under h's token. A lease's lost state is checked before each try: once the
// lease is lost or released, no try goes out, and the write fails with a *LeaseLostError, or with an
// *OutcomeUnknownError after a try that may have been applied.
func (c *Client) write(ctx context.Context, h holder, minimal bool, method, path string, body any, effect Effect) (*WriteResult, error) {
	headers := http.Header{"Fence-Token": {h.token}}
	if h.owner != "" {
		headers.Set("Fence-Owner", h.owner)
	}
	if minimal {
		headers.Set("Prefer", "return=minimal")
	}
	r := request{method: method, path: path, headers: headers, effect: effect, write: true}
	if h.state != nil {
		r.check, r.lost = h.state.check, h.state.lost
	}
	if body != nil {
		r.body = jsonBody(body)
	}
	a, err := c.call(ctx, r)
	if err != nil {
		if h.state != nil {
			h.state.heard(err)
		}
		return nil, err
	}
	if a.status == http.StatusNoContent {
		return &WriteResult{Applied: true, Minimal: true}, nil
	}
	var res WriteResult
	if err := a.decode(&res); err != nil || !res.Applied {
		// Every write the gateway answers 2xx says "applied": true; another 2xx came from something else
		// at its address, and the write's outcome is unknown.
		if err == nil {
			err = fmt.Errorf("a %d that does not say \"applied\": true", a.status)
		}
		return nil, &UnreachableError{Op: method + " " + path, Sent: true, Err: err}
	}
	return &res, nil
}

func (c *Client) read(ctx context.Context, path string) (*ReadResult, error) {
	a, err := c.call(ctx, request{method: "GET", path: path, effect: Read})
	if err != nil {
		return nil, err
	}
	var res ReadResult
	return &res, a.decode(&res)
}

// PGTable is one configured Postgres table. Writes fail with *StaleFenceError, *LeaseLostError,
// *InvalidFenceTokenError, *NotFoundError, *ConflictError, ...; a refused write changes nothing. A write
// retried after a try that may have been applied fails with *OutcomeUnknownError instead of a refusal, and
// so does a write answered with a 5xx.
type PGTable struct {
	client  *Client
	table   string
	holder  holder
	minimal bool
}

// PG is a configured table for reads, or for writes with a token received from elsewhere (e.g.
// $FENCE_TOKEN under fencectl lock); prefer Lease.PG for writes.
func (c *Client) PG(table, token string) *PGTable {
	return &PGTable{client: c, table: table, holder: holder{token: token, owner: c.owner}}
}

// ReturnMinimal is the same table with writes sent with Prefer: return=minimal: the gateway answers 204
// without reading the row back.
func (t *PGTable) ReturnMinimal() *PGTable {
	copied := *t
	copied.minimal = true
	return &copied
}

func (t *PGTable) path(key string) string {
	if key == "" {
		return "/v1/pg/" + segment(t.table)
	}
	return "/v1/pg/" + segment(t.table) + "/" + segment(key)
}

// Get reads the row key and the highest fence stored for it.
func (t *PGTable) Get(ctx context.Context, key string) (*ReadResult, error) {
	return t.client.read(ctx, t.path(key))
}

// Patch updates columns of the row key. Retried after a lost reply (same values, same fence).
func (t *PGTable) Patch(ctx context.Context, key string, set map[string]any) (*WriteResult, error) {
	return t.client.write(ctx, t.holder, t.minimal, "PATCH", t.path(key), map[string]any{"set": set}, Idempotent)
}

// Put inserts or replaces the row key (columns not given become NULL). Retried after a lost reply.
func (t *PGTable) Put(ctx context.Context, key string, row map[string]any) (*WriteResult, error) {
	return t.client.write(ctx, t.holder, t.minimal, "PUT", t.path(key), map[string]any{"row": row}, Idempotent)
}

// Insert inserts a new row, its key among the columns; *ConflictError if it exists. Not retried once sent.
func (t *PGTable) Insert(ctx context.Context, row map[string]any) (*WriteResult, error) {
	return t.client.write(ctx, t.holder, t.minimal, "POST", t.path(""), map[string]any{"row": row}, Once)
}

// Delete deletes the row key; *NotFoundError if there is none. Not retried once sent.
func (t *PGTable) Delete(ctx context.Context, key string) (*WriteResult, error) {
	return t.client.write(ctx, t.holder, t.minimal, "DELETE", t.path(key), nil, Once)
}

// BatchOp is one op of a batch: Op "patch" (Key, Set), "put" (Key, Row), "post" (Row) or "delete" (Key);
// Table defaults to the table the batch is sent through.
type BatchOp struct {
	Op    string         `json:"op"`
	Table string         `json:"table"`
	Key   string         `json:"key,omitempty"`
	Set   map[string]any `json:"set,omitempty"`
	Row   map[string]any `json:"row,omitempty"`
}

// Batch applies several ops in one transaction, all or nothing, under one token. Retried after a lost
// reply only when every op is a patch or a put.
func (t *PGTable) Batch(ctx context.Context, ops []BatchOp) (*WriteResult, error) {
	effect := Idempotent
	full := make([]BatchOp, len(ops))
	for i, op := range ops {
		if op.Table == "" {
			op.Table = t.table
		}
		if op.Op != "patch" && op.Op != "put" {
			effect = Once
		}
		full[i] = op
	}
	return t.client.write(ctx, t.holder, t.minimal, "POST", "/v1/pg/batch", map[string]any{"ops": full}, effect)
}

// RedisKeys is the keys under the configured Redis prefixes.
type RedisKeys struct {
	client  *Client
	holder  holder
	minimal bool
}

// Redis is the keys for reads, or for writes with a token received from elsewhere; prefer Lease.Redis.
func (c *Client) Redis(token string) *RedisKeys {
	return &RedisKeys{client: c, holder: holder{token: token, owner: c.owner}}
}

// ReturnMinimal is the same keys with writes sent with Prefer: return=minimal.
func (r *RedisKeys) ReturnMinimal() *RedisKeys {
	copied := *r
	copied.minimal = true
	return &copied
}

// Get reads a key: its value or fields and the highest fence stored for it.
func (r *RedisKeys) Get(ctx context.Context, key string) (*ReadResult, error) {
	return r.client.read(ctx, "/v1/redis/"+segment(key))
}

// Put sets a string value. Retried after a lost reply.
func (r *RedisKeys) Put(ctx context.Context, key, value string) (*WriteResult, error) {
	return r.client.write(ctx, r.holder, r.minimal, "PUT", "/v1/redis/"+segment(key), map[string]any{"value": value}, Idempotent)
}

// Patch sets fields of a hash. Retried after a lost reply.
func (r *RedisKeys) Patch(ctx context.Context, key string, fields map[string]any) (*WriteResult, error) {
	return r.client.write(ctx, r.holder, r.minimal, "PATCH", "/v1/redis/"+segment(key), map[string]any{"fields": fields}, Idempotent)
}

// Delete deletes the key. Not retried once sent.
func (r *RedisKeys) Delete(ctx context.Context, key string) (*WriteResult, error) {
	return r.client.write(ctx, r.holder, r.minimal, "DELETE", "/v1/redis/"+segment(key), nil, Once)
}
