"""The lab's GPU, played inside the real SGLang 0.5.23 server (lab only; never part of the collection).

SGLang loads this module as a general plugin (entry point group ``sglang.srt.plugins``) in each of its
processes: the main process (HTTP server, tokenizer manager), every scheduler and the detokenizer. It is
inert unless the host is a lab host that runs the real server (``/etc/llmserve-lab/real-sglang.json``).

What it does, and nothing else:

* **main process, first**: SGLang's own argument resolution and checks (``ServerArgs.resolve_once``, then
  ``check_server_args``, as the launch path runs them) on the arguments as given, in a fork of the process
  whose platform probes (``sglang.srt.utils.common``: ``is_sm100_supported``, ``get_device_capability``, ...,
  which ``get_platform()`` reads too) answer for the arch of the host's fake GPUs (``/etc/fakegpu/config.json``,
  as the behaviour table reads it). A combination that 0.5.23 rejects on that GPU ends the server here, with
  SGLang's own traceback and exit status 1; one it rewrites logs SGLang's own warning. The fork's probes and
  imports die with it.
* **main process, then**: after the real parser has accepted the real argv, and before SGLang resolves it,
  the GPU-only choices are mapped to what runs on a CPU (``--device cpu``, the torch attention backend, no
  quantization, no CUDA graphs, automatic MoE / FP4 GEMM runners, a small KV cache, ``--sleep-on-idle``).
  The argv, ``/proc/PID/cmdline`` and the unit stay what the collection rendered; the values given are kept
  in ``LLMLAB_GIVEN_ARGS`` (inherited by the children) for the behaviour table.
* **each scheduler** (one per rank) is a GPU holder the way a real one is: it opens the GPU's device
  files and holds fake-GPU memory (``fakegpu.hold``) for its life.
* **the GPU's failures** come from the lab's behaviour table (``/etc/fake-sglang/behaviour.yml``, the same
  rules the fast fake server reads; first match wins), played at the real call sites so that SGLang's own
  code reports them: an exception in a forward (at init, load, the first forward, after N requests), a
  scheduler SIGKILLed (at start, at load, while serving), a forward that never returns (SGLang's own
  watchdog then fires), a broken kernel's output (NaN activations of the MLP / MoE layers: the real
  sampler then picks token 0, as on a GPU), and an OOM at KV-cache allocation with SGLang's own message.
"""
import copy
import importlib.util
import json
import logging
import os
import re
import signal
import sys
import time
import traceback

MARKER = "/etc/llmserve-lab/real-sglang.json"
LOG = logging.getLogger("llmlab_gpu")

# what the CPU runs instead of each GPU-only choice (dest name -> value); applied when the given value differs
CPU_MAP = {
    "device": "cpu",
    "attention_backend": "torch_native",
    "prefill_attention_backend": None,
    "decode_attention_backend": None,
    "quantization": None,
    "kv_cache_dtype": "auto",
    "moe_runner_backend": "auto",
    "fp4_gemm_runner_backend": "auto",
    "disable_cuda_graph": True,
    "sleep_on_idle": True,
    "enable_torch_compile": False,
}
MAX_TOTAL_TOKENS = 4096

_STATE = {"forwards": 0, "extends": 0, "decision": None, "holder": None}


def _marker():
    try:
        with open(MARKER, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _behaviour_module(cfg):
    """The behaviour-table reader of the lab (tests/lab/fake_sglang/sglang/_fake/behaviour.py), by file."""
    path = os.path.join(cfg["checkout"], "tests/lab/fake_sglang/sglang/_fake/behaviour.py")
    spec = importlib.util.spec_from_file_location("llmlab_behaviour", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["llmlab_behaviour"] = mod    # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def _fakegpu(cfg):
    fakes = os.path.join(cfg["checkout"], "tests/lab/fakes")
    if fakes not in sys.path:
        sys.path.append(fakes)
    import fakegpu  # pylint: disable=import-outside-toplevel
    return fakegpu


def _caller_locals(name):
    f = sys._getframe(1)  # pylint: disable=protected-access
    while f is not None:
        if f.f_code.co_name == name:
            return f.f_locals
        f = f.f_back
    return None


# --------------------------------------------------------------------------- main process
def _args_dict(server_args):
    import msgspec  # pylint: disable=import-outside-toplevel
    out = {}
    for fld in msgspec.structs.fields(type(server_args)):
        v = getattr(server_args, fld.name, None)
        if v is None or isinstance(v, (str, int, float, bool)):
            out[fld.name] = v
        elif isinstance(v, (list, tuple)) and all(isinstance(x, (str, int, float, bool)) for x in v):
            out[fld.name] = list(v)
    return out


def _map_to_cpu(server_args):
    given = _args_dict(server_args)
    os.environ["LLMLAB_GIVEN_ARGS"] = json.dumps(given)
    changed = []
    for dest, value in CPU_MAP.items():
        if hasattr(server_args, dest) and getattr(server_args, dest) != value:
            changed.append("%s=%r->%r" % (dest, getattr(server_args, dest), value))
            setattr(server_args, dest, value)
    mtt = getattr(server_args, "max_total_tokens", None)
    if mtt is None or mtt > MAX_TOTAL_TOKENS:
        server_args.max_total_tokens = MAX_TOTAL_TOKENS
        changed.append("max_total_tokens=%r->%d" % (mtt, MAX_TOTAL_TOKENS))
    # CPU ranks on this node: bind each to a core of its own (round robin over the host's cores)
    tp = int(given.get("tp_size") or 1)
    nnodes = int(given.get("nnodes") or 1)
    per_node = max(1, tp // max(1, nnodes))
    ncpu = os.cpu_count() or 1
    first = int(given.get("node_rank") or 0) * per_node
    os.environ.setdefault("SGLANG_CPU_OMP_THREADS_BIND",
                          "|".join(str((first + i) % ncpu) for i in range(per_node)))
    LOG.info("llmlab_gpu: GPU-only choices run on the CPU: %s", ", ".join(changed) or "none")


def capability(arch):
    """``sm120`` / ``sm100`` / ``sm90`` / ``sm89`` -> (12, 0) / (10, 0) / (9, 0) / (8, 9); None for anything else."""
    found = re.match(r"^sm_?(\d+)(\d)$", str(arch or "").strip().lower())
    return (int(found.group(1)), int(found.group(2))) if found else None


def arch_probes(arch):
    """What SGLang's platform probes (``sglang.srt.utils.common``) answer on a CUDA 13 host with a GPU of this arch:
    probe name -> answer; None when the arch is unknown."""
    cap = capability(arch)
    if cap is None:
        return None
    major = cap[0]
    return {
        "is_cuda": True, "is_cuda_alike": True, "is_cpu": False, "cpu_has_amx_support": False,
        "is_flashinfer_available": True, "get_device_capability": cap, "get_device_sm": major * 10 + cap[1],
        "is_sm80_supported": major == 8, "is_ampere_with_cuda_12_3": major == 8,
        "is_sm90_supported": major == 9, "is_hopper_with_cuda_12_3": major == 9,
        "is_sm100_supported": major == 10, "is_sm110_supported": major == 11,
        "is_sm100_or_sm110_supported": major in (10, 11), "is_sm120_supported": major == 12,
        "is_blackwell_supported": major in (10, 11, 12), "is_blackwell": major in (10, 11, 12),
        "is_sm120": cap == (12, 0), "is_sm121": cap == (12, 1),
    }


def _play_arch(probes):
    """Every SGLang module's name for a probe answers for the arch, and so does torch's device capability."""
    import torch  # pylint: disable=import-outside-toplevel
    from sglang.srt.utils import common  # pylint: disable=import-outside-toplevel
    for name, answer in probes.items():
        probe = getattr(common, name, None)
        if probe is None:
            continue
        for mod in list(sys.modules.values()):
            if getattr(mod, "__name__", "").startswith("sglang") and vars(mod).get(name) is probe:
                setattr(mod, name, lambda *_a, _answer=answer, **_kw: _answer)
    setattr(torch.cuda, "get_device_capability", lambda *_a, _cap=probes["get_device_capability"], **_kw: _cap)


def _check_as_given(server_args, resolve, arch):
    """SGLang's own resolution and checks of the arguments as given, on a GPU of ``arch``, in a fork; what they
    reject ends this process with status 1 after SGLang's traceback, as it ends a server on that GPU."""
    probes = arch_probes(arch)
    if probes is None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _play_arch(probes)
            given = copy.copy(server_args)
            if given.device is None:
                given.device = "cuda"       # what SGLang picks on a GPU host
            resolve(given)
            given.check_server_args()
            code = 0
        except BaseException:  # pylint: disable=broad-except
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)  # pylint: disable=protected-access
    _pid, status = os.waitpid(pid, 0)
    if status:
        if os.WIFSIGNALED(status):
            LOG.error("llmlab_gpu: the check of the given arguments ended by signal %d", os.WTERMSIG(status))
        raise SystemExit(1)
    LOG.info("llmlab_gpu: SGLang's argument checks passed for %s", arch)


def _host_arch(cfg):
    bh = _behaviour_module(cfg)
    return bh.detect_arch(bh.gpu_config())


def _patch_server_args(cfg):
    from sglang.srt import server_args as sa  # pylint: disable=import-outside-toplevel
    cls = sa.ServerArgs
    if getattr(cls.resolve_once, "_llmlab", False):
        return
    original = cls.resolve_once

    def resolve_once(self):
        if not getattr(self, "_resolution_finished", False) and "LLMLAB_GIVEN_ARGS" not in os.environ:
            _check_as_given(self, original, _host_arch(cfg))
            _map_to_cpu(self)
        return original(self)

    resolve_once._llmlab = True  # pylint: disable=protected-access
    cls.resolve_once = resolve_once


# --------------------------------------------------------------------------- schedulers
def _decide(cfg, bh):
    given = json.loads(os.environ.get("LLMLAB_GIVEN_ARGS", "{}"))
    gcfg = bh.gpu_config()
    version = None
    try:
        from sglang.version import __version__ as version  # pylint: disable=import-outside-toplevel
    except ImportError:
        pass
    ctx = {"arch": bh.detect_arch(gcfg), "version": version, "gpu_name": gcfg.get("name"),
           "gpu_count": gcfg.get("count"), "model": given.get("model_path")}
    return bh.decide(given, ctx, cfg.get("behaviour")), given, gcfg


def _sigkill(why):
    LOG.debug("llmlab_gpu: SIGKILL (%s)", why)
    os.kill(os.getpid(), signal.SIGKILL)


def _hang(why):
    LOG.debug("llmlab_gpu: never returns (%s)", why)
    while True:
        time.sleep(3600)


def _trap_weights(action):
    """A fault during the load: SGLang's own load has begun ("Load weight begin" logged, its weight bar drawn at
    0 % without a newline) and ``action`` strikes as the first shard's weights arrive. 0.5.23 reads safetensors
    through ``buffered_multi_thread_safetensors_weights_iterator`` (model_loader/loader.py:699), named in loader's
    own namespace."""
    from sglang.srt.model_loader import loader  # pylint: disable=import-outside-toplevel
    orig = loader.buffered_multi_thread_safetensors_weights_iterator

    def iterator(*a, **kw):
        for item in orig(*a, **kw):
            action()
            yield item

    loader.buffered_multi_thread_safetensors_weights_iterator = iterator


def _gpu_error(params):
    """The GPU kernel's exception, raised from inside the real call (its class and text from the table: ``CLASS:
    text`` with CLASS RuntimeError, ValueError or torch.AcceleratorError, any other text as a RuntimeError's;
    ``{site}`` stands for this server's site-packages directory, where the real kernel's path names its file)."""
    import sysconfig  # pylint: disable=import-outside-toplevel
    msg = str(params.get("error") or "torch.AcceleratorError: CUDA error: an illegal memory access was encountered")
    msg = msg.replace("{site}", sysconfig.get_paths()["purelib"])
    first, _sep, rest = msg.partition(":")
    kind = first.strip()
    if kind == "torch.AcceleratorError":
        import torch  # pylint: disable=import-outside-toplevel
        return torch.AcceleratorError(rest.strip())
    if kind in ("RuntimeError", "ValueError"):
        return {"RuntimeError": RuntimeError, "ValueError": ValueError}[kind](rest.strip())
    return RuntimeError(msg)


def _nan_layers(model):
    """Make the MLP / MoE layers (what a MoE runner or FP4 GEMM backend computes) return NaN activations."""
    import torch  # pylint: disable=import-outside-toplevel
    wrapped = 0
    for _name, mod in model.named_modules():
        cname = type(mod).__name__
        if not (cname.endswith("MLP") or "MoE" in cname) or getattr(mod, "_llmlab_nan", False):
            continue
        orig = mod.forward

        def forward(*a, _orig=orig, **kw):
            out = _orig(*a, **kw)
            if isinstance(out, torch.Tensor):
                return torch.full_like(out, float("nan"))
            if isinstance(out, tuple) and out and isinstance(out[0], torch.Tensor):
                return (torch.full_like(out[0], float("nan")),) + tuple(out[1:])
            return out

        mod.forward = forward
        mod._llmlab_nan = True  # pylint: disable=protected-access
        wrapped += 1
    return wrapped


def _install_faults(decision):
    from sglang.srt.model_executor import model_runner as mr  # pylint: disable=import-outside-toplevel
    beh, p = decision.behaviour, decision.params
    runner = mr.ModelRunner
    when = p.get("when") or "first_forward"
    at = p.get("at") or ("start" if beh == "killed" else "first_forward")
    if beh == "nan":
        at = "first_forward"
    requests = int(p.get("requests") or 0)

    orig_load = runner.load_model

    def load_fault():
        time.sleep(float(p.get("delay_seconds") or 0))
        if beh == "crash":
            raise _gpu_error(p)
        if beh == "killed":
            _sigkill("at load")
        _hang("at load")

    def load_model(self, *a, **kw):
        if (beh in ("killed", "hang") and at == "load") or (beh == "crash" and when == "load"):
            _trap_weights(load_fault)
        busy = float(p.get("silent_busy_seconds") or 0)
        if busy:
            # a load that works and prints nothing (a tqdm bar without newline, a first start's JIT compile)
            end = time.monotonic() + busy
            while time.monotonic() < end:
                sum(i * i for i in range(10000))
        out = orig_load(self, *a, **kw)
        if beh in ("garbage", "nan"):
            _nan_layers(self.model)
        return out

    orig_forward = runner.forward

    def forward(self, forward_batch, *a, **kw):
        _STATE["forwards"] += 1
        is_extend = forward_batch.forward_mode.is_extend()
        if is_extend:
            _STATE["extends"] += 1
        # the first forward is the warm-up request's prefill (no CUDA graph capture on the CPU)
        n = _STATE["extends"]
        due = is_extend and ((when == "first_forward" and n == 1) or (when == "after_requests" and n == requests + 2))
        due_at = is_extend and ((at == "first_forward" and n == 1) or (at in ("ready", "after_requests") and n == requests + 2))
        if beh == "crash" and when in ("first_forward", "after_requests") and due:
            raise _gpu_error(p)
        if beh == "killed" and due_at:
            _sigkill("at forward %d" % n)
        if beh in ("hang", "watchdog") and (due_at if beh == "hang" else due):
            _hang("forward %d" % n)
        return orig_forward(self, forward_batch, *a, **kw)

    runner.load_model = load_model
    runner.forward = forward

    if beh == "crash" and when == "init":
        from sglang.srt.managers import scheduler as sch  # pylint: disable=import-outside-toplevel
        orig_init = sch.Scheduler.__init__

        def init(self, *a, **kw):
            raise _gpu_error(p)

        init.__wrapped__ = orig_init
        sch.Scheduler.__init__ = init


def _scheduler_start(cfg, loc):
    bh = _behaviour_module(cfg)
    decision, given, gcfg = _decide(cfg, bh)
    _STATE["decision"] = decision
    for w in decision.warnings:
        LOG.warning("llmlab_gpu: %s", w)
    gpu_id = int(loc.get("gpu_id") or 0)
    frac = decision.params.get("gpu_mem_fraction") or given.get("mem_fraction_static") or 0.85
    total = int(gcfg.get("memory_total_mib") or 0) - int(gcfg.get("memory_reserved_mib") or 0)
    mib = max(1, int(total * float(frac))) if total else 1024
    # the name SGLang gives the process a moment later (setproctitle), as the driver will show it
    tp = int(given.get("tp_size") or 1)
    name = "sglang::scheduler" + ("_TP%d" % int(loc.get("tp_rank") or 0) if tp > 1 else "")
    # gpu_id is the CUDA ordinal; the driver maps it through CUDA_VISIBLE_DEVICES to the physical GPU
    fakegpu = _fakegpu(cfg)
    _STATE["holder"] = fakegpu.hold({fakegpu.physical_gpu(gpu_id): mib}, name=name[:15])
    if decision.behaviour == "killed" and (decision.params.get("at") or "start") == "start":
        time.sleep(float(decision.params.get("delay_seconds") or 0))
        _sigkill("at start")
    _install_faults(decision)


def register():
    """SGLang's general-plugin entry point: runs early in every SGLang process."""
    cfg = _marker()
    if not cfg:
        return
    loc = _caller_locals("run_scheduler_process")
    if loc is not None:
        _scheduler_start(cfg, loc)
    else:
        _patch_server_args(cfg)
