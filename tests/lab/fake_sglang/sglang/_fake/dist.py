"""Multi-node tensor parallel (``--nnodes N --node-rank i --dist-init-addr HOST:PORT``), played in the
scheduler processes where real torch.distributed does it.

Node 0's first rank (global TP0) hosts the rendezvous store on ``0.0.0.0:PORT`` and waits for the other
nodes; each other node's first local rank connects to ``HOST:PORT`` (retrying every 0.5 s) and says which
node it is. Both ends keep that connection for the life of the process group and watch it: when the peer
goes away (EOF or reset), the watching rank dies where 0.5.23's next collective over the group's gloo side would
fail: lost before or during the load, at the monitored barrier after the rank's own load (``barrier_after_load``:
rank 0 names the ranks that did not pass it, and every rank raises SGLang's "could finish the model loading"); lost
after that barrier in the launch, at once with the seed broadcast's gloo error; while serving, at once (the idle
scheduler broadcasts the received requests in every loop); a
graceful stop of node 0 (its main process's ShutdownReq) is broadcast instead: ``{"shutdown": true}`` to every
other node, whose first rank then tells its main process and exits 0 (the real nodes >= 1 exit 0 then).
The other local ranks of a node wait for their first rank through pipes (``init``: the rendezvous is done;
``loaded``: this rank has loaded), so every node reports ready only when all nodes have loaded.

Durations (``--dist-timeout``, default 600 s) are scaled by FAKE_SGLANG_TIME_SCALE.

Wire format: one JSON object per line. Client -> store: ``{"node_rank": i, "nnodes": N, "tp_size": T}``, later
``{"loaded": true}``. Store -> client: ``{"go": true}`` (every node joined), ``{"ok": false, "error": "..."}``
(rejected: duplicate node rank, other --nnodes/--tp-size, rendezvous already complete), ``{"world_ready": true}``,
``{"shutdown": true}`` (node 0 stops gracefully).
"""
from __future__ import annotations

import errno
import json
import os
import select
import socket
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from sglang._fake import log, tracebacks

RETRY_SECONDS = 0.5
# dist_barrier_after_load's monitored barrier (model_runner_components/load_model_utils.py:56, UNBALANCED_MODEL_LOADING_
# TIMEOUT_S)
LOAD_BARRIER_SECONDS = 480


def parse_init_addr(addr: Optional[str]) -> Tuple[str, Optional[int]]:
    """'host:port' or '[v6]:port' -> (host, port); port None when missing."""
    a = (addr or "").strip()
    if a.startswith("["):
        host, _sep, rest = a[1:].partition("]")
        rest = rest[1:] if rest.startswith(":") else ""
    else:
        host, sep, rest = a.rpartition(":")
        if not sep:
            host, rest = a, ""
    try:
        return host, int(rest)
    except ValueError:
        return host, None


def _send(sock: socket.socket, obj: Dict[str, Any]) -> None:
    sock.sendall((json.dumps(obj) + "\n").encode())


class _Lines:
    """Line reader over a socket that tells EOF/reset apart from a timeout."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buf = sock, b""

    def read(self, timeout: Optional[float] = None) -> Optional[Dict[str, Any]]:
        """A message; {} on timeout; None on EOF or reset."""
        end = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = None if end is None else max(0.0, end - time.monotonic())
            r, _w, _x = select.select([self.sock], [], [], left)
            if not r:
                return {}
            try:
                data = self.sock.recv(4096)
            except OSError:
                return None
            if not data:
                return None
            self.buf += data
        line, _sep, self.buf = self.buf.partition(b"\n")
        try:
            msg = json.loads(line)
        except ValueError:
            return {}
        return msg if isinstance(msg, dict) else {}


class Dist:
    """One per scheduler process when nnodes > 1. ``crash(phase, error)`` is the rank's crash path,
    ``on_shutdown()`` what a node >= 1's first rank does when node 0 broadcasts its ShutdownReq."""

    def __init__(self, rank: int, local: int, d: Dict[str, Any], crash: Callable[[str, str], None],
                 on_shutdown: Optional[Callable[[], None]] = None):
        self.rank, self.local, self.d, self.crash = rank, local, d, crash
        self.on_shutdown = on_shutdown
        self.shutting_down = False
        self.nnodes, self.node_rank = int(d["nnodes"]), int(d["node_rank"])
        self.local_tp, self.world = int(d["local_tp"]), int(d["world"])
        self.host, self.port, self.timeout = d["host"], d["port"], float(d["timeout"])
        self.first = local == 0
        self.serving = False
        self.past_barrier = False                       # past the monitored barrier after the load
        self.lost_nodes: set = set()                    # nodes lost before it
        self.peers: Dict[int, Tuple[socket.socket, _Lines, Tuple[str, int]]] = {}   # node_rank -> (sock, reader, addr)
        self.cond = threading.Condition()
        self.loaded: set = set()
        self.world_ready = False

    # --- rendezvous (init_process_group) ---------------------------------------------------------------
    def init(self) -> None:
        if not self.first:
            self._close(self.d["init_w"], self.d["loaded_r"], self.d["passed_w"])
            os.read(self.d["init_r"], 1)               # EOF: the first rank died; the parent kills us
            return
        self._close(self.d["init_r"], self.d["loaded_w"], self.d["passed_r"])
        if self.port is None:
            self.crash("dist_url", "ValueError: Error initializing torch.distributed using tcp:// rendezvous: "
                                   "port number missing")
        if self.rank >= self.world:
            self.crash("dist_init", f"ValueError: Invalid rank {self.rank}, rank should be in the interval "
                                    f"[0, {self.world - 1}] (--node-rank {self.node_rank} with --nnodes {self.nnodes})")
        if self.node_rank == 0:
            self._host_store()
        else:
            self._join_store()
        os.write(self.d["init_w"], b"x" * (self.local_tp - 1))
        for nr, (sock, lines, peer) in self.peers.items():
            threading.Thread(target=self._watch, args=(nr, lines, peer), name=f"peer-watch-{nr}",
                             daemon=True).start()

    @staticmethod
    def _close(*fds: int) -> None:
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass

    def _host_store(self) -> None:
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            srv.bind(("0.0.0.0", self.port))
            srv.listen(128)
        except OSError as e:
            code = e.errno or 0
            name = errno.errorcode.get(code, "UNKNOWN")
            self.crash("dist_init", "torch.distributed.DistNetworkError: The server socket has failed to listen on "
                                    f"any local network address. port: {self.port}, useIpv6: false, code: -{code}, "
                                    f"name: {name}, message: {(e.strerror or str(e)).lower()}")
        self.srv = srv
        start = time.monotonic()
        deadline = start + self.timeout
        while len(self.peers) < self.nnodes - 1:
            left = deadline - time.monotonic()
            if left <= 0:
                joined = self.local_tp * (1 + len(self.peers))
                self.crash("dist_init", f"torch.distributed.DistStoreError: Timed out after {int(self.timeout) + 1} "
                                        f"seconds waiting for clients. {joined}/{self.world} clients joined.")
            r, _w, _x = select.select([srv], [], [], min(left, 0.5))
            if not r:
                continue
            try:
                conn, addr = srv.accept()
            except OSError:
                continue
            lines = _Lines(conn)
            hello = lines.read(timeout=min(5.0, max(0.5, deadline - time.monotonic())))
            if not hello or "node_rank" not in hello:
                conn.close()
                continue
            err = self._check_hello(hello)
            if err:
                self._reject(conn, err)
                continue
            self.peers[int(hello["node_rank"])] = (conn, lines, (addr[0], addr[1]))
        for sock, _lines, _peer in self.peers.values():
            _send(sock, {"go": True})
        threading.Thread(target=self._late_joiners, name="tcpstore", daemon=True).start()

    def _check_hello(self, h: Dict[str, Any]) -> Optional[str]:
        nr = int(h.get("node_rank", -1))
        if int(h.get("nnodes", 0)) != self.nnodes or int(h.get("tp_size", 0)) != self.world:
            return (f"RuntimeError: node_rank {nr} joined the store at ({self.host}, {self.port}) with --tp-size "
                    f"{h.get('tp_size')} --nnodes {h.get('nnodes')}, but node 0 runs --tp-size {self.world} "
                    f"--nnodes {self.nnodes}")
        if nr in self.peers:
            return (f"torch.distributed.DistStoreError: node_rank {nr} has already joined the store at "
                    f"({self.host}, {self.port}); another node was started with the same --node-rank")
        return None

    @staticmethod
    def _reject(conn: socket.socket, err: str) -> None:
        try:
            _send(conn, {"ok": False, "error": err})
        except OSError:
            pass
        conn.close()

    def _late_joiners(self) -> None:
        """The store stays up with the process group; a node that joins now is turned away."""
        while True:
            try:
                conn, _addr = self.srv.accept()
            except OSError:
                return
            hello = _Lines(conn).read(timeout=5.0)
            if hello and "node_rank" in hello:
                err = self._check_hello(hello) or (
                    f"torch.distributed.DistStoreError: node_rank {hello['node_rank']} joined the store at "
                    f"({self.host}, {self.port}) after the process group was formed (world_size={self.world})")
                self._reject(conn, err)
            else:
                conn.close()

    def _join_store(self) -> None:
        start = time.monotonic()
        deadline = start + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.crash("dist_init", f"torch.distributed.DistNetworkError: The client socket has timed out after "
                                        f"{int(round(self.timeout * 1000))}ms while trying to connect to "
                                        f"({self.host}, {self.port}).")
            try:
                sock = socket.create_connection((self.host, self.port), timeout=min(1.0, left))
            except OSError:
                time.sleep(min(RETRY_SECONDS, max(0.0, deadline - time.monotonic())))
                continue
            sock.settimeout(None)
            lines = _Lines(sock)
            try:
                _send(sock, {"node_rank": self.node_rank, "nnodes": self.nnodes, "tp_size": self.world})
            except OSError:
                sock.close()
                time.sleep(RETRY_SECONDS)
                continue
            msg = lines.read()                          # waits for every node (no own deadline, like NCCL init)
            if msg is None:
                self.crash("dist_init", "torch.distributed.DistNetworkError: failed to recv, got 0 bytes")
            if msg.get("go"):
                peer = sock.getpeername()
                self.peers[0] = (sock, lines, (peer[0], peer[1]))
                return
            self.crash("dist_init", str(msg.get("error") or "torch.distributed.DistStoreError: rejected by the store"))

    # --- the barrier after the load -------------------------------------------------------------------
    def barrier_after_load(self) -> None:
        """dist_barrier_after_load (model_runner.py:1406, load_model_utils.py:387): gloo's monitored barrier of the
        TP group after every rank's load, 480 s. Node 0 (the monitor) waits for every node's load; a node lost
        before it, or one that does not come in time, fails it: torch names the ranks that did not pass, and SGLang
        raises its ValueError (as the real 0.5.23 did on the lab when node 1 crashed in its load:
        tests/unit/plugins/module_utils/data/sglang-0.5.23/nn2_rank1_load_crash_node0.log). A node >= 1 reports
        its load; node 0 lost before that fails it too. The node's other ranks wait for its first rank's verdict."""
        if not self.first:
            if not os.read(self.d["passed_r"], 1):      # EOF: the first rank failed the barrier; the parent kills us
                while True:
                    time.sleep(3600)
            return
        if self.node_rank >= 1:
            try:
                _send(self.peers[0][0], {"loaded": True})
            except OSError:
                pass
        deadline = time.monotonic() + float(self.d["load_barrier"])
        with self.cond:
            while (self.node_rank == 0 and len(self.loaded | self.lost_nodes) < len(self.peers)
                   and time.monotonic() < deadline):
                self.cond.wait(max(0.0, deadline - time.monotonic()))
            self.past_barrier = True
            # node 0: the nodes that did not report their load, or were lost (even after reporting it)
            missing = sorted(((set(self.peers) - self.loaded) if self.node_rank == 0 else set()) | self.lost_nodes)
        if not missing:
            os.write(self.d["passed_w"], b"x" * (self.local_tp - 1))
            return
        if self.node_rank == 0:
            ranks = [r for nr in missing for r in range(nr * self.local_tp, (nr + 1) * self.local_tp)]
            log.raw(tracebacks.monitored_barrier_lines(self.rank, ranks, LOAD_BARRIER_SECONDS * 1000))
        self.crash("load_barrier", tracebacks.LOAD_BARRIER_ERROR.format(rank=self.rank))

    # --- all nodes loaded (the collectives after load) ---------------------------------------------------
    def barrier_loaded(self) -> None:
        if not self.first:
            os.write(self.d["loaded_w"], b"x")
            return
        need = self.local_tp - 1
        while need > 0:
            got = os.read(self.d["loaded_r"], need)
            if not got:                                 # a sibling died; the parent kills us
                while True:
                    time.sleep(3600)
            need -= len(got)
        if self.node_rank == 0:
            with self.cond:
                while len(self.loaded) < len(self.peers):
                    self.cond.wait()
            for sock, _lines, _peer in self.peers.values():
                try:
                    _send(sock, {"world_ready": True})
                except OSError:
                    pass                                # its watcher reports the loss
        else:                                           # its load was reported at the barrier after it
            with self.cond:
                while not self.world_ready:
                    self.cond.wait()

    # --- node 0's graceful stop ---------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Node 0's first rank got the ShutdownReq: broadcast it to the other nodes."""
        self.shutting_down = True
        for sock, _lines, _peer in self.peers.values():
            try:
                _send(sock, {"shutdown": True})
            except OSError:
                pass

    # --- watching the peer ------------------------------------------------------------------------------
    def _watch(self, node_rank: int, lines: _Lines, peer: Tuple[str, int]) -> None:
        while True:
            msg = lines.read()
            if msg is None:
                break
            if msg.get("shutdown") and self.node_rank >= 1:
                self.shutting_down = True
                if self.on_shutdown is not None:
                    self.on_shutdown()
                return
            with self.cond:
                if msg.get("loaded"):
                    self.loaded.add(node_rank)
                if msg.get("world_ready"):
                    self.world_ready = True
                self.cond.notify_all()
        if self.shutting_down:
            return
        with self.cond:
            if not self.serving and not self.past_barrier:
                self.lost_nodes.add(node_rank)          # barrier_after_load reports it
                self.cond.notify_all()
                return
        if self.serving:
            self.crash("peer_serve" if self.rank == 0 else "peer_serve_recv",
                       tracebacks.GLOO_PEER_RESET.format(addr=peer[0], port=peer[1]))
        self.crash("peer_launch" if self.rank == 0 else "peer_launch_recv",
                   tracebacks.GLOO_PEER_CLOSED.format(addr=peer[0], port=peer[1]))


def make_config(args: Any, local_tp: int, scale: float, nccl_default: Callable[[], int]) -> Dict[str, Any]:
    """The plan's ``dist`` entry (the main process, before it forks the ranks); the pipes are made here."""
    if args.dist_init_addr:
        host, port = parse_init_addr(args.dist_init_addr)
    else:                                               # real sglang: 127.0.0.1 and the (random) nccl port
        host, port = "127.0.0.1", args.nccl_port or nccl_default()
    init_r, init_w = os.pipe()
    loaded_r, loaded_w = os.pipe()
    passed_r, passed_w = os.pipe()
    return {"nnodes": int(args.nnodes), "node_rank": int(args.node_rank), "local_tp": local_tp,
            "world": int(args.tp_size or 1), "host": host, "port": port,
            "timeout": float(args.dist_timeout or 600) * scale, "load_barrier": LOAD_BARRIER_SECONDS * scale,
            "init_r": init_r, "init_w": init_w, "loaded_r": loaded_r, "loaded_w": loaded_w,
            "passed_r": passed_r, "passed_w": passed_w}


def close_pipes(d: Optional[Dict[str, Any]]) -> None:
    if d:
        Dist._close(d["init_r"], d["init_w"], d["loaded_r"], d["loaded_w"], d["passed_r"], d["passed_w"])


__all__: List[str] = ["Dist", "make_config", "close_pipes", "parse_init_addr"]
