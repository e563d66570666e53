# SPDX-License-Identifier: Apache-2.0
"""The Python client's runner of the conformance scenarios (scenarios.json beside this file), through
the thread API (fencegate.Client) or, with ``--asyncio``, the asyncio one (fencegate.AsyncClient).

    python3 tests/conformance/driver.py -- python3 clients/conformance/python_runner.py [--asyncio]

Owns: carrying out each step through the Python client's own API (Client.lock, Lease.renew, lease.pg(...)
.put, the exception classes and their fields) and comparing what happened with the step's expectation.
With --asyncio, every call of the client is awaited on an event loop of its own
thread, and the steps wait for its answer. Must not: speak HTTP to the gateway itself (only to the proxy's request log, to check what the client sent).
The step language is described in README.md beside this file. FG_CONF_ONLY (a regular expression) runs the
scenarios whose name matches.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
import sys
import threading
import time
import urllib.request
from typing import Any, Callable, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python", "src"))

import fencegate  # noqa: E402
from fencegate import ProblemError  # noqa: E402


class StepFailed(AssertionError):
    """A step's outcome differs from its expectation."""


def error_field(error: ProblemError, name: str) -> Any:
    """A field of a refusal, read through the exception's typed attributes where it has one."""
    typed = {
        "status": lambda: error.status,
        "retry_after": lambda: error.retry_after,
        "waiting": lambda: error.waiting,  # type: ignore[attr-defined]
        "lock": lambda: error.lock,  # type: ignore[attr-defined]
        "presented_fence": lambda: error.presented_fence,  # type: ignore[attr-defined]
        "current_fence": lambda: error.current_fence,  # type: ignore[attr-defined]
        "resource": lambda: error.resource,  # type: ignore[attr-defined]
        "scope": lambda: error.scope,  # type: ignore[attr-defined]
        "reason": lambda: error.reason,  # type: ignore[attr-defined]
    }
    return typed[name]() if name in typed else error.extra(name)


def member(value: Any, path: str) -> Any:
    """value["a"]["b"] for the dotted path "a.b" (None where a member is missing)."""
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


class Runner:
    """Runs the scenarios of one spec; one fresh set of leases per scenario."""

    def __init__(self, spec: Dict[str, Any], use_asyncio: bool) -> None:
        self.spec = spec
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        if use_asyncio:
            self.loop = asyncio.new_event_loop()
            threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.run = os.environ["FG_CONF_RUN"]
        settings = spec["settings"]
        self.retry = fencegate.RetryPolicy(attempts=settings["retry_attempts"],
                                           budget_s=settings["retry_budget_ms"] / 1000.0)
        self.timeout = settings["timeout_ms"] / 1000.0
        self.clients: Dict[str, Any] = {}
        self.leases: Dict[str, Any] = {}
        self.pending: Dict[str, Tuple[threading.Thread, List[Any]]] = {}

    def sync(self, value: Any) -> Any:
        """The value, or, from the asyncio API, what it answers once awaited on the runner's loop."""
        if self.loop is not None and inspect.iscoroutine(value):
            return asyncio.run_coroutine_threadsafe(value, self.loop).result()
        return value

    def client(self, name: str) -> Any:
        if name not in self.clients:
            spec = self.spec["clients"][name]
            key = os.environ[spec["key_env"]] if "key_env" in spec else spec.get("key", "")
            kind = fencegate.AsyncClient if self.loop is not None else fencegate.Client
            self.clients[name] = kind(os.environ[spec["url_env"]], api_key=key, timeout=self.timeout, retry=self.retry)
        return self.clients[name]

    def url(self, client: str) -> str:
        return os.environ[self.spec["clients"][client]["url_env"]]

    # -- values --

    def expand(self, value: Any) -> Any:
        """The step's value with {run} replaced and "$lease.fence" references resolved."""
        if isinstance(value, str):
            value = value.replace("{run}", self.run)
            ref = re.fullmatch(r"\$(\w+)\.(\w+)", value)
            if ref:
                return getattr(self.leases[ref.group(1)], ref.group(2))
            return value
        if isinstance(value, list):
            return [self.expand(v) for v in value]
        if isinstance(value, dict):
            return {k: self.expand(v) for k, v in value.items()}
        return value

    def matches(self, want: Any, got: Any) -> bool:
        if want == "$positive":
            return isinstance(got, int) and not isinstance(got, bool) and got > 0
        return self.expand(want) == got

    def check_fields(self, fields: Dict[str, Any], read: Callable[[str], Any], what: str) -> None:
        for name, want in fields.items():
            got = read(name)
            if not self.matches(want, got):
                raise StepFailed(f"{what}: {name} is {got!r}, expected {self.expand(want)!r}")

    def outcome(self, step: Dict[str, Any], call: Callable[[], Any]) -> Any:
        """Runs call and checks its result or refusal against the step's expect, fields, min_ms, max_ms."""
        expect = step.get("expect", "ok")
        fields = step.get("fields", {})
        started = time.monotonic()
        try:
            result = self.sync(call())
            error: Optional[ProblemError] = None
        except ProblemError as e:
            result, error = None, e
        elapsed_ms = (time.monotonic() - started) * 1000
        if expect == "ok":
            if error is not None:
                raise StepFailed(f"expected success, got {error.code}: {error}")
            self.check_fields(fields, lambda name: member(result, name), "answer")
        else:
            if error is None:
                raise StepFailed(f"expected {expect}, got success: {result!r}")
            if error.code != expect:
                raise StepFailed(f"expected {expect}, got {error.code}: {error}")
            self.check_fields(fields, lambda name: error_field(error, name), expect)
        if elapsed_ms < step.get("min_ms", 0) or elapsed_ms > step.get("max_ms", float("inf")):
            raise StepFailed(f"took {elapsed_ms:.0f} ms, expected {step.get('min_ms', 0)}-{step.get('max_ms')} ms")
        return result

    # -- steps --

    def op_acquire(self, step: Dict[str, Any]) -> None:
        client = self.client(step.get("client", "main"))
        kind = step.get("kind", "lock")
        common = dict(wait_ms=step.get("wait_ms"), owner=step.get("owner"), renew=step.get("renew", True))
        if kind == "lockset":
            lease: Any = client.lockset(self.expand(step["names"]), ttl_ms=step.get("ttl_ms", 30000), **common)
        elif kind == "semaphore":
            lease = client.semaphore(self.expand(step["name"]), step["limit"], ttl_ms=step.get("ttl_ms"), **common)
        else:
            lease = client.lock(self.expand(step["name"]), ttl_ms=step.get("ttl_ms"), **common)

        def acquire() -> Dict[str, Any]:
            self.sync(lease.acquire())
            if step.get("expect", "ok") == "ok":
                self.leases[step["lease"]] = lease
            return {"fence": getattr(lease, "fence", None), "ttl_ms": lease.ttl_ms}

        if step.get("background"):
            box: List[Any] = []

            def wait() -> None:
                try:
                    box.append(self.outcome({**step, "max_ms": float("inf")}, acquire))
                except BaseException as e:  # noqa: BLE001 - handed to the join step
                    box.append(e)

            thread = threading.Thread(target=wait, daemon=True)
            thread.start()
            self.pending[step["lease"]] = (thread, box)
            return
        self.outcome(step, acquire)

    def op_join(self, step: Dict[str, Any]) -> None:
        thread, box = self.pending.pop(step["lease"])
        thread.join(step.get("max_ms", 10000) / 1000.0)
        if thread.is_alive():
            raise StepFailed(f"the acquire of {step['lease']} did not end within {step.get('max_ms')} ms")
        if isinstance(box[0], BaseException):
            raise box[0]

    def op_release(self, step: Dict[str, Any]) -> None:
        self.outcome(step, self.leases[step["lease"]].release)

    def op_renew(self, step: Dict[str, Any]) -> None:
        self.outcome(step, self.leases[step["lease"]].renew)

    def op_write(self, step: Dict[str, Any]) -> None:
        holder = self.leases[step["lease"]]
        if "member" in step:
            holder = holder[self.expand(step["member"])]
        key = self.expand(step["key"])
        if step["store"] == "pg":
            self.outcome(step, lambda: holder.pg(step["table"]).put(key, self.expand(step["row"])))
        else:
            self.outcome(step, lambda: holder.redis.put(key, self.expand(step["value"])))

    def op_read(self, step: Dict[str, Any]) -> None:
        client = self.client(step.get("client", "main"))
        key = self.expand(step["key"])
        if step["store"] == "pg":
            self.outcome(step, lambda: client.pg(step["table"]).get(key))
        else:
            self.outcome(step, lambda: client.redis().get(key))

    def op_revoke(self, step: Dict[str, Any]) -> None:
        client = self.client(step.get("client", "main"))
        self.outcome(step, lambda: {"revoked_fence": self.sync(client.revoke_lock(self.expand(step["name"]),
                                                                                       "conformance"))})

    def op_status(self, step: Dict[str, Any]) -> None:
        client = self.client(step.get("client", "main"))
        name = self.expand(step["name"])
        read = client.semaphore_status if step.get("kind", "lock") == "semaphore" else client.lock_status
        deadline = time.monotonic() + step.get("within_ms", 0) / 1000.0
        while True:
            try:
                self.outcome(step, lambda: read(name))
                return
            except StepFailed:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)

    def op_lost(self, step: Dict[str, Any]) -> None:
        lease = self.leases[step["lease"]]
        if not lease.lost.wait(step["within_ms"] / 1000.0):
            raise StepFailed(f"lease {step['lease']} not lost within {step['within_ms']} ms")
        if lease.lost_reason not in step["reason"]:
            raise StepFailed(f"lease {step['lease']} lost for {lease.lost_reason!r}, expected one of {step['reason']}")

    def op_held(self, step: Dict[str, Any]) -> None:
        lease = self.leases[step["lease"]]
        if lease.lost.is_set() or not lease.held:
            raise StepFailed(f"lease {step['lease']} is not held ({lease.lost_reason})")

    def op_sleep(self, step: Dict[str, Any]) -> None:
        time.sleep(step["ms"] / 1000.0)

    def op_assert(self, step: Dict[str, Any]) -> None:
        if "lt" in step:
            left, right = self.expand(step["lt"])
            if not left < right:
                raise StepFailed(f"expected {step['lt'][0]} ({left}) < {step['lt'][1]} ({right})")
        if "eq" in step:
            left, right = self.expand(step["eq"])
            if left != right:
                raise StepFailed(f"expected {step['eq'][0]} ({left}) == {step['eq'][1]} ({right})")

    def op_requests(self, step: Dict[str, Any]) -> None:
        with urllib.request.urlopen(self.url(step.get("via", "main")) + "/_proxy/requests", timeout=10) as answer:
            seen = json.load(answer)
        path = self.expand(step["path_contains"])
        mine = [r for r in seen if r["method"] == step["method"] and path in r["path"]]
        if len(mine) != step["count"]:
            raise StepFailed(f"the gateway got {len(mine)} {step['method']} requests on {path}, expected {step['count']}")
        for name in step.get("same", []):
            values = {json.dumps((r["body"] or {}).get(name)) for r in mine}
            if len(values) != 1 or values == {"null"}:
                raise StepFailed(f"the requests on {path} carried different or no {name}: {sorted(values)}")
        for name, value in step.get("last", {}).items():
            carried = (mine[-1]["body"] or {}).get(name) if mine else None
            if carried != value:
                raise StepFailed(f"the last request on {path} carried {name} {carried!r}, expected {value!r}")

    # -- scenarios --

    def cleanup(self) -> None:
        for lease in self.leases.values():
            try:
                self.sync(lease.release())
            except Exception:  # noqa: BLE001 - leases the scenario already ended
                pass
        self.leases.clear()
        self.pending.clear()

    def each(self, step: Dict[str, Any]) -> List[Dict[str, Any]]:
        """The steps that step stands for: itself, or with ``copies`` N, one for each of N leases (the lease
        and the name numbered, from 0)."""
        if "copies" not in step:
            return [step]
        copies = []
        for i in range(step["copies"]):
            copy = {k: v for k, v in step.items() if k != "copies"}
            copy["lease"] = f"{step['lease']}{i}"
            if "name" in step:
                copy["name"] = f"{step['name']}-{i}"
            copies.append(copy)
        return copies

    def scenario(self, scenario: Dict[str, Any]) -> Optional[str]:
        """Runs one scenario; None when it passed, else what failed."""
        try:
            for number, step in enumerate(scenario["steps"], 1):
                try:
                    for each in self.each(step):
                        getattr(self, "op_" + each["op"])(each)
                except (StepFailed, ProblemError, fencegate.FencegateError) as e:
                    return f"step {number} ({step['op']} {step.get('lease', step.get('name', ''))}): {e}"
            return None
        finally:
            self.cleanup()


def main() -> int:
    with open(os.environ["FG_CONF_SCENARIOS"], encoding="utf-8") as f:
        spec = json.load(f)
    only = re.compile(os.environ.get("FG_CONF_ONLY", ""))
    runner = Runner(spec, "--asyncio" in sys.argv[1:])
    passed = failed = 0
    for scenario in spec["scenarios"]:
        if not only.search(scenario["name"]):
            continue
        started = time.monotonic()
        problem = runner.scenario(scenario)
        took = (time.monotonic() - started) * 1000
        if problem is None:
            passed += 1
            print(f"ok   {scenario['name']} ({took:.0f} ms)", flush=True)
        else:
            failed += 1
            print(f"FAIL {scenario['name']}: {problem}", flush=True)
    for client in runner.clients.values():
        runner.sync(client.close())
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
