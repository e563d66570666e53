// SPDX-License-Identifier: Apache-2.0
/**
 * fencegate: a client for the fencegate gateway that makes the safe path the easy one.
 *
 *     import { Client } from "fencegate";
 *     const client = new Client({ url: "http://127.0.0.1:8480" });
 *     await client.withLock("invoice:42", async (lease) => {
 *       await lease.pg("invoices").patch(42, { status: "paid" });   // carries the lease's Fence-Token
 *     }, { ttlMs: 30000, waitMs: 10000 });
 *
 * Modules: client (Client), lease (Lease, LockSet), writes (PgTable, RedisKeys), keeper (renewal and
 * watch), transport (connections, retries), json (fences read and written exactly, as bigints), errors (one
 * class per problem code).
 */

export * from "./client.js";
export * from "./errors.js";
export { Lease, LeaseOptions, LockSet, LockSetMember, MAX_GATEWAY_WAIT_MS, RenewResult } from "./lease.js";
export { ClientOptions, DEFAULT_RETRY, Effect, MAX_TIMEOUT_MS, RetryPolicy, VERSION } from "./transport.js";
export { BatchOp, CallOptions, PgTable, ReadResult, RedisKeys, WriteResult } from "./writes.js";
