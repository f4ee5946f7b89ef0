"""Main process of the fake SGLang: parse args, pick the behaviour, fork the TP ranks and the
detokenizer, wait for them, serve HTTP, warm up, and die like the real 0.5.23 (entrypoints/engine.py,
entrypoints/http_server.py, managers/tokenizer_manager.py, utils/watchdog.py, launch_server.py).

How the real one dies, played here (durations scaled by FAKE_SGLANG_TIME_SCALE like every other one):
- launch phase (until the first generate request installs the tokenizer manager's handlers): a rank's
  exception SIGQUITs the main process: "Received sigquit from a child process. It usually means the child
  failed.", kill_process_tree (itself last: SIGKILL). A rank that dies without a word closes its pipe: the
  main process's recv() raises EOFError at once, the handler raises "RuntimeError: Rank N scheduler died during
  initialization (exit code: C). ..." (both tracebacks, chained), launch_server.py's finally runs
  kill_process_tree(include_parent=False), exit status 1. (A rank that is alive but silent is checked every 5 s.)
  Children are reaped before the main process ends, so that systemd finds none left to kill, as with the real.
- a multiprocessing resource tracker (``python -B -c "from multiprocessing.resource_tracker import main;main(N)"``)
  is a child of the main process beside the ranks and the detokenizer, as in the real tree.
- serving: the subprocess watchdog (every 1 s) logs "Subprocess scheduler_N (pid=P) crashed with exit code C.
  Triggering SIGQUIT for cleanup..." and SIGQUITs the main process; a rank's exception SIGQUITs it directly.
  The running-phase handler (an event-loop callback that blocks the loop: /health hangs, SIGTERM waits)
  logs "SIGQUIT received. ...", "Sleeping 5 seconds before crash diagnostics ...", then with live schedulers
  py-spy (not installed) and the CUDA coredump lines and "Waiting 60.0 seconds for CUDA coredumps before
  exiting." (SGLANG_PYSPY_DUMP_BEFORE_CRASH, SGLANG_CUDA_COREDUMP_BEFORE_CRASH[_WAIT_SECS]), without them
  "No live scheduler processes found; skipping py-spy and CUDA coredump.", then kill_process_tree: SIGKILL.
- SIGTERM while serving: "SIGTERM received. ... Draining requests and shutting down...", noticed at the next
  5-s tick of the sigterm watchdog, "Gracefully exiting... Remaining number of requests N. ..." every 5 s
  until none is left, ShutdownReq to the ranks (up to 15 s to exit), kill_process_tree(include_parent=False),
  uvicorn's shutdown lines, kill_process_tree again, exit 0.
- multi-node ranks >= 1: no tokenizer, no watchdog; "Dummy health check server started in background thread
  at HOST:PORT", then the main thread joins the ranks ("Scheduler or DataParallelController P terminated
  with C"), kill_process_tree(include_parent=False), exit 0. SIGTERM only logs "SIGTERM received on node_rank
  N; waiting for the rank-0 ShutdownReq broadcast to stop the schedulers."
"""
from __future__ import annotations

import asyncio
import glob
import json
import multiprocessing.connection
import os
import random
import select
import signal
import socket
import threading
import time
import traceback
import urllib.error
import urllib.request
import uuid
from multiprocessing import resource_tracker
from typing import Any, Dict, List, Optional

from sglang._fake import behaviour as bh
from sglang._fake import dist, log, textgen, tracebacks, worker
from sglang._fake.engine import Engine, Req
from sglang._fake.http import DummyHealthServer, HttpServer
from sglang._fake.metrics import Metrics
from sglang.srt.server_args import ServerArgs, prepare_server_args
from sglang.version import __version__

READY_POLL_SECONDS = 5.0          # _wait_for_scheduler_ready: pipe poll(timeout=5.0), then is_alive() of every rank
WATCHDOG_INTERVAL = 1.0           # SubprocessWatchdog(interval=1.0)
DIAG_SLEEP_SECONDS = 5            # dump_requests_before_crash: "Sleeping 5 seconds ..."
SIGTERM_TICK_SECONDS = 5.0        # sigterm_watchdog: asyncio.sleep(5) until gracefully_exit, then per drain round
SCHEDULER_EXIT_TIMEOUT = 15       # _SCHEDULER_EXIT_TIMEOUT_SECS after ShutdownReq


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, "") or default)
    except ValueError:
        return default


def env_bool(name: str, default: bool) -> bool:
    """sglang's EnvBool: true/1/yes/y, false/0/no/n (case-insensitive); anything else: the default."""
    v = os.environ.get(name)
    if v is None or not v.strip():
        return default
    v = v.strip().lower()
    if v in ("true", "1", "yes", "y"):
        return True
    if v in ("false", "0", "no", "n"):
        return False
    return default


def _model_config(path: str) -> Dict[str, Any]:
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def kill_process_tree(children: List[int], include_parent: bool = True) -> None:
    """utils/common.py kill_process_tree(os.getpid(), include_parent): log, SIGKILL the children, then
    (include_parent) itself last: the process ends by SIGKILL."""
    log.info(f"kill_process_tree called: parent_pid={os.getpid()}, include_parent={include_parent}, "
             f"pid={os.getpid()}")
    for pid in children:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    # psutil's kill_process_tree ends while the children are still dying, but the real main process takes its
    # time to exit after it: by then they are gone and systemd finds none left to kill. Reap them first.
    deadline = time.monotonic() + 2.0
    left = list(children)
    while left and time.monotonic() < deadline:
        for pid in list(left):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    left.remove(pid)
            except ChildProcessError:
                left.remove(pid)
        if left:
            time.sleep(0.02)
    if include_parent:
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(5)
        os._exit(137)


def kill_tree_and_self(children: List[int]) -> None:
    kill_process_tree(children, include_parent=True)


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


class App:
    def __init__(self, args: ServerArgs, decision: bh.Decision, gpu_cfg: Dict[str, Any]):
        self.args, self.decision, self.gpu_cfg = args, decision, gpu_cfg
        self.p = decision.params
        self.start_time = time.time()
        self.startup_tic = time.monotonic()
        self.children: List[int] = []
        self.rank_pids: List[int] = []
        self.detok_pid: Optional[int] = None
        self.rank_socks: List[socket.socket] = []
        self._send_lock = threading.Lock()
        self._codes: Dict[int, int] = {}
        self._codes_lock = threading.RLock()     # also taken in signal handlers (same thread)
        self.status = "launching"          # launching -> starting (HTTP up) -> ready -> shutting_down
        self.unhealthy = False             # ServerStatus.UnHealthy after a failed health check
        self.gracefully_exit = False
        self.tm_handlers = False           # the tokenizer manager's SIGTERM/SIGQUIT handlers (first generate)
        self.crash_dump_performed = False
        self.engine: Optional[Engine] = None
        self.metrics: Optional[Metrics] = None       # --enable-metrics
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.http: Optional[HttpServer] = None
        self.mcfg = _model_config(args.model_path)
        self.scale = _env_float("FAKE_SGLANG_TIME_SCALE", 1.0)
        self.context_len = int(args.context_length or self.mcfg.get("max_position_embeddings") or 32768)
        self.tp_size = max(1, int(args.tp_size or 1))
        self.log_prefix = " TP0" if self.tp_size > 1 else ""     # the TP0 scheduler's own lines
        self.answers = "ok"
        if decision.behaviour == "garbage":
            self.answers = "garbage"
        if args.load_format == "dummy":
            self.answers = "random"
        self.nan_check = self._nan_check()
        if decision.behaviour == "nan" and not self.nan_check and \
                str(self.p.get("when") or "first_forward") == "first_forward":
            self.answers = "nan"                         # NaN logits from the first forward on, sampled as token 0
        self.fail_next_warmup = bool(self.p.get("fail_warmup"))
        self.failed = False
        self.killing = False
        self.health_timeout = _env_float("SGLANG_HEALTH_CHECK_TIMEOUT", 20.0)
        self.rank_timings: List[Dict[str, float]] = []
        self._watchdog_stop = threading.Event()
        # multi-node: this node runs TP ranks [tp_base, tp_base + local_tp) of tp_size, on its GPUs 0..local_tp-1
        self.nnodes = max(1, int(args.nnodes or 1))
        self.node_rank = int(args.node_rank or 0) if self.nnodes > 1 else 0
        self.local_tp = self.tp_size // self.nnodes
        self.tp_base = self.node_rank * self.local_tp
        self.plan = self.make_plan()
        self.plan["loader"] = self.model_loader()

    def _nan_check(self) -> bool:
        """SGLANG_ENABLE_NAN_LOGITS_CHECK (or SGLANG_ENABLE_ASYNC_ASSERT) arms the device assert on NaN logits;
        the rule's nan_crash (true/false) stands for it being set or not."""
        v = self.p.get("nan_crash")
        if v is not None:
            return bool(v)
        return env_bool("SGLANG_ENABLE_NAN_LOGITS_CHECK", False) or env_bool("SGLANG_ENABLE_ASYNC_ASSERT", False)

    # --- the launch plan ----------------------------------------------------------------------------
    def model_loader(self) -> str:
        """The model loader 0.5.23 picks (model_loader/loader.py get_model_loader), one of tracebacks.LOADERS:
        dummy for --load-format dummy; modelopt for a ModelOpt checkpoint (config.json's quantization_config with
        quant_method modelopt, or none, or an hf_quant_config.json beside it) or --quantization modelopt*."""
        if self.args.load_format == "dummy":
            return "dummy"
        qc = self.mcfg.get("quantization_config")
        if str(getattr(self.args, "quantization", None) or "").startswith("modelopt") or (
                isinstance(qc, dict) and qc.get("quant_method", "modelopt") == "modelopt") or \
                os.path.isfile(os.path.join(self.args.model_path or "", "hf_quant_config.json")):
            return "modelopt"
        return "default"

    def model_type(self) -> str:
        return self.p.get("model_type") or (self.mcfg.get("architectures") or ["Qwen3MoeForCausalLM"])[0]

    def decode_graph(self) -> Optional[str]:
        """The decode CUDA graph backend, None when disabled (--disable-cuda-graph, deprecated, disables both)."""
        a = self.args
        if getattr(a, "disable_cuda_graph", False) or getattr(a, "disable_decode_cuda_graph", False):
            return None
        backend = getattr(a, "cuda_graph_backend_decode", None) or "full"
        return None if backend == "disabled" else str(backend)

    def make_plan(self) -> Dict[str, Any]:
        a, p = self.args, self.p
        load = p.get("load_seconds")
        if load is None:
            load = _env_float("FAKE_SGLANG_LOAD_SECONDS", 2.0)
        load = float(load)
        layers = int(p.get("num_layers") or self.mcfg.get("num_hidden_layers") or 48)
        try:
            override = json.loads(a.json_model_override_args or "{}")
        except ValueError:
            override = {}
        layer_frac = 1.0
        if isinstance(override, dict) and override.get("num_hidden_layers"):
            layer_frac = min(1.0, max(1, int(override["num_hidden_layers"])) / max(1, layers))
        capture = float(p.get("capture_seconds") or 0.0)
        if a.load_format == "dummy":
            dl = p.get("dummy_load_seconds")
            load = float(dl) if dl is not None else load * float(p.get("dummy_load_fraction") or 0.05)
        load *= layer_frac * self.scale
        capture *= layer_frac * self.scale
        shards = p.get("shards")
        if shards is None:
            shards = len(glob.glob(os.path.join(a.model_path, "*.safetensors"))) or 8
        tp = self.local_tp
        count = int(self.gpu_cfg.get("count", 8) if self.gpu_cfg else 8)
        cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
        phys = list(range(max(count, 1) + 64))
        if cvd is not None:
            # as the driver reads it (indices or UUIDs, up to the first entry that names no GPU)
            from sglang._fake.worker import import_fakegpu  # pylint: disable=import-outside-toplevel
            fakegpu = import_fakegpu()[0]
            phys = fakegpu.visible_gpus(None, cvd) if fakegpu is not None else phys
        gpu_ids = []
        for r in range(tp):
            logical = a.base_gpu_id + r * a.gpu_id_step
            gpu_ids.append(phys[logical] if logical < len(phys) else 10_000 + logical)
        total_mib = int(self.gpu_cfg.get("memory_total_mib", 97887) if self.gpu_cfg else 97887)
        frac = p.get("gpu_mem_fraction") or a.mem_fraction_static or 0.85
        hold = int(total_mib * float(frac))
        graph = self.decode_graph()
        plan = {
            "parent_pid": os.getpid(), "model_type": self.model_type(), "load_seconds": load,
            "capture_seconds": capture, "shards": int(shards), "gpu_ids": gpu_ids, "gpu_count": count,
            "gpu_total_mib": total_mib, "hold_mib": hold, "weights_mib": int(hold * 0.6),
            "kv_bytes_per_token": 70 * 1024, "decode_graph": graph,
            "decode_max_bs": int(getattr(a, "cuda_graph_max_bs_decode", None) or 256),
            "tp_size": self.tp_size, "scale": self.scale,
            "ignore_sigterm": bool(p.get("ignore_sigterm")),
            "chunked_prefill_size": a.chunked_prefill_size or 8192,
            "max_prefill_tokens": a.max_prefill_tokens, "max_running_requests": a.max_running_requests or 2048,
            "context_len": self.context_len, "launch_failure": None,
        }
        if self.nnodes > 1:
            plan["tp_base"] = self.tp_base
            plan["dist"] = dist.make_config(a, self.local_tp, self.scale, self._nccl_port)
        beh, when = self.decision.behaviour, str(p.get("when") or "first_forward")
        at = str(p.get("at") or when)
        common = {"rank": p.get("rank", "all"), "frames": p.get("frames"), "error": p.get("error"),
                  "traceback": p.get("traceback"), "rank_exits": bool(p.get("rank_exits")),
                  "delay_seconds": float(p.get("delay_seconds") or 0) * self.scale}
        if beh == "crash":
            if when in ("load", "init"):
                plan["launch_failure"] = {"kind": "crash", "point": "load" if when == "load" else "load_begin",
                                          "phase": when, "load_fraction": p.get("load_fraction", 0.5)
                                          if when == "load" else None, **common}
            elif when == "capture" or (when == "first_forward" and graph):
                plan["launch_failure"] = {"kind": "crash", "point": "capture", "phase": "capture", **common}
        elif beh == "hang" and at in ("init", "load", "capture", "start"):
            point = {"init": "load_begin", "start": "load_begin", "load": "load", "capture": "capture"}[at]
            plan["launch_failure"] = {"kind": "hang", "point": point, "phase": at,
                                      "load_fraction": p.get("load_fraction", 0.5) if at == "load" else None,
                                      "rank": p.get("rank", "all")}
        elif beh == "killed":
            at = str(p.get("at") or "start")
            if at in ("start", "load", "capture"):
                f = {"kind": "killed", "phase": at, "rank": p.get("rank", "all"),
                     "delay_seconds": float(p.get("delay_seconds") or 0) * self.scale}
                if at == "start":
                    f["point"] = "start"
                elif at == "load" and p.get("delay_seconds") is not None:
                    f["point"] = "load_begin"            # delay_seconds after "Load weight begin"
                elif at == "load":
                    f.update(point="load", load_fraction=p.get("load_fraction", 0.5))
                else:
                    f["point"] = "capture" if graph else "ready"
                plan["launch_failure"] = f
        return plan

    def _nccl_port(self) -> int:
        """Real sglang without --dist-init-addr: 127.0.0.1 and port + random(100, 1000), a free one."""
        port = self.args.port + random.randint(100, 1000)
        for _attempt in range(100):
            try:
                with socket.socket() as s:
                    s.bind(("", port))
                return port
            except OSError:
                port += 42
        return port

    # --- children -------------------------------------------------------------------------------------
    def child_code(self, pid: int) -> Optional[int]:
        """multiprocessing's exitcode: None while alive, -N when ended by signal N."""
        with self._codes_lock:
            if pid in self._codes:
                return self._codes[pid]
            try:
                wpid, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                self._codes[pid] = -signal.SIGKILL
                return self._codes[pid]
            if not wpid:
                return None
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            self._codes[pid] = code
            return code

    def live_children(self) -> List[int]:
        """The children not reaped yet (a reaped pid may belong to someone else by now: never signal it)."""
        return [pid for pid in self.children if self.child_code(pid) is None]

    def live_schedulers(self) -> List[int]:
        """collect_scheduler_processes(): the children titled sglang::scheduler* that still run."""
        return [pid for pid in self.rank_pids if self.child_code(pid) is None]

    def send_ranks(self, cmd: Dict[str, Any], ranks: Optional[List[int]] = None) -> None:
        data = (json.dumps(cmd) + "\n").encode()
        with self._send_lock:
            for i, s in enumerate(self.rank_socks):
                if ranks is not None and i not in ranks:
                    continue
                try:
                    s.sendall(data)
                except OSError:
                    pass

    # --- runtime failures, decided at each admitted request --------------------------------------------
    def on_forward(self, req: Req, client_count: int) -> bool:
        """Return False to stall the engine (a failure is happening)."""
        if self.failed:
            return False
        beh, p = self.decision.behaviour, self.p
        if beh not in ("crash", "nan", "watchdog", "hang", "killed"):
            return True
        when = str(p.get("at") or p.get("when") or "first_forward") if beh in ("hang", "killed") else \
            str(p.get("when") or "first_forward")
        if when == "after_requests":
            # client requests after the server is ready; warm-up and health probes do not count
            if not req.client or self.status != "ready" or self.ready_client_base is None:
                return True
            if client_count - self.ready_client_base <= int(p.get("requests") or 0):
                return True
        elif when != "first_forward":
            return True
        self.failed = True
        common = {"rank": p.get("rank", "all"), "frames": p.get("frames"), "error": p.get("error"),
                  "traceback": p.get("traceback"), "rank_exits": bool(p.get("rank_exits")),
                  "delay_seconds": float(p.get("delay_seconds") or 0) * self.scale}
        if beh == "crash":
            self.send_ranks({"cmd": "crash", "phase": "forward", **common})
        elif beh == "nan":
            if not self.nan_check:                     # 0.5.23 default: NaN logits are sampled silently
                self.failed = False                    # keeps serving, token 0 ("!") from now on
                self.answers = "nan"
                if env_bool("SGLANG_SANITIZE_NAN_LOGITS", False) and self.engine.nan_warn is None:
                    self._install_sanitize_warning()
                return True
            # SGLANG_ENABLE_NAN_LOGITS_CHECK: maybe_detect_nan's device assert, raised at the next sync
            self.send_ranks({"cmd": "crash", "phase": "nan_assert", **common, "error": None, "frames": None,
                             "device_lines": tracebacks.nan_device_assert_lines()})
        elif beh == "watchdog":
            wt = p.get("watchdog_timeout") or self.args.watchdog_timeout or 300
            self.send_ranks({"cmd": "watchdog", "timeout": float(wt) * self.scale, "shown": float(wt),
                             "rank": p.get("rank", 0),
                             "grace": float(p.get("watchdog_grace_seconds", 5.0)) * self.scale})
        elif beh == "hang":
            self.send_ranks({"cmd": "hang", "rank": p.get("rank", "all")})
        elif beh == "killed":
            self.send_ranks({"cmd": "kill", "rank": p.get("rank", "all"), "delay_seconds": common["delay_seconds"]})
        return False

    ready_client_base: Optional[int] = None

    def _install_sanitize_warning(self) -> None:
        """SGLANG_SANITIZE_NAN_LOGITS without the check: maybe_warn_nan warns once, from the TP0 scheduler."""
        done = [False]

        def warn() -> None:
            if not done[0]:
                done[0] = True
                self.send_ranks({"cmd": "warn", "rank": self.tp_base, "msg": (
                    "NaN detected in sampler: next_token_logits; values were sanitized before sampling. This "
                    "usually indicates numerical overflow (e.g. fp16 activations) or an upstream bug producing NaN. "
                    "Logged once; further occurrences are silent.")})
        self.engine.nan_warn = warn

    def new_req(self, prompt: str, n_prompt: int, *, chat: bool, temperature: float, max_new: int,
                ignore_eos: bool, on_token=None, kind: str = "gen", client: bool = True) -> Req:
        self.auto_create_handle_loop()
        ans = textgen.make_answer(prompt or "", chat=chat, temperature=temperature, mode=self.answers,
                                  ignore_eos=ignore_eos, garbage_text=str(self.p.get("garbage_text") or "!"))
        return Req(ans, max_new, n_prompt, kind, on_token, client=client and threading.current_thread()
                   is threading.main_thread() and not getattr(self, "_warming", False))

    # --- endpoints' data ----------------------------------------------------------------------------
    def model_info(self) -> Dict[str, Any]:
        a = self.args
        return {"model_path": a.model_path, "served_model_name": a.served_model_name,
                "tokenizer_path": a.tokenizer_path, "is_generation": True,
                "preferred_sampling_params": a.preferred_sampling_params, "weight_version": "default",
                "load_format": a.load_format, "reasoning_parser": getattr(a, "reasoning_parser", None),
                "tool_call_parser": getattr(a, "tool_call_parser", None), "disaggregation_mode": "null",
                "has_image_understanding": False, "has_audio_understanding": False,
                "model_type": self.mcfg.get("model_type", "qwen3_moe"), "architectures": [self.model_type()]}

    def server_info(self) -> Dict[str, Any]:
        d = self.args.to_dict()
        d.update({"max_total_num_tokens": 1234567, "max_req_input_len": self.context_len - 5,
                  "internal_states": [{"last_gen_throughput": self.engine.last_gen_throughput if self.engine else 0.0,
                                       "memory_usage": {"weight": round(self.plan["weights_mib"] / 1024, 2),
                                                        "kvcache": round((self.plan["hold_mib"] -
                                                                          self.plan["weights_mib"]) / 1024, 2)}}],
                  "version": __version__})
        return d

    def is_ready(self) -> bool:
        """/ready: startup done, neither unhealthy nor shutting down."""
        return self.status == "ready" and not self.unhealthy and not self.gracefully_exit

    async def health_check(self) -> bool:
        """health_generate (entrypoints/http_server.py): 503 while starting or shutting down; else a 1-token
        request, checked every second for any output since it started, up to SGLANG_HEALTH_CHECK_TIMEOUT."""
        if self.gracefully_exit:
            log.info("Health check request received during shutdown. Returning 503.")
            return False
        if self.status not in ("ready",):
            return False
        self.auto_create_handle_loop()
        # the rid the sigterm watchdog lists while the check is in flight (entrypoints/http_server.py:754)
        r = Req(textgen.make_answer("health", chat=False, temperature=0, mode=self.answers, ignore_eos=True),
                1, 1, "health", None, client=False, rid=f"HEALTH_CHECK_{uuid.uuid4().hex}")
        tic = time.time()
        self.engine.submit(r)
        while time.time() < tic + self.health_timeout:
            await asyncio.sleep(1)
            if self.engine.last_emit > tic:
                self.engine.abort(r)
                self.unhealthy = False
                return True
        self.engine.abort(r)
        log.error(f"Health check failed. Server couldn't get a response from detokenizer for last "
                  f"{_num(self.health_timeout)} seconds. tic start time: "
                  f"{time.strftime('%H:%M:%S', time.localtime(tic))}. last_heartbeat time: "
                  f"{time.strftime('%H:%M:%S', time.localtime(self.engine.last_emit or self.start_time))}")
        self.unhealthy = True
        return False

    # --- launch ---------------------------------------------------------------------------------------
    def spawn(self) -> None:
        # multiprocessing's resource tracker, a child of the main process started before the schedulers
        # (``python -B -c "from multiprocessing.resource_tracker import main;main(N)"``), as the real one's
        resource_tracker.ensure_running()
        tracker = getattr(resource_tracker._resource_tracker, "_pid", None)  # pylint: disable=protected-access
        if tracker:
            self.children.append(tracker)
        for rank in range(self.tp_base, self.tp_base + self.local_tp):
            parent_s, child_s = socket.socketpair()
            pid = os.fork()
            if pid == 0:
                parent_s.close()
                for s in self.rank_socks:
                    s.close()
                worker.run_rank(rank, self.plan, child_s)
            child_s.close()
            self.children.append(pid)
            self.rank_pids.append(pid)
            self.rank_socks.append(parent_s)
        dist.close_pipes(self.plan.get("dist"))
        if self.node_rank >= 1:
            return                                       # nodes >= 1 run no tokenizer/detokenizer
        parent_s, child_s = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            parent_s.close()
            for s in self.rank_socks:
                s.close()
            worker.run_detokenizer(self.plan, child_s)
        child_s.close()
        self.children.append(pid)
        self.detok_pid = pid
        self.detok_sock = parent_s

    def wait_ready(self) -> None:
        """_wait_for_scheduler_ready: for each rank in turn, poll its pipe for 5 s; on a timeout check every
        rank and stop at the first dead one. A rank's SIGQUIT (its exception) interrupts via the handler."""
        period = READY_POLL_SECONDS * self.scale
        for i, s in enumerate(self.rank_socks):
            buf = b""
            while True:
                deadline = time.monotonic() + period
                while time.monotonic() < deadline:
                    left = max(0.0, deadline - time.monotonic())
                    r, _w, _x = select.select([s], [], [], left)
                    if not r:
                        break
                    data = s.recv(4096)
                    if not data:                        # the rank's end of the pipe closed: it died
                        self._scheduler_died_eof(i, s)
                    buf += data
                    if b"\n" in buf:
                        break
                if b"\n" in buf:
                    try:
                        self.rank_timings.append(json.loads(buf.split(b"\n", 1)[0]).get("timings") or {})
                    except ValueError:
                        pass
                    break
                for j, pid in enumerate(self.rank_pids):
                    code = self.child_code(pid)
                    if code is not None:
                        self._scheduler_died(j, code)

    def _scheduler_died_eof(self, local_rank: int, sock: socket.socket) -> None:
        """recv() on the pipe of a rank that died raises EOFError; the handler raises _scheduler_died_error(i, ...)
        with the rank's exit code. The stdlib frames come from a real EOFError of multiprocessing's Connection."""
        pid = self.rank_pids[local_rank]
        deadline = time.monotonic() + 1.0
        code = self.child_code(pid)
        while code is None and time.monotonic() < deadline:
            time.sleep(0.01)
            code = self.child_code(pid)
        conn = multiprocessing.connection.Connection(os.dup(sock.fileno()))
        try:
            conn.recv()
            frames = ""
        except EOFError as exc:
            # the frames below this call (multiprocessing/connection.py): no header, no caller, no error line
            lines = "".join(traceback.format_exception(exc)).splitlines(True)[1:-1]
            starts = [k for k, line in enumerate(lines) if line.startswith("  File ")]
            frames = "".join(lines[starts[1]:]) if len(starts) > 1 else ""
        finally:
            conn.close()
        kill_process_tree(self.live_children(), include_parent=False)
        log.raw(tracebacks.scheduler_died_eof(local_rank, -signal.SIGKILL if code is None else code, frames,
                                              self.node_rank))
        os._exit(1)

    def _scheduler_died(self, local_rank: int, code: int) -> None:
        """raise _scheduler_died_error(j, ...): launch_server.py's finally kills the tree (not itself), Python
        prints the traceback, exit status 1."""
        kill_process_tree(self.live_children(), include_parent=False)
        log.raw(tracebacks.scheduler_died(local_rank, code, self.node_rank))
        os._exit(1)

    def log_startup_timings(self) -> None:
        t = self.rank_timings or [{}]

        def mx(key: str) -> float:
            return max(float(x.get(key) or 0.0) for x in t)
        log.info(f"Engine startup timings (s): load_weight={mx('load_weight'):.2f}, "
                 f"kv_cache_allocation={mx('kv_cache_allocation'):.2f}, scheduler_e2e={mx('scheduler_e2e'):.2f}, "
                 f"cuda_graph={{prefill=0.00, decode={mx('decode'):.2f}, target_verify=0.00, draft_prefill=0.00, "
                 f"draft_decode=0.00, draft_extend=0.00}}, tokenizer_e2e={time.monotonic() - self.startup_tic:.2f}")

    # --- the subprocess watchdog (node 0, serving) --------------------------------------------------------
    def start_watchdog(self) -> None:
        for s in self.rank_socks:                       # a rank that hangs stops reading: never block on it
            s.settimeout(2.0)
        procs = [(pid, f"scheduler_{i}") for i, pid in enumerate(self.rank_pids)]
        if self.detok_pid is not None:
            procs.append((self.detok_pid, "detokenizer"))
        interval = max(0.02, WATCHDOG_INTERVAL * self.scale)

        def monitor() -> None:
            while not self._watchdog_stop.wait(interval):
                for pid, name in procs:
                    code = self.child_code(pid)
                    if code is None or code == 0:
                        continue
                    log.error(f"Subprocess {name} (pid={pid}) crashed with exit code {code}. "
                              f"Triggering SIGQUIT for cleanup...")
                    os.kill(os.getpid(), signal.SIGQUIT)
                    return
        threading.Thread(target=monitor, name="subprocess-watchdog", daemon=True).start()

    # --- serving ----------------------------------------------------------------------------------------
    def _metrics_finished(self, r: Req) -> None:
        gaps = [b - a for a, b in zip(r.token_at, r.token_at[1:])]
        self.metrics.finished(r.created, r.first_token_at, time.time(), r.prompt_tokens, r.n,
                              r.on_token is not None, gaps)

    def serve(self) -> None:
        self.loop = loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        p = self.p
        self.engine = Engine(loop, float(p["per_stream_tok_s"]), float(p["total_tok_s"]), float(p["prefill_tok_s"]),
                             self.args.decode_log_interval, on_forward=self.on_forward, on_busy=self._busy,
                             log_prefix=self.log_prefix, cuda_graph=bool(self.plan["decode_graph"]))
        if self.args.enable_metrics:
            self.metrics = Metrics(self.args.served_model_name or self.args.model_path,
                                   self.args.extra_metric_labels, self.context_len)
            self.engine.on_finish = self._metrics_finished
        srv = self.http = HttpServer(self)
        if p.get("ignore_sigterm"):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        else:                                            # uvicorn's own handlers until the tokenizer manager's
            loop.add_signal_handler(signal.SIGTERM, self._uvicorn_exit)
            loop.add_signal_handler(signal.SIGINT, self._uvicorn_exit)
        log.uvicorn(f"Started server process [{os.getpid()}]")
        log.uvicorn("Waiting for application startup.")
        log.uvicorn("Application startup complete.")
        host = self.args.host
        try:
            server = loop.run_until_complete(asyncio.start_server(srv.handle, host, self.args.port, backlog=2048,
                                                                  reuse_address=True))
        except OSError as e:
            self._bind_failed(e)
        shown = f"[{host}]" if ":" in host else host
        log.uvicorn(f"Uvicorn running on http://{shown}:{self.args.port} (Press CTRL+C to quit)")
        self.status = "starting"
        self._server = server
        threading.Thread(target=self._warmup, name="warmup", daemon=True).start()
        loop.run_forever()

    def auto_create_handle_loop(self) -> None:
        """TokenizerManager.auto_create_handle_loop (on the first generate request): its SIGTERM and SIGQUIT
        handlers replace uvicorn's and the launch phase's; the sigterm watchdog starts ticking."""
        if self.tm_handlers or self.loop is None:
            return
        self.tm_handlers = True

        def install() -> None:
            if not self.p.get("ignore_sigterm"):
                self.loop.add_signal_handler(signal.SIGTERM, self._sigterm)
            self.loop.add_signal_handler(signal.SIGQUIT, self._running_sigquit)
            self.loop.create_task(self._sigterm_watchdog())
        if threading.current_thread() is threading.main_thread():
            install()
        else:
            self.loop.call_soon_threadsafe(install)

    def _bind_failed(self, e: OSError) -> None:
        log.uvicorn(f"[Errno {e.errno}] error while attempting to bind on address ({self.args.host!r}, "
                    f"{self.args.port}): {(e.strerror or str(e)).lower()}", level="ERROR")
        self.kill_children()
        os._exit(1)

    def kill_children(self) -> None:
        for pid in self.live_children():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _set_ready(self) -> None:
        self.ready_client_base = self.engine.client_requests
        self.status = "ready"

    def _busy(self, on: bool) -> None:
        self.send_ranks({"cmd": "busy", "on": on})

    def _warmup(self) -> None:
        """_wait_and_warmup: poll /model_info (1 s before each try, 120 tries), POST /generate, then (status Up)
        POST /freeze_gc and the ready line. A failure logs the traceback and kills the tree. With
        --skip-server-warmup: status Up at once, then /freeze_gc and the ready line all the same."""
        a = self.args
        host = a.host
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        url = f"http://[{host}]:{a.port}" if ":" in host else f"http://{host}:{a.port}"
        headers = {"Content-Type": "application/json"}
        if a.api_key:
            headers["Authorization"] = f"Bearer {a.api_key}"
        if a.skip_server_warmup:
            self.loop.call_soon_threadsafe(self._set_ready)
            self._freeze_gc(url, headers)
            return
        error, last = None, "requests.exceptions.ConnectionError: connection refused"
        for _attempt in range(120):
            time.sleep(1.0 * self.scale)
            try:
                with urllib.request.urlopen(urllib.request.Request(url + "/model_info", headers=headers),
                                            timeout=5) as r:
                    if r.status == 200:
                        break
            except urllib.error.HTTPError as e:
                last = f"AssertionError: res=<Response [{e.code}]>, res.text={e.read().decode('utf-8', 'replace')!r}"
            except (urllib.error.URLError, OSError) as e:
                last = f"requests.exceptions.ConnectionError: {e}"
        else:                                           # never answered 200: the traceback of the last try
            log.error("Initialization failed. warmup error: " + tracebacks.warmup_failed(last, model_info=True))
            kill_tree_and_self(self.live_children())
            return
        self._warming = True
        body = json.dumps({"sampling_params": {"temperature": 0, "max_new_tokens": 8},
                           "text": "The capital city of France is"}).encode()
        try:
            res = urllib.request.urlopen(urllib.request.Request(url + "/generate", data=body, headers=headers),
                                         timeout=600)
            status = res.status
            res.read()
        except urllib.error.HTTPError as e:
            status = e.code
            error = e.read().decode("utf-8", "replace")
        except (urllib.error.URLError, OSError) as e:
            status, error = None, f"{type(e).__name__}: {e}"
        finally:
            self._warming = False
        if status != 200:
            log.error("Initialization failed. warmup error: " + tracebacks.warmup_failed(
                "AssertionError: " + (error or "")))
            kill_tree_and_self(self.live_children())
            return
        self.loop.call_soon_threadsafe(self._set_ready)
        self._freeze_gc(url, headers)

    def _freeze_gc(self, url: str, headers: Dict[str, str]) -> None:
        try:
            with urllib.request.urlopen(urllib.request.Request(url + "/freeze_gc", data=b"", headers=headers),
                                        timeout=10) as r:
                r.read()
        except (urllib.error.URLError, OSError):
            log.warning("post-warmup freeze_gc failed")
        log.info("The server is fired up and ready to roll!")
        p = self.p
        if self.decision.behaviour == "killed" and str(p.get("at")) == "ready":      # once ready and serving
            threading.Timer(float(p.get("delay_seconds") or 0) * self.scale, self.send_ranks,
                            args=({"cmd": "kill", "rank": p.get("rank", "all")},)).start()

    # --- dying while serving ----------------------------------------------------------------------------
    def _running_sigquit(self) -> None:
        """SignalHandler.running_phase_sigquit_handler: an event-loop callback; it blocks the loop."""
        log.error("SIGQUIT received. signum=None, frame=None. It usually means one child failed.")
        self._watchdog_stop.set()
        self._relay_peer_loss()
        self.dump_requests_before_crash()
        kill_tree_and_self(self.live_children())

    def _relay_peer_loss(self) -> None:
        """Fake wiring: a rank that lost its multi-node peer said so before its SIGQUIT; the other local
        ranks' collectives fail as well (each logs its own traceback and exits)."""
        lost, error = None, None
        for i, s in enumerate(self.rank_socks):
            try:
                r, _w, _x = select.select([s], [], [], 0)
                if r:
                    for line in s.recv(65536).split(b"\n"):
                        if line.startswith(b'{"peer_lost"'):
                            lost, error = i, json.loads(line).get("error")
            except OSError:
                continue
        if lost is None:
            return
        # the other local ranks receive the broadcast that global rank 0 sends
        self.send_ranks({"cmd": "crash", "phase": "peer_serve_recv", "rank": "all", "rank_exits": True,
                         "error": error}, ranks=[i for i in range(len(self.rank_socks)) if i != lost])

    def dump_requests_before_crash(self) -> None:
        """TokenizerManager.dump_requests_before_crash (without --crash-dump-folder): the crash diagnostics."""
        pyspy = env_bool("SGLANG_PYSPY_DUMP_BEFORE_CRASH", True)
        core = env_bool("SGLANG_CUDA_COREDUMP_BEFORE_CRASH", True)
        if not (pyspy or core):
            return
        if self.crash_dump_performed:
            log.info("SIGTERM/SIGQUIT/Exception triggered, but crash dump already performed, skipping.")
            return
        self.crash_dump_performed = True
        log.info("Sleeping 5 seconds before crash diagnostics to let GPU activity settle.")
        time.sleep(DIAG_SLEEP_SECONDS * self.scale)
        live = self.live_schedulers()
        if not live:
            log.error("No live scheduler processes found; skipping py-spy and CUDA coredump.")
            return
        if pyspy:
            for pid in live:
                for line in worker.pyspy_failed_lines(pid):
                    log.error(line)
        if core:
            if os.environ.get("CUDA_ENABLE_USER_TRIGGERED_COREDUMP") != "1":
                log.error("CUDA user-triggered coredump is not enabled. Set CUDA_ENABLE_USER_TRIGGERED_COREDUMP=1 "
                          "before CUDA initialization.")
            node = socket.gethostname()
            for pid in live:
                log.error(f"CUDA coredump pipe not found for PID {pid}: {os.getcwd().rstrip('/')}/corepipe.cuda."
                          f"{node}.{pid}. Ensure CUDA_ENABLE_USER_TRIGGERED_COREDUMP=1 was set before this process "
                          f"initialized CUDA.")
            wait = _env_float("SGLANG_CUDA_COREDUMP_BEFORE_CRASH_WAIT_SECS", 60.0)
            if wait > 0:
                log.info("Waiting %.1f seconds for CUDA coredumps before exiting." % wait)
                time.sleep(wait * self.scale)

    # --- stopping -----------------------------------------------------------------------------------------
    async def _uvicorn_shutdown(self) -> None:
        """uvicorn's Server.shutdown, then the lifespan's end and "Finished server process" (uvicorn/server.py)."""
        log.uvicorn("Shutting down")
        try:
            self._server.close()
        except Exception:                               # noqa: BLE001
            pass
        await self.http.shutdown()
        log.uvicorn("Waiting for application shutdown.")
        log.uvicorn("Application shutdown complete.")
        log.uvicorn(f"Finished server process [{os.getpid()}]")

    def _uvicorn_exit(self) -> None:
        """uvicorn's SIGTERM/SIGINT before the tokenizer manager took SIGTERM over: uvicorn shuts down, then
        launch_server.py's finally ends the children; exit 0."""
        if self.status == "shutting_down":
            return
        self.status = "shutting_down"
        self.loop.create_task(self._uvicorn_exit_async())

    async def _uvicorn_exit_async(self) -> None:
        await self._uvicorn_shutdown()
        self.killing = True
        self._watchdog_stop.set()
        kill_process_tree(self.live_children(), include_parent=False)
        os._exit(0)

    def _sigterm(self) -> None:
        """SignalHandler.sigterm_handler: only a flag; the sigterm watchdog does the rest."""
        log.warning("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
        self.gracefully_exit = True

    async def _sigterm_watchdog(self) -> None:
        tick = SIGTERM_TICK_SECONDS * self.scale
        while not self.gracefully_exit:
            await asyncio.sleep(tick)
        self.status = "shutting_down"
        while True:
            rids = list(self.engine.inflight)
            if self.unhealthy:
                log.error("Signal SIGTERM received while health check failed. Force exiting.")
                self.dump_requests_before_crash()       # blocks the loop, like the real
                break
            if env_bool("SGL_FORCE_SHUTDOWN", False):
                log.error("Signal SIGTERM received while force shutdown flag set. Force exiting.")
                break
            log.info(f"Gracefully exiting... Remaining number of requests {len(rids)}. "
                     f"Remaining requests remaining_rids={rids!r}.")
            if rids:
                await asyncio.sleep(tick)
            else:
                break
        self._watchdog_stop.set()                       # child exits are expected now
        self.killing = True
        self.send_ranks({"cmd": "shutdown"})            # ShutdownReq
        deadline = time.monotonic() + SCHEDULER_EXIT_TIMEOUT * self.scale
        while time.monotonic() < deadline and self.live_schedulers():
            await asyncio.sleep(0.05)
        stragglers = self.live_schedulers()
        if stragglers:
            log.warning(f"Schedulers still alive {SCHEDULER_EXIT_TIMEOUT}s after ShutdownReq, killing them before "
                        f"they released: {stragglers}")
        kill_process_tree(self.live_children(), include_parent=False)
        await self._uvicorn_shutdown()          # the stop hook sets uvicorn's should_exit (http_server.py:3008)
        kill_process_tree(self.live_children(), include_parent=False)      # launch_server.py's finally
        os._exit(0)

    # --- multi-node: nodes >= 1 ---------------------------------------------------------------------------
    def serve_dummy(self) -> None:
        """Node rank >= 1 (engine.py): no tokenizer, no API. launch_dummy_health_check_server in a background
        thread (uvicorn at log level warning: no start-up or access lines; GET /health and /health_generate ->
        200, anything else 404), then block_until_scheduler_exits, then launch_server.py's finally, exit 0."""
        p, a = self.p, self.args
        if p.get("ignore_sigterm"):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        else:
            signal.signal(signal.SIGTERM, self._member_sigterm)
        signal.signal(signal.SIGINT, self._member_sigint)
        threading.Thread(target=self._relay_shutdown, name="shutdown-relay", daemon=True).start()
        started = threading.Event()
        threading.Thread(target=self._dummy_thread, args=(started,), name="dummy-health", daemon=True).start()
        started.wait(10)
        log.info(f"Dummy health check server started in background thread at {a.host}:{a.port}")
        self.status = "ready"
        if self.decision.behaviour == "killed" and str(p.get("at")) == "ready":
            d = float(p.get("delay_seconds") or 0) * self.scale
            threading.Timer(d, self.send_ranks, args=({"cmd": "kill", "rank": p.get("rank", "all")},)).start()
        for pid in self.rank_pids:                      # block_until_scheduler_exits
            while self.child_code(pid) is None:
                time.sleep(0.05)
            log.error(f"Scheduler or DataParallelController {pid} terminated with {self.child_code(pid)}")
        kill_process_tree(self.live_children(), include_parent=False)
        os._exit(0)

    def _dummy_thread(self, started: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self.loop = loop
        srv = DummyHealthServer(self)
        try:
            self._server = loop.run_until_complete(asyncio.start_server(srv.handle, self.args.host, self.args.port,
                                                                        backlog=2048, reuse_address=True))
        except OSError as e:                            # uvicorn logs it; the thread ends, the node goes on
            log.uvicorn(f"[Errno {e.errno}] error while attempting to bind on address ({self.args.host!r}, "
                        f"{self.args.port}): {(e.strerror or str(e)).lower()}", level="ERROR")
            started.set()
            return
        started.set()
        loop.run_forever()

    def _member_sigterm(self, signum, frame) -> None:
        log.warning(f"SIGTERM received on node_rank {self.node_rank}; waiting for the rank-0 ShutdownReq broadcast "
                    f"to stop the schedulers.")

    def _member_sigint(self, signum, frame) -> None:
        """KeyboardInterrupt in block_until_scheduler_exits: launch_server.py's finally, then Python's own exit
        by SIGINT."""
        kill_process_tree(self.live_children(), include_parent=False)
        log.raw(tracebacks.keyboard_interrupt())
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)

    def _relay_shutdown(self) -> None:
        """Fake wiring: the first local rank received node 0's ShutdownReq broadcast; pass it to the others."""
        if not self.rank_socks:
            return
        s = self.rank_socks[0]
        buf = b""
        while True:
            try:
                data = s.recv(4096)
            except OSError:
                return
            if not data:
                return
            buf += data
            if b'"shutdown"' in buf:
                self.send_ranks({"cmd": "shutdown"}, ranks=list(range(1, len(self.rank_socks))))
                return


# What 0.5.23 logs as it resolves the MoE runner (srt/arg_groups/overrides.py:1528-1552, _moe_runner_fusion_disable)
MOE_FUSION_WARNINGS = dict(
    [(r, "LoRA MoE keeps shared experts separate for adapter attachment.")
     for r in ("lora_triton", "lora_cutedsl", "lora_marlin")]
    + [("flashinfer_cutedsl", "FlashInfer CuteDSL MoE is enabled. --disable-shared-experts-fusion is automatically set."),
       ("flashinfer_trtllm", "FlashInfer TRTLLM MoE is enabled. --disable-shared-experts-fusion is automatically set."),
       ("experimental_sgl_trtllm",
        "FlashInfer TRTLLM MoE is enabled. --disable-shared-experts-fusion is automatically set."),
       ("flashinfer_trtllm_routed",
        "FlashInfer TRTLLM routed MoE is enabled. --disable-shared-experts-fusion is automatically set.")])


def main(argv: List[str]) -> None:
    server_args = prepare_server_args(argv)     # argparse errors: exit 2; bad values: AssertionError traceback
    gpu_cfg = bh.gpu_config()
    arch = bh.detect_arch(gpu_cfg)
    ctx = {"arch": arch, "version": __version__, "gpu_name": gpu_cfg.get("name"), "gpu_count": gpu_cfg.get("count"),
           "model": server_args.model_path}
    decision = bh.decide(server_args.to_dict(), ctx)
    p = decision.params
    if p.get("ignore_sigterm"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    fusion = MOE_FUSION_WARNINGS.get(getattr(server_args, "moe_runner_backend", None))
    if fusion:
        log.warning(fusion)
    if getattr(server_args, "disable_cuda_graph", False):
        log.warning("\x1b[1;33m'--disable-cuda-graph' is deprecated and will be removed in a future release. Use "
                    "'--cuda-graph-backend-{decode,prefill}=disabled' instead.\x1b[0m")
    log.info(f"server_args={server_args.to_dict()!r}")
    for w in decision.warnings:
        log.warning("fake-sglang: " + w)
    if os.environ.get("FAKE_SGLANG_DEBUG"):
        log.info(f"fake-sglang: arch={arch} rule={decision.rule_name!r} (#{decision.rule_index} of "
                 f"{decision.source}) behaviour={decision.behaviour} params={json.dumps(p, default=str)}")
    app = App(server_args, decision, gpu_cfg)

    def launch_sigquit(signum, frame):
        log.error("Received sigquit from a child process. It usually means the child failed.")
        kill_tree_and_self(app.live_children())

    def launch_sigterm(signum, frame):
        """No handler in the real launch phase: SIGTERM ends the main process and nothing more; its children die of
        PR_SET_PDEATHSIG (utils/common.py:3432), or systemd kills what is left of the unit (seen on the real server:
        systemd's "Killing process N (sglang::schedul) with signal SIGKILL" lines after a stop during the load)."""
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGQUIT, launch_sigquit)
    if not p.get("ignore_sigterm"):
        signal.signal(signal.SIGTERM, launch_sigterm)
    app.spawn()
    app.wait_ready()
    if app.node_rank >= 1:
        app.serve_dummy()
    else:
        app.log_startup_timings()
        app.start_watchdog()
        app.serve()
