"""Main process of the fake SGLang: parse args, pick the behaviour, fork the TP ranks and the
detokenizer, wait for them, serve HTTP, warm up, and die like the real one."""
from __future__ import annotations

import asyncio
import glob
import json
import os
import random
import select
import signal
import socket
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional

from sglang._fake import behaviour as bh
from sglang._fake import dist, log, textgen, worker
from sglang._fake.engine import Engine, Req
from sglang._fake.http import DummyHealthServer, HttpServer
from sglang.srt.server_args import ServerArgs, prepare_server_args
from sglang.version import __version__


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, "") or default)
    except ValueError:
        return default


def _model_config(path: str) -> Dict[str, Any]:
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def kill_tree_and_self(children: List[int]) -> None:
    """kill_process_tree(os.getpid()): SIGKILL the children, then itself last."""
    for pid in children:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(5)
    os._exit(137)


class App:
    def __init__(self, args: ServerArgs, decision: bh.Decision, gpu_cfg: Dict[str, Any]):
        self.args, self.decision, self.gpu_cfg = args, decision, gpu_cfg
        self.p = decision.params
        self.start_time = time.time()
        self.children: List[int] = []
        self.rank_socks: List[socket.socket] = []
        self.status = "launching"          # launching -> starting (HTTP up) -> ready -> shutting_down
        self.engine: Optional[Engine] = None
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.mcfg = _model_config(args.model_path)
        self.scale = _env_float("FAKE_SGLANG_TIME_SCALE", 1.0)
        self.context_len = int(args.context_length or self.mcfg.get("max_position_embeddings") or 32768)
        self.answers = "ok"
        if decision.behaviour == "garbage":
            self.answers = "garbage"
        if args.load_format == "dummy":
            self.answers = "random"
        self.fail_next_warmup = bool(self.p.get("fail_warmup"))
        self.failed = False
        self.killing = False
        self.health_timeout = _env_float("SGLANG_HEALTH_CHECK_TIMEOUT", 20.0)
        # multi-node: this node runs TP ranks [tp_base, tp_base + local_tp) of tp_size, on its GPUs 0..local_tp-1
        self.nnodes = max(1, int(args.nnodes or 1))
        self.node_rank = int(args.node_rank or 0) if self.nnodes > 1 else 0
        self.local_tp = int(args.tp_size or 1) // self.nnodes
        self.tp_base = self.node_rank * self.local_tp
        self.plan = self.make_plan()

    # --- the launch plan ----------------------------------------------------------------------------
    def model_type(self) -> str:
        return self.p.get("model_type") or (self.mcfg.get("architectures") or ["Qwen3MoeForCausalLM"])[0]

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
        if cvd:
            try:
                phys = [int(x) for x in cvd.split(",") if x.strip() != ""]
            except ValueError:
                pass
        gpu_ids = []
        for r in range(tp):
            logical = a.base_gpu_id + r * a.gpu_id_step
            gpu_ids.append(phys[logical] if logical < len(phys) else 10_000 + logical)
        total_mib = int(self.gpu_cfg.get("memory_total_mib", 97887) if self.gpu_cfg else 97887)
        frac = p.get("gpu_mem_fraction") or a.mem_fraction_static or 0.85
        hold = int(total_mib * float(frac))
        plan = {
            "parent_pid": os.getpid(), "model_type": self.model_type(), "load_seconds": load,
            "capture_seconds": capture, "shards": int(shards), "gpu_ids": gpu_ids, "gpu_count": count,
            "gpu_total_mib": total_mib, "hold_mib": hold, "weights_mib": int(hold * 0.6),
            "kv_bytes_per_token": 70 * 1024, "disable_cuda_graph": bool(a.disable_cuda_graph),
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
                  "traceback": p.get("traceback"), "delay_seconds": float(p.get("delay_seconds") or 0) * self.scale}
        if beh == "crash":
            if when in ("load", "init"):
                plan["launch_failure"] = {"kind": "crash", "point": "load" if when == "load" else "load_begin",
                                          "phase": when, "load_fraction": p.get("load_fraction", 0.5)
                                          if when == "load" else None, **common}
            elif when == "capture" or (when == "first_forward" and not a.disable_cuda_graph):
                plan["launch_failure"] = {"kind": "crash", "point": "capture", "phase": "capture", **common}
        elif beh == "hang" and at in ("init", "load", "capture", "start"):
            point = {"init": "load_begin", "start": "load_begin", "load": "load", "capture": "capture"}[at]
            plan["launch_failure"] = {"kind": "hang", "point": point, "phase": at,
                                      "load_fraction": p.get("load_fraction", 0.5) if at == "load" else None,
                                      "rank": p.get("rank", "all")}
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
                  "traceback": p.get("traceback"), "delay_seconds": float(p.get("delay_seconds") or 0) * self.scale}
        if beh == "crash":
            self.send_ranks({"cmd": "crash", "phase": "forward", **common})
        elif beh == "nan":
            if p.get("nan_crash", True):
                self.send_ranks({"cmd": "crash", "phase": "sample", **common,
                                 "pre_log": "Detected errors during sampling! NaN in the logits."})
            else:
                self.failed = False                        # keeps serving, token 0 ("!") forever
                self.answers = "nan"
                self._install_nan_warning()
                return True
        elif beh == "watchdog":
            wt = p.get("watchdog_timeout") or self.args.watchdog_timeout or 300
            self.send_ranks({"cmd": "watchdog", "timeout": float(wt) * self.scale, "rank": p.get("rank", 0),
                             "grace": float(p.get("watchdog_grace_seconds", 5.0)) * self.scale})
        elif beh == "killed":
            d = float(p.get("delay_seconds") or 0) * self.scale
            self.loop.call_later(d, kill_tree_and_self, self.children)
        return False

    ready_client_base: Optional[int] = None

    def _install_nan_warning(self) -> None:
        last = [0.0]

        def warn() -> None:
            now = time.monotonic()
            if now - last[0] > 1.0:
                last[0] = now
                self.send_ranks({"cmd": "warn", "msg": "Detected errors during sampling! NaN in the logits.",
                                 "rank": "all"})
        self.engine.nan_warn = warn

    def send_ranks(self, cmd: Dict[str, Any]) -> None:
        data = (json.dumps(cmd) + "\n").encode()
        for s in self.rank_socks:
            try:
                s.sendall(data)
            except OSError:
                pass

    def new_req(self, prompt: str, n_prompt: int, *, chat: bool, temperature: float, max_new: int,
                ignore_eos: bool, on_token=None, kind: str = "gen", client: bool = True) -> Req:
        ans = textgen.make_answer(prompt or "", chat=chat, temperature=temperature, mode=self.answers,
                                  ignore_eos=ignore_eos, garbage_text=str(self.p.get("garbage_text") or "!"))
        return Req(ans, max_new, n_prompt, kind, on_token, client=client and threading.current_thread()
                   is threading.main_thread() and not getattr(self, "_warming", False))

    # --- endpoints' data ----------------------------------------------------------------------------
    def model_info(self) -> Dict[str, Any]:
        a = self.args
        return {"model_path": a.model_path, "tokenizer_path": a.tokenizer_path, "is_generation": True,
                "preferred_sampling_params": a.preferred_sampling_params, "weight_version": "default",
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

    async def health_check(self) -> bool:
        if self.status != "ready":
            return False
        r = Req(textgen.make_answer("health", chat=False, temperature=0, mode=self.answers, ignore_eos=True),
                1, 1, "health", None, client=False)
        tic = time.time()
        self.engine.submit(r)
        try:
            await asyncio.wait_for(asyncio.shield(r.done), self.health_timeout)
        except asyncio.TimeoutError:
            self.engine.abort(r)
            log.error(f"Health check failed. Server couldn't get a response from detokenizer for last "
                      f"{_num(self.health_timeout)} seconds. tic start time: {tic:.2f}. "
                      f"last_heartbeat time: {tic:.2f}")
            return False
        return self.status == "ready"

    # --- launch ---------------------------------------------------------------------------------------
    def spawn(self) -> None:
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
        self.detok_sock = parent_s

    def wait_ready(self) -> None:
        """Block until every rank said ready; SIGQUIT (a failing rank) interrupts via its handler."""
        p = self.p
        kill_at = None
        if self.decision.behaviour == "killed" and str(p.get("at") or "") in ("load", "capture"):
            base = self.plan["load_seconds"] * float(p.get("load_fraction", 0.5))
            if str(p.get("at")) == "capture":
                base = self.plan["load_seconds"] + 0.1
            d = p.get("delay_seconds")
            kill_at = time.monotonic() + (float(d) * self.scale if d is not None else base)
        pending = {s.fileno(): (i, s) for i, s in enumerate(self.rank_socks)}
        bufs: Dict[int, bytes] = {}
        while pending:
            timeout = None if kill_at is None else max(0.0, kill_at - time.monotonic())
            r, _w, _x = select.select(list(pending), [], [], timeout)
            if not r and kill_at is not None and time.monotonic() >= kill_at:
                kill_tree_and_self(self.children)
            for fd in r:
                i, s = pending[fd]
                data = s.recv(4096)
                if not data:
                    log.error(f"Rank {i} scheduler is dead. Please check if there are relevant logs.")
                    code = self._reap(self.children[i])
                    log.error(f"Exit code: {code}")
                    for pid in self.children:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    sys.stderr.write("Traceback (most recent call last):\n  File \"" + __file__ +
                                     "\", line 1, in _wait_for_scheduler_ready\nEOFError\n")
                    sys.stderr.flush()
                    os._exit(1)
                bufs[fd] = bufs.get(fd, b"") + data
                if b"\n" in bufs[fd]:
                    del pending[fd]

    def _reap(self, pid: int) -> Any:
        for _attempt in range(50):
            try:
                wpid, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                return None
            if wpid:
                return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            time.sleep(0.02)
        return None

    # --- serving ----------------------------------------------------------------------------------------
    def serve(self) -> None:
        self.loop = loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        p = self.p
        self.engine = Engine(loop, float(p["per_stream_tok_s"]), float(p["total_tok_s"]), float(p["prefill_tok_s"]),
                             self.args.decode_log_interval, on_forward=self.on_forward, on_busy=self._busy)
        srv = HttpServer(self)
        loop.add_signal_handler(signal.SIGQUIT, self._running_sigquit)
        loop.add_signal_handler(signal.SIGCHLD, self._sigchld)
        if p.get("ignore_sigterm"):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        else:
            loop.add_signal_handler(signal.SIGTERM, self._sigterm)
            loop.add_signal_handler(signal.SIGINT, self._sigterm)
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
        if self.decision.behaviour == "killed" and str(p.get("at")) == "ready":
            loop.call_later(float(p.get("delay_seconds") or 0) * self.scale, kill_tree_and_self, self.children)
        if self.args.skip_server_warmup:
            self._set_ready()
        else:
            threading.Thread(target=self._warmup, name="warmup", daemon=True).start()
        loop.run_forever()

    def _bind_failed(self, e: OSError) -> None:
        log.uvicorn(f"[Errno {e.errno}] error while attempting to bind on address ({self.args.host!r}, "
                    f"{self.args.port}): {(e.strerror or str(e)).lower()}", level="ERROR")
        self.kill_children()
        os._exit(1)

    def kill_children(self) -> None:
        for pid in self.children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def serve_dummy(self) -> None:
        """Node rank >= 1: launch_dummy_health_check_server(host, port, enable_metrics): uvicorn at log level
        warning (no startup or access lines), GET /health and /health_generate -> 200, anything else 404."""
        self.loop = loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        p, a = self.p, self.args
        log.info(f"Starting dummy health check server at {a.host}:{a.port}")
        if p.get("ignore_sigterm"):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        else:
            loop.add_signal_handler(signal.SIGTERM, self._dummy_stop)
            loop.add_signal_handler(signal.SIGINT, self._dummy_stop)
        srv = DummyHealthServer(self)
        try:
            self._server = loop.run_until_complete(asyncio.start_server(srv.handle, a.host, a.port, backlog=2048,
                                                                        reuse_address=True))
        except OSError as e:
            self._bind_failed(e)
        self.status = "ready"
        if self.decision.behaviour == "killed" and str(p.get("at")) == "ready":
            loop.call_later(float(p.get("delay_seconds") or 0) * self.scale, kill_tree_and_self, self.children)
        loop.run_forever()

    def _dummy_stop(self) -> None:
        self.killing = True
        self.kill_children()
        os._exit(0)

    def _set_ready(self) -> None:
        self.ready_client_base = self.engine.client_requests
        self.status = "ready"

    def _busy(self, on: bool) -> None:
        self.send_ranks({"cmd": "busy", "on": on})

    def _warmup(self) -> None:
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
        try:
            for _attempt in range(120):
                try:
                    with urllib.request.urlopen(urllib.request.Request(url + "/get_model_info", headers=headers),
                                                timeout=5) as r:
                        if r.status == 200:
                            break
                except (urllib.error.URLError, OSError):
                    time.sleep(1)
            self._warming = True
            body = json.dumps({"text": "The capital city of France is",
                               "sampling_params": {"temperature": 0, "max_new_tokens": 8}}).encode()
            try:
                res = urllib.request.urlopen(urllib.request.Request(url + "/generate", data=body, headers=headers),
                                             timeout=600)
                status = res.status
                res.read()
            except urllib.error.HTTPError as e:
                status = e.code
            finally:
                self._warming = False
            assert status == 200, f"<Response [{status}]>"
        except Exception:                               # noqa: BLE001
            tb = traceback.format_exc()
            log.error(f"Initialization failed. warmup error: {tb}")
            kill_tree_and_self(self.children)
            return
        self.loop.call_soon_threadsafe(self._set_ready)
        time.sleep(0.01)
        log.info("The server is fired up and ready to roll!")

    def _running_sigquit(self) -> None:
        f = sys._getframe()
        log.error(f"SIGQUIT received. signum=3, frame={f!r}. It usually means one child failed.")
        kill_tree_and_self(self.children)

    def _sigchld(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if status != 0 and not self.killing:
                log.warning(f"Child process unexpectedly failed with exitcode={status}. pid={pid}")
                if pid in self.children:
                    self.engine.stall()               # the batch cannot go on without that rank

    def _sigterm(self) -> None:
        if self.status == "shutting_down":
            return
        self.status = "shutting_down"
        log.uvicorn("Shutting down")
        self.loop.create_task(self._drain())

    async def _drain(self) -> None:
        last = 0.0
        while self.engine.pending > 0:
            if time.monotonic() - last >= 5:
                last = time.monotonic()
                log.info(f"Gracefully exiting... Remaining number of requests {self.engine.pending}. "
                         f"Remaining requests remaining_rids=[...].")
            await asyncio.sleep(0.1)
        self._server.close()
        log.uvicorn("Waiting for application shutdown.")
        log.uvicorn("Application shutdown complete.")
        log.uvicorn(f"Finished server process [{os.getpid()}]")
        self.killing = True
        for pid in self.children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os._exit(0)


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


def main(argv: List[str]) -> None:
    server_args = prepare_server_args(argv)     # argparse errors: exit 2; bad values: AssertionError traceback
    gpu_cfg = bh.gpu_config()
    arch = bh.detect_arch(gpu_cfg)
    ctx = {"arch": arch, "version": __version__, "gpu_name": gpu_cfg.get("name"), "gpu_count": gpu_cfg.get("count"),
           "model": server_args.model_path}
    decision = bh.decide(server_args.to_dict(), ctx)
    p = decision.params
    scale = _env_float("FAKE_SGLANG_TIME_SCALE", 1.0)
    if p.get("ignore_sigterm"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if decision.behaviour == "killed" and str(p.get("at") or "start") == "start":
        time.sleep(float(p.get("delay_seconds") or 0) * scale)
        os.kill(os.getpid(), signal.SIGKILL)         # e.g. the OOM killer: nothing in the log
    log.info(f"server_args={server_args!r}")
    for w in decision.warnings:
        log.warning("fake-sglang: " + w)
    if os.environ.get("FAKE_SGLANG_DEBUG"):
        log.info(f"fake-sglang: arch={arch} rule={decision.rule_name!r} (#{decision.rule_index} of "
                 f"{decision.source}) behaviour={decision.behaviour} params={json.dumps(p, default=str)}")
    app = App(server_args, decision, gpu_cfg)

    def launch_sigquit(signum, frame):
        log.error("Received sigquit from a child process. It usually means the child failed.")
        kill_tree_and_self(app.children)

    def launch_sigterm(signum, frame):
        for pid in app.children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
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
        app.serve()
