"""Scheduler (TP rank) and detokenizer processes, forked by the main process.

A rank logs its start-up (distributed init, weight loading, KV cache, cuda graph capture), holds its
GPU's memory through the lab's ``fakegpu`` library, reports ``ready`` over a socket, then obeys the
main process's commands (``busy``, ``crash``, ``watchdog``, ``warn``). Like real sglang it dies with
its parent (PR_SET_PDEATHSIG) and, on an exception, logs ``Scheduler hit an exception: <traceback>``
and sends SIGQUIT to the parent.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import sys
import threading
import time
from typing import Any, Dict, Optional

from sglang._fake import dist, log, tracebacks

GB = 1024.0  # MiB per GiB


def set_pdeathsig() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)          # PR_SET_PDEATHSIG
    except Exception:                                   # noqa: BLE001
        pass


def import_fakegpu():
    """fakegpu from sys.path (lab hosts: tests/lab/fakes), else from this checkout."""
    try:
        import fakegpu  # type: ignore
        return fakegpu, None
    except ImportError as e:
        here = os.path.dirname(os.path.abspath(__file__))
        cand = os.path.normpath(os.path.join(here, "..", "..", "..", "fakes"))
        if os.path.exists(os.path.join(cand, "fakegpu.py")):
            sys.path.insert(0, cand)
            try:
                import fakegpu  # type: ignore
                return fakegpu, None
            except ImportError as e2:
                return None, str(e2)
        return None, str(e)


def _sleep(seconds: float) -> None:
    end = time.monotonic() + max(0.0, seconds)
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, 0.5))


def _hang_forever() -> None:
    while True:
        time.sleep(3600)


_crash_lock = threading.Lock()


class Rank:
    def __init__(self, rank: int, plan: Dict[str, Any], sock: socket.socket):
        self.rank, self.plan, self.sock = rank, plan, sock     # rank: the global TP index (TP8 on node 1 of 2)
        self.local = rank - int(plan.get("tp_base", 0))       # index among this node's ranks (its GPU slot)
        self.parent = plan["parent_pid"]
        self.holder = None
        self.avail = plan["gpu_total_mib"] / GB
        self.dist = None
        if plan.get("dist"):
            self.dist = dist.Dist(rank, self.local, plan["dist"],
                                  lambda phase, error: self.crash(phase, {}, error))

    # --- failure helpers --------------------------------------------------------------------------
    def applies(self, spec: Dict[str, Any]) -> bool:
        r = spec.get("rank", "all")
        if r in (None, "all", "*"):
            return True
        if isinstance(r, list):
            return self.rank in [int(x) for x in r]
        return int(r) == self.rank

    def crash(self, phase: str, spec: Dict[str, Any], error: Optional[str] = None) -> None:
        if not _crash_lock.acquire(blocking=False):      # another thread of this rank is already dying
            _hang_forever()
        tb = tracebacks.build(phase, self.plan["model_type"], spec.get("frames"), error or spec.get("error"),
                              spec.get("traceback") if not error else None)
        log.error("Scheduler hit an exception: " + tb.rstrip("\n"))
        try:
            os.kill(self.parent, signal.SIGQUIT)
        except ProcessLookupError:
            pass
        _hang_forever()                                  # the parent kills the tree

    def launch_failure(self, point: str) -> None:
        """Called at each start-up point: load, load_<fraction>, capture."""
        f = self.plan.get("launch_failure")
        if not f or f["point"] != point or not self.applies(f):
            return
        if f.get("delay_seconds"):
            _sleep(float(f["delay_seconds"]))
        if f["kind"] == "hang":
            _hang_forever()
        self.crash(f["phase"], f)

    # --- start-up -----------------------------------------------------------------------------------
    def start(self) -> None:
        p = self.plan
        log.info("Init torch distributed begin.")
        fg, err = import_fakegpu()
        gpu = p["gpu_ids"][self.local]
        if gpu >= p["gpu_count"]:
            self.crash("init", {}, "RuntimeError: CUDA error: invalid device ordinal\nCUDA kernel errors might be "
                       "asynchronously reported at some other API call, so the stacktrace below might be incorrect."
                       "\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1")
        if self.dist is not None:
            self.dist.init()                            # rendezvous with the other nodes (TCPStore)
        need = p["hold_mib"]
        if fg is None:
            log.warning(f"fake-sglang: fakegpu library not importable ({err}); GPU memory is not held")
        else:
            try:
                free = None
                for g in fg.gpu_state():
                    if int(g["index"]) == gpu:
                        free = int(g["memory_free_mib"])
                if free is not None and free < need:
                    self.avail = free / GB
                    log.info("Init torch distributed ends. mem usage=0.00 GB")
                    log.info(f"Load weight begin. avail mem={free / GB:.2f} GB")
                    self.crash("load", {}, (
                        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {min(need, 4096) / GB:.2f} GiB. "
                        f"GPU {self.local} has a total capacity of {p['gpu_total_mib'] / GB:.2f} GiB of which "
                        f"{max(free, 0) / GB:.2f} GiB is free. Including non-PyTorch memory, this process has "
                        f"{0.5:.2f} GiB memory in use. Of the allocated memory {0.31:.2f} GiB is allocated by PyTorch, "
                        f"and {0.02:.2f} GiB is reserved by PyTorch but unallocated."))
                self.holder = fg.hold({gpu: need}, name=f"sglang::scheduler_TP{self.rank}")
            except SystemExit:
                raise
            except Exception as e:                      # noqa: BLE001
                self.crash("init", {}, f"RuntimeError: CUDA error: {e}")
        log.info("Init torch distributed ends. mem usage=0.36 GB")
        avail0 = p["gpu_total_mib"] / GB - 0.9
        log.info(f"Load weight begin. avail mem={avail0:.2f} GB")
        self.launch_failure("load_begin")
        shards, load_s = p["shards"], p["load_seconds"]
        fail_frac = (self.plan.get("launch_failure") or {}).get("load_fraction")
        t0 = time.monotonic()
        if self.rank == 0:                              # global rank 0 only: no bar on nodes >= 1
            log.raw(f"Loading safetensors checkpoint shards:   0% Completed | 0/{shards} [00:00<?, ?it/s]\n")
        done_failure = False
        for i in range(1, shards + 1):
            _sleep(load_s / shards)
            if self.rank == 0:
                el = time.monotonic() - t0
                rate = i / el if el > 0 else 0.0
                rem = (shards - i) / rate if rate else 0.0
                log.raw(f"Loading safetensors checkpoint shards: {int(100 * i / shards):3d}% Completed | {i}/{shards} "
                        f"[{_mmss(el)}<{_mmss(rem)}, {rate:5.2f}it/s]\n")
            if fail_frac is not None and not done_failure and i / shards >= float(fail_frac) and i < shards:
                done_failure = True
                self.launch_failure("load")
        if fail_frac is not None and not done_failure:
            self.launch_failure("load")
        if self.rank == 0:
            log.raw("\n")
        weights = p["weights_mib"] / GB
        avail = avail0 - weights
        log.info(f"Load weight end. elapsed={time.monotonic() - t0:.2f} s, type={p['model_type']}, "
                 f"dtype=torch.bfloat16, avail mem={avail:.2f} GB, mem usage={weights:.2f} GB.")
        kv = (p["hold_mib"] - p["weights_mib"]) / GB
        tokens = int(kv * 1024 * 1024 * 1024 / (2 * p["kv_bytes_per_token"]))
        log.info(f"KV Cache is allocated. #tokens: {tokens}, K size: {kv / 2:.2f} GB, V size: {kv / 2:.2f} GB")
        avail -= kv
        log.info(f"Memory pool end. avail mem={avail:.2f} GB")
        if not p["disable_cuda_graph"]:
            log.info(f"Capture cuda graph begin. This can take up to several minutes. avail mem={avail:.2f} GB")
            self.launch_failure("capture")
            t1 = time.monotonic()
            _sleep(p["capture_seconds"])
            log.info(f"Capture cuda graph end. Time elapsed: {time.monotonic() - t1:.2f} s. mem usage=0.42 GB. "
                     f"avail mem={avail - 0.42:.2f} GB.")
            avail -= 0.42
        self.launch_failure("ready")
        if self.dist is not None:
            self.dist.barrier_loaded()                  # every node has loaded (the collectives after load)
            self.dist.serving = True
        if self.rank == 0:
            log.info(f"max_total_num_tokens={tokens}, chunked_prefill_size={p['chunked_prefill_size']}, "
                     f"max_prefill_tokens={p['max_prefill_tokens']}, max_running_requests={p['max_running_requests']}, "
                     f"context_len={p['context_len']}, available_gpu_mem={avail:.2f} GB")
        self.sock.sendall(b'{"ready": %d}\n' % self.rank)

    # --- serving: obey the main process ------------------------------------------------------------
    def serve(self) -> None:
        f = self.sock.makefile("rb")
        for line in f:
            try:
                cmd = json.loads(line)
            except ValueError:
                continue
            c = cmd.get("cmd")
            if c == "busy":
                if self.holder is not None and hasattr(self.holder, "set_busy"):
                    try:
                        self.holder.set_busy(bool(cmd.get("on")))
                    except Exception:                   # noqa: BLE001
                        pass
            elif c == "warn":
                if self.applies(cmd):
                    log.warning(cmd["msg"])
            elif c == "crash":
                if self.applies(cmd):
                    if cmd.get("delay_seconds"):
                        _sleep(float(cmd["delay_seconds"]))
                    if cmd.get("pre_log"):
                        log.warning(cmd["pre_log"])
                    self.crash(cmd.get("phase", "forward"), cmd)
            elif c == "watchdog":
                if self.applies(cmd):
                    _sleep(float(cmd["timeout"]))
                    log.error("Scheduler debug info: cur_batch.batch_size()=1, #running-req: 1, #queue-req: 0, "
                              "token_to_kv_pool_allocator available_size unchanged")
                    log.error("Pyspy failed (py-spy is not installed)")
                    log.error(f"Scheduler watchdog timeout (self.watchdog_timeout={_num(cmd['timeout'])}, self.soft=False)")
                    _sleep(float(cmd.get("grace", 5.0)))
                    try:
                        os.kill(self.parent, signal.SIGQUIT)
                    except ProcessLookupError:
                        pass
                    _hang_forever()
        os._exit(0)                                     # parent went away


def _num(v: float) -> str:
    v = float(v)
    return str(int(v)) if v.is_integer() else str(v)


def _mmss(s: float) -> str:
    s = int(s)
    return f"{s // 60:02d}:{s % 60:02d}"


def run_rank(rank: int, plan: Dict[str, Any], sock: socket.socket) -> None:
    """Child entry point after fork; never returns."""
    code = 0
    try:
        set_pdeathsig()
        signal.signal(signal.SIGTERM, signal.SIG_IGN if plan["ignore_sigterm"] else signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        log.PREFIX = f" TP{rank}"
        r = Rank(rank, plan, sock)
        r.start()
        r.serve()
    except BaseException:                               # noqa: BLE001
        import traceback

        log.error("fake-sglang internal error in scheduler: " + traceback.format_exc())
        code = 1
    os._exit(code)


def run_detokenizer(plan: Dict[str, Any], sock: socket.socket) -> None:
    try:
        set_pdeathsig()
        signal.signal(signal.SIGTERM, signal.SIG_IGN if plan["ignore_sigterm"] else signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        while sock.recv(4096):
            pass
    except BaseException:                               # noqa: BLE001
        pass
    os._exit(0)
