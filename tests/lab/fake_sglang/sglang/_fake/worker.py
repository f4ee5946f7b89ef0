"""Scheduler (TP rank) and detokenizer processes, forked by the main process.

A rank logs its start-up as sglang 0.5.23's scheduler does (``Init parallel begin.``, weight loading, KV
cache, ``Capture target decode CUDA graph begin/end``), holds its GPU's memory through the lab's ``fakegpu``
library (named ``sglang::scheduler``, or ``sglang::scheduler_TP<n>`` with tp > 1, like the real process
title), reports ``ready`` over a socket, then obeys the main process's commands (``busy``, ``crash``,
``kill``, ``nan``, ``watchdog``, ``shutdown``). Like real sglang it dies with its parent (PR_SET_PDEATHSIG)
and, on an exception, logs ``Scheduler hit an exception: <traceback>`` and sends SIGQUIT to the parent.
Log prefix: `` TP<n>`` only with tp > 1 (a tp 1 scheduler logs without one, like the real).
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
from sglang.srt import environ

GB = 1024.0  # MiB per GiB
PR_SET_PDEATHSIG, PR_SET_NAME = 1, 15


def _prctl(option: int, arg) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(option, arg, 0, 0, 0)
    except Exception:                                   # noqa: BLE001
        pass


def set_pdeathsig() -> None:
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def set_comm(name: str) -> None:
    """The kernel's comm (15 bytes), as setproctitle leaves it: ``sglang::schedul``."""
    _prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]))


def scheduler_title(rank: int, tp_size: int) -> str:
    """configure_scheduler_process: ``sglang::scheduler`` + the log prefix with spaces as ``_``."""
    return "sglang::scheduler" + (f"_TP{rank}" if tp_size > 1 else "")


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


def _load_step(seconds: float, busy: bool) -> None:
    """One shard's share of the load. ``busy`` (the rank that loads): at least 10 % of a CPU meanwhile, as reading
    and deserialising weights keeps a real loader busy; its progress bar reaches the journal only when the load ends
    (below), so a watcher that takes a quiet, idle server for a hung one must see the work."""
    end = time.monotonic() + max(0.0, seconds)
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return
        if busy:
            spin_until = time.thread_time() + min(left, 0.5) * 0.12
            while time.thread_time() < spin_until and time.monotonic() < end:
                pass
            left = end - time.monotonic()
        time.sleep(max(0.0, min(left, 0.5 * 0.88)))


def _hang_forever() -> None:
    while True:
        time.sleep(3600)


def _num(v: float) -> str:
    v = float(v)
    return str(int(v)) if v.is_integer() else str(v)


def _mmss(s: float) -> str:
    s = int(s)
    return f"{s // 60:02d}:{s % 60:02d}"


def decode_capture_bs(max_bs: int) -> list:
    """generate_decode_cuda_graph_batch_sizes (no speculative decoding), capped at max_bs."""
    bs = [1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 512, 16)) + list(range(512, max_bs + 1, 32))
    bs = [b for b in bs if b <= max_bs]
    if max_bs not in bs:
        bs.append(max_bs)
    return bs


def pyspy_failed_lines(pid: int) -> list:
    """pyspy_dump_schedulers with py-spy not installed (dash as /bin/sh; stderr keeps its newline)."""
    out = [f"Pyspy failed ({f'py-spy dump {flag} --pid {pid}'.strip()}). Error: /bin/sh: 1: py-spy: not found\n"
           for flag in ("--native", "")]                # the real .strip(): "py-spy dump  --pid N" keeps 2 spaces
    return out + [f"All pyspy dump attempts failed for PID {pid}."]


_crash_lock = threading.Lock()


class Rank:
    def __init__(self, rank: int, plan: Dict[str, Any], sock: socket.socket):
        self.rank, self.plan, self.sock = rank, plan, sock     # rank: the global TP index (TP8 on node 1 of 2)
        self.local = rank - int(plan.get("tp_base", 0))       # index among this node's ranks (its GPU slot)
        self.parent = plan["parent_pid"]
        self.scale = float(plan.get("scale", 1.0))
        self.holder = None
        self.avail = plan["gpu_total_mib"] / GB
        self.dist = None
        self.timings = {"load_weight": 0.0, "kv_cache_allocation": 0.0, "decode": 0.0}
        if plan.get("dist"):
            self.dist = dist.Dist(rank, self.local, plan["dist"], self._peer_crash, self._node0_shutdown)

    # --- failure helpers --------------------------------------------------------------------------
    def applies(self, spec: Dict[str, Any]) -> bool:
        r = spec.get("rank", "all")
        if r in (None, "all", "*"):
            return True
        if isinstance(r, list):
            return self.rank in [int(x) for x in r]
        return int(r) == self.rank

    def _peer_crash(self, phase: str, error: str) -> None:
        """The collective with another node failed (dist.Dist): the whole node loses its group. While
        serving, tell the main process first so that the other local ranks fail too (their collectives
        break as well), then die like a crash; the process then exits, as the real one did (gloo, CPU run)."""
        if phase.startswith("peer_serve"):
            try:
                self.sock.sendall((json.dumps({"peer_lost": self.rank, "error": error}) + "\n").encode())
            except OSError:
                pass
        self.crash(phase, {"rank_exits": True}, error)

    def _node0_shutdown(self) -> None:
        """Node 0 broadcast its ShutdownReq (a node >= 1): the main process stops the other local ranks."""
        try:
            self.sock.sendall(b'{"shutdown": %d}\n' % self.rank)
        except OSError:
            pass
        os._exit(0)

    def crash(self, phase: str, spec: Dict[str, Any], error: Optional[str] = None) -> None:
        """run_scheduler_process's except branch: log the traceback, SIGQUIT the parent. Then the rank
        stays alive (a wedged CUDA context) unless ``rank_exits`` (run_scheduler_process returns: exit 0)."""
        if not _crash_lock.acquire(blocking=False):      # another thread of this rank is already dying
            _hang_forever()
        tb = tracebacks.build(phase, self.plan["model_type"], spec.get("frames"), error or spec.get("error"),
                              spec.get("traceback") if not error else None,
                              loader=self.plan.get("loader") or "default")
        log.error("Scheduler hit an exception: " + tb)   # get_exception_traceback() ends with a newline
        try:
            os.kill(self.parent, signal.SIGQUIT)
        except ProcessLookupError:
            pass
        if spec.get("rank_exits"):
            os._exit(0)
        _hang_forever()                                  # the parent kills the tree

    def launch_failure(self, point: str) -> None:
        """Called at each start-up point: start, load_begin, load, capture, ready."""
        f = self.plan.get("launch_failure")
        if not f or f["point"] != point or not self.applies(f):
            return
        if f.get("delay_seconds"):
            _sleep(float(f["delay_seconds"]))
        if f["kind"] == "hang":
            _hang_forever()
        if f["kind"] == "killed":                        # e.g. the OOM killer: nothing logged by this process
            os.kill(os.getpid(), signal.SIGKILL)
        self.crash(f["phase"], f)

    def load_failure(self, drawn: bool) -> None:
        """A failure inside the load: an exception leaves tqdm's ``with`` block, whose close ends the bar's line; a
        hang or a kill leaves it open (journald shows an unended line only when the stream closes)."""
        f = self.plan.get("launch_failure")
        if drawn and f and f["point"] == "load" and f["kind"] not in ("hang", "killed") and self.applies(f):
            log.raw("\n")
        self.launch_failure("load")

    # --- start-up -----------------------------------------------------------------------------------
    def start(self) -> None:
        p = self.plan
        t_start = time.monotonic()
        self.launch_failure("start")
        log.info("Init parallel begin.")
        fg, err = import_fakegpu()
        gpu = p["gpu_ids"][self.local]
        if gpu >= p["gpu_count"]:
            self.crash("device", {}, "RuntimeError: CUDA error: invalid device ordinal\nCUDA kernel errors might be "
                       "asynchronously reported at some other API call, so the stacktrace below might be incorrect."
                       "\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1")
        if self.dist is not None:
            self.dist.init()                            # rendezvous with the other nodes (TCPStore)
        log.info(f"Init parallel ends. elapsed={time.monotonic() - t_start:.2f} s")
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
                    log.info("Memory baseline taken. mem usage=0.00 GB")
                    log.info(f"Load weight begin. avail mem={free / GB:.2f} GB")
                    self.crash("init", {}, (                 # the model's weights are allocated as it is built
                        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {min(need, 4096) / GB:.2f} GiB. "
                        f"GPU {self.local} has a total capacity of {p['gpu_total_mib'] / GB:.2f} GiB of which "
                        f"{max(free, 0) / GB:.2f} GiB is free. Including non-PyTorch memory, this process has "
                        f"{0.5:.2f} GiB memory in use. Of the allocated memory {0.31:.2f} GiB is allocated by PyTorch, "
                        f"and {0.02:.2f} GiB is reserved by PyTorch but unallocated."))
                self.holder = fg.hold({gpu: need}, name=scheduler_title(self.rank, p["tp_size"]))
            except SystemExit:
                raise
            except Exception as e:                      # noqa: BLE001
                self.crash("baseline", {}, f"RuntimeError: CUDA error: {e}")
        log.info("Memory baseline taken. mem usage=0.36 GB")
        avail0 = p["gpu_total_mib"] / GB - 0.9
        log.info(f"Load weight begin. avail mem={avail0:.2f} GB")
        self.launch_failure("load_begin")
        if self.dist is not None and self.dist.nnodes > 1:
            # the logits processor's all-gather, built with the model (layers/logits_processor.py:517): a TP group
            # across nodes gets none (distributed/device_communicators/triton_symm_mem_ag.py:484-492)
            log.warning("multimem all-gather disabled because the TP group spans across nodes.")
        shards, load_s = p["shards"], p["load_seconds"]
        fail_frac = (self.plan.get("launch_failure") or {}).get("load_fraction")
        t0 = time.monotonic()
        # 0.5.23's default loader (model_loader/weight_utils.py:1369, tqdm desc "Multi-thread loading shards"): the
        # bar redraws with "\r" and ends with one "\n" when it closes, so the journal gets the whole bar as one
        # line when the load ends (as in tests/unit/plugins/module_utils/data/sglang-0.5.23/tp1_realweights_bare.log)
        drawn = self.rank == 0                          # the bar: global rank 0 only, none on nodes >= 1
        if drawn:
            log.raw(f"\rMulti-thread loading shards:   0% Completed | 0/{shards} [00:00<?, ?it/s]")
        done_failure = fail_frac is not None and float(fail_frac) <= 0
        if done_failure:                                # load_fraction 0: as the first shard's weights arrive
            self.load_failure(drawn)
        for i in range(1, shards + 1):
            _load_step(load_s / shards, busy=drawn)
            if drawn:
                el = time.monotonic() - t0
                rate = i / el if el > 0 else 0.0
                rem = (shards - i) / rate if rate else 0.0
                log.raw(f"\rMulti-thread loading shards: {int(100 * i / shards):3d}% Completed | {i}/{shards} "
                        f"[{_mmss(el)}<{_mmss(rem)}, {rate:5.2f}it/s]")
            if fail_frac is not None and not done_failure and i / shards >= float(fail_frac) and i < shards:
                done_failure = True
                self.load_failure(drawn)
        if fail_frac is not None and not done_failure:
            self.load_failure(drawn)
        if drawn:
            log.raw("\n")
        weights = p["weights_mib"] / GB
        avail = avail0 - weights
        self.timings["load_weight"] = time.monotonic() - t0
        log.info(f"Load weight end. elapsed={self.timings['load_weight']:.2f} s, type={p['model_type']}, "
                 f"avail mem={avail:.2f} GB, mem usage={weights:.2f} GB.")
        if self.dist is not None:
            self.dist.barrier_after_load()              # every rank's load done (gloo's monitored barrier)
        t_kv = time.monotonic()
        kv = (p["hold_mib"] - p["weights_mib"]) / GB
        tokens = int(kv * 1024 * 1024 * 1024 / (2 * p["kv_bytes_per_token"]))
        log.info(f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {tokens}, K size: {kv / 2:.2f} GB, "
                 f"V size: {kv / 2:.2f} GB")
        avail -= kv
        log.info(f"Memory pool end. avail mem={avail:.2f} GB")
        self.timings["kv_cache_allocation"] = time.monotonic() - t_kv
        if p["decode_graph"]:                           # capture_decode_graph (model_runner_components/...)
            log.info(f"Capture target decode CUDA graph begin. backend={p['decode_graph']}, num_tokens_per_req=1, "
                     f"avail mem={avail:.2f} GB")
            self.launch_failure("capture")
            t1 = time.monotonic()
            _sleep(p["capture_seconds"])
            self.timings["decode"] = time.monotonic() - t1
            log.info(f"Capture target decode CUDA graph end. bs={decode_capture_bs(p['decode_max_bs'])}, "
                     f"elapsed={self.timings['decode']:.2f} s, mem usage=0.42 GB, avail mem={avail - 0.42:.2f} GB.")
            avail -= 0.42
        self.launch_failure("ready")
        if self.dist is not None:
            self.dist.barrier_loaded()                  # every node has loaded (the collectives after load)
            self.dist.serving = True
        if self.rank == 0:
            log.info(f"max_total_num_tokens={tokens}, chunked_prefill_size={p['chunked_prefill_size']}, "
                     f"max_prefill_tokens={p['max_prefill_tokens']}, max_running_requests={p['max_running_requests']}, "
                     f"context_len={p['context_len']}, available_gpu_mem={avail:.2f} GB")
        self.timings["scheduler_e2e"] = time.monotonic() - t_start
        self.sock.sendall((json.dumps({"ready": self.rank, "timings": self.timings}) + "\n").encode())

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
            elif c == "shutdown":                       # ShutdownReq: release and exit 0
                if self.dist is not None:
                    self.dist.shutdown()                # the broadcast reaches the other nodes' ranks
                os._exit(0)
            elif c == "hang":                           # stuck in a forward: obeys nothing any more
                if self.applies(cmd):
                    _hang_forever()
            elif c == "kill":
                if self.applies(cmd):
                    if cmd.get("delay_seconds"):
                        _sleep(float(cmd["delay_seconds"]))
                    os.kill(os.getpid(), signal.SIGKILL)
            elif c == "crash":
                if self.applies(cmd):
                    if cmd.get("delay_seconds"):
                        _sleep(float(cmd["delay_seconds"]))
                    if cmd.get("device_lines"):
                        log.raw("".join(cmd["device_lines"]))
                    self.crash(cmd.get("phase", "forward"), cmd)
            elif c == "watchdog":
                if self.applies(cmd):
                    self.watchdog(cmd)
        os._exit(0)                                     # parent went away

    def watchdog(self, cmd: Dict[str, Any]) -> None:
        """WatchdogRaw._watchdog_once (utils/watchdog.py): the forward never ends; after the timeout dump
        the debug info, py-spy this process, log the timeout, wait 5 s, SIGQUIT the parent."""
        _sleep(float(cmd["timeout"]))
        log.error("Scheduler debug info:\ncur_batch.batch_size()=1, #running-req: 1, #queue-req: 0, "
                  "token_to_kv_pool_allocator available_size unchanged")
        for line in pyspy_failed_lines(os.getpid()):
            log.error(line)
        shown = _num(cmd.get("shown", cmd["timeout"]))
        log.error(f"Scheduler watchdog timeout (self.watchdog_timeout={shown}, self.soft=False)")
        log.raw("\n")
        log.raw("\n", fd=1)
        _sleep(float(cmd.get("grace", 5.0)))
        try:
            os.kill(self.parent, signal.SIGQUIT)
        except ProcessLookupError:
            pass
        _hang_forever()


def run_rank(rank: int, plan: Dict[str, Any], sock: socket.socket) -> None:
    """Child entry point after fork; never returns."""
    code = 0
    try:
        set_pdeathsig()
        set_comm(scheduler_title(rank, plan["tp_size"]))
        environ.in_child()
        signal.signal(signal.SIGTERM, signal.SIG_IGN if plan["ignore_sigterm"] else signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        log.PREFIX = f" TP{rank}" if plan["tp_size"] > 1 else ""
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
        set_comm("sglang::detokenizer")
        environ.in_child()
        signal.signal(signal.SIGTERM, signal.SIG_IGN if plan["ignore_sigterm"] else signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        while sock.recv(4096):
            pass
    except BaseException:                               # noqa: BLE001
        pass
    os._exit(0)
