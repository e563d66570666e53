# SPDX-License-Identifier: Apache-2.0
"""The fence sequence of docs/cluster.md, as a model run against the cluster lab: one sequence per hash slot
(`fg:fence:{T(s)}`; the model's keys are `fg:model:fence:{T(s)}`, apart from those the lock scripts use in the
lab), issuing only below a limit that a reservation (standing in for Postgres: disjoint blocks, always above
everything reserved before) granted to the slot, the limit stamped with the run_id of the node that raised it. Every grant passes the run_id of the node its connection reached; a node restarted, promoted or
handed the slot by a reshard has another run_id, answers "nofence", and the slot's sequence is raised above a
fresh block before anything is granted there.

Owns: the model's Redis functions (FENCE_LIBRARY), the reservation, and a small client that routes by slot
(MOVED, ASK, failures: fetch the owners again and retry; a node without the functions gets them loaded). Must not: judge a run (test_cluster.py does).
"""

from __future__ import annotations

import socket
import threading
import time

from cluster_lab import SLOTS, ClusterLab, crc16, encode, read_reply, slot_tag

# KEYS: fence limit. grant: ARGV run_id -> the fence, or "nofence". raise: ARGV start end run_id -> "ok".
FENCE_LIBRARY = """#!lua name=fglabfence
redis.register_function('fglab_grant', function(keys, args)
  local lim = redis.call('GET', keys[2])
  if not lim then return 'nofence' end
  local sep = string.find(lim, '|', 1, true)
  if string.sub(lim, sep + 1) ~= args[1] then return 'nofence' end
  local cur = tonumber(redis.call('GET', keys[1]) or '0')
  if cur >= tonumber(string.sub(lim, 1, sep - 1)) then return 'nofence' end
  return redis.call('INCR', keys[1])
end)
redis.register_function('fglab_raise', function(keys, args)
  local cur = tonumber(redis.call('GET', keys[1]) or '0')
  if cur < tonumber(args[1]) then redis.call('SET', keys[1], args[1]) end
  redis.call('SET', keys[2], args[2] .. '|' .. args[3])
  return 'ok'
end)
"""

BLOCK = 50


class Reservation:
    """Postgres's part: blocks of fences, disjoint and each above every block before it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.next = 1

    def take(self) -> tuple[int, int]:
        with self.lock:
            start = self.next
            self.next += BLOCK
            return start, start + BLOCK - 1


class Conn:
    """One connection to a node, with the run_id of the process it reached."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=2)
        self.file = self.sock.makefile("rb")
        info = self.call("INFO", "server")
        self.run_id = next(line.split(":", 1)[1] for line in info.splitlines() if line.startswith("run_id:"))

    def call(self, *args: str, asking: bool = False):
        self.sock.sendall((encode("ASKING") if asking else b"") + encode(*args))
        if asking:
            read_reply(self.file)
        return read_reply(self.file)

    def close(self):
        self.file.close()
        self.sock.close()


class Client:
    """A thread's routing client: the owners of slots as the lab reads them, a connection per node."""

    def __init__(self, lab: ClusterLab, checked: bool = True):
        self.lab, self.checked = lab, checked
        self.conns: dict[int, Conn] = {}
        self.owners: dict[int, int] = {}

    def refresh(self):
        self.owners = {}
        for shard in self.lab.shards():
            r = shard["ranges"]
            for i in range(0, len(r), 2):
                for s in range(r[i], r[i + 1] + 1):
                    self.owners[s] = shard["primary"]

    def conn(self, port: int) -> Conn:
        if port not in self.conns:
            self.conns[port] = Conn(port)
        return self.conns[port]

    def drop(self, port: int):
        c = self.conns.pop(port, None)
        if c:
            c.close()

    def fcall(self, slot: int, build, deadline_s: float = 30):
        """Runs build(run_id) -> args on the owner of slot until an answer; the answer."""
        end = time.monotonic() + deadline_s
        port, asking = None, False
        while time.monotonic() < end:
            try:
                if port is None:
                    if not self.owners:
                        self.refresh()
                    port = self.owners[slot]
                c = self.conn(port)
                reply = c.call(*build(c.run_id if self.checked else "any"), asking=asking)
            except (OSError, RuntimeError, KeyError, StopIteration):
                if port is not None:
                    self.drop(port)
                port, asking = None, False
                time.sleep(0.05)
                self.owners = {}
                continue
            if isinstance(reply, Exception):
                word = str(reply).split(" ")
                if word[0] == "ASK":
                    port, asking = int(word[2].rsplit(":", 1)[1]), True
                    continue
                if str(reply) == "ERR Function not found":   # as the gateway does: load it, send again
                    self.conn(port).call("FUNCTION", "LOAD", "REPLACE", FENCE_LIBRARY)
                    continue
                if word[0] in ("MOVED", "CLUSTERDOWN", "TRYAGAIN") or "LOADING" in str(reply):
                    port, asking = None, False
                    self.owners = {}
                    time.sleep(0.02)
                    continue
                raise reply
            return reply
        raise RuntimeError(f"fence model: slot {slot} unanswered for {deadline_s} s")

    def grant(self, name: str, tags: dict[int, str], reservation: Reservation) -> int:
        """One fence for lock name, raising its slot's sequence from the reservation when told to."""
        slot = crc16(name.encode()) % SLOTS
        keys = [f"fg:model:fence:{{{tags[slot]}}}", f"fg:model:fence_limit:{{{tags[slot]}}}"]
        while True:
            fence = self.fcall(slot, lambda run_id: ["FCALL", "fglab_grant", "2", *keys, run_id])
            if fence != "nofence":
                return fence
            start, end = reservation.take()
            self.fcall(slot, lambda run_id: ["FCALL", "fglab_raise", "2", *keys, str(start), str(end), run_id])

    def close(self):
        for port in list(self.conns):
            self.drop(port)


def tags_for(names: list[str]) -> dict[int, str]:
    """The slot tag of each name's slot."""
    return {s: slot_tag(s) for s in {crc16(n.encode()) % SLOTS for n in names}}
