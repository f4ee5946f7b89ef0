"""Realistic tracebacks of a scheduler (TP worker) failure, per phase: sglang's own frames for the phase,
then the rule's kernel frames (``frames`` param, data), then the error line (``error`` param)."""
from __future__ import annotations

import sys
from typing import List, Optional, Tuple

SITE = f"{sys.prefix}/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"

Frame = Tuple[str, int, str, str]   # (path under site-packages, line, function, code)

_SCHED = "sglang/srt/managers/scheduler.py"
_RUNNER = "sglang/srt/model_executor/model_runner.py"
_CG = "sglang/srt/model_executor/cuda_graph_runner.py"

INIT_HEAD: List[Frame] = [
    (_SCHED, 3186, "run_scheduler_process", "scheduler = Scheduler("),
    (_SCHED, 364, "__init__", "self.init_model_worker()"),
    (_SCHED, 561, "init_model_worker", "self.tp_worker = TpModelWorker("),
    ("sglang/srt/managers/tp_worker.py", 247, "__init__", "self._model_runner = ModelRunner("),
    (_RUNNER, 389, "__init__", "self.initialize(min_per_gpu_memory)"),
]
LOAD_HEAD: List[Frame] = INIT_HEAD + [
    (_RUNNER, 487, "initialize", "self.load_model()"),
    (_RUNNER, 1012, "load_model", "self.model = get_model("),
    ("sglang/srt/model_loader/__init__.py", 28, "get_model", "return loader.load_model("),
    ("sglang/srt/model_loader/loader.py", 671, "load_model", "self.load_weights_and_postprocess("),
    ("sglang/srt/model_loader/loader.py", 683, "load_weights_and_postprocess", "model.load_weights(weights)"),
]
CAPTURE_HEAD: List[Frame] = INIT_HEAD + [
    (_RUNNER, 612, "initialize", "self.init_device_graphs()"),
    (_RUNNER, 2254, "init_device_graphs", "self.graph_runner = graph_runners[self.device](self)"),
    (_CG, 401, "__init__", "self.capture()"),
    (_CG, 540, "capture", ") = self.capture_one_batch_size(bs, forward, stream_idx)"),
    (_CG, 742, "capture_one_batch_size", "run_once()"),
    (_CG, 729, "run_once", "logits_output_or_pp_proxy_tensors = forward("),
]
FORWARD_HEAD: List[Frame] = [
    (_SCHED, 3205, "run_scheduler_process", "scheduler.event_loop_overlap()"),
    ("torch/utils/_contextlib.py", 120, "decorate_context", "return func(*args, **kwargs)"),
    (_SCHED, 1120, "event_loop_overlap", "batch_result = self.run_batch(batch)"),
    (_SCHED, 2412, "run_batch", "batch_result = self.model_worker.forward_batch_generation("),
    ("sglang/srt/managers/tp_worker.py", 436, "forward_batch_generation", "out = self.model_runner.forward("),
    (_RUNNER, 2605, "forward", "output = self._forward_raw("),
    (_RUNNER, 2680, "_forward_raw", "ret = self.forward_extend("),
    (_RUNNER, 2531, "forward_extend", "return self.model.forward("),
]
# 0.5.23 with SGLANG_ENABLE_NAN_LOGITS_CHECK: Sampler.forward's maybe_detect_nan (utils/async_probe.py) fires a
# Triton device assert; the error surfaces at the next sync, processing the batch's result
_EVENT_LOOP_0523: List[Frame] = [
    (_SCHED, 6368, "run_scheduler_process", "scheduler.run_event_loop()"),
    (_SCHED, 2010, "run_event_loop", "dispatch_event_loop(self)"),
    (_SCHED, 6215, "dispatch_event_loop", "return _dispatch_event_loop_once(scheduler)"),
    (_SCHED, 6231, "_dispatch_event_loop_once", "scheduler.event_loop_overlap()"),
    ("torch/utils/_contextlib.py", 124, "decorate_context", "return func(*args, **kwargs)"),
]
NAN_ASSERT_HEAD: List[Frame] = _EVENT_LOOP_0523 + [
    (_SCHED, 2120, "event_loop_overlap", "pop_and_process()"),
    (_SCHED, 2071, "pop_and_process", "self.process_batch_result(tmp_batch, tmp_result)"),
    (_SCHED, 5099, "process_batch_result", "self.batch_result_processor.process_batch_result_prefill(batch, result)"),
    ("sglang/srt/managers/scheduler_components/batch_result_processor.py", 268, "process_batch_result_prefill",
     "result.copy_done.synchronize()"),
    ("torch/cuda/streams.py", 231, "synchronize", "super().synchronize()"),
]
NAN_MESSAGE = "NaN detected! sampler: next_token_logits"


def cuda_error(text: str, name: str, kernel_fault: bool = True) -> str:
    """torch 2.14.1's exception for a failed CUDA call (c10_cuda_check_implementation in torch/lib/libc10_cuda.so,
    the class from libtorch_python.so): "CUDA error: " and cudaGetErrorString's ``text``, get_cuda_error_help's line
    naming cudaGetErrorName's ``name``, then for a kernel fault (illegal address or instruction, launch failure,
    device assert) get_cuda_async_error_suffix's two lines. This build appends no device-side assertion line."""
    out = (f"torch.AcceleratorError: CUDA error: {text}\n"
           f"Search for `{name}' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html "
           "for more information.")
    if kernel_fault:
        out += ("\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
                "below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1")
    return out


DEVICE_ASSERT_ERROR = cuda_error("device-side assert triggered", "cudaErrorAssert")
# a crash rule without error or traceback
DEFAULT_ERROR = cuda_error("an illegal instruction was encountered", "cudaErrorIllegalInstruction")


def nan_device_assert_lines(threads: int = 4) -> List[str]:
    """What the failed tl.device_assert of _assert_no_nan_kernel (utils/async_probe.py line 115) prints
    from the GPU (CUDA's __assertfail format), one line per failing thread, unprefixed on stderr."""
    return [f"{SITE}/sglang/srt/utils/async_probe.py:115: _assert_no_nan_kernel: block: [0,0,0], "
            f"thread: [{t},0,0] Assertion `{NAN_MESSAGE}` failed.\n" for t in range(threads)]


# multi-node: torch.distributed's TCPStore rendezvous (init_process_group) and NCCL collectives
_C10D = "torch/distributed/distributed_c10d.py"
DIST_INIT_HEAD: List[Frame] = INIT_HEAD + [
    (_RUNNER, 480, "initialize", "min_per_gpu_memory = self.init_torch_distributed()"),
    (_RUNNER, 836, "init_torch_distributed", "init_distributed_environment("),
    ("sglang/srt/distributed/parallel_state.py", 1486, "init_distributed_environment",
     "torch.distributed.init_process_group("),
    ("torch/distributed/c10d_logger.py", 81, "wrapper", "return func(*args, **kwargs)"),
    ("torch/distributed/c10d_logger.py", 95, "wrapper", "func_return = func(*args, **kwargs)"),
    (_C10D, 1710, "init_process_group", "store, rank, world_size = next(rendezvous_iterator)"),
    ("torch/distributed/rendezvous.py", 278, "_tcp_rendezvous_handler", "store = _create_c10d_store("),
    ("torch/distributed/rendezvous.py", 198, "_create_c10d_store", "return TCPStore("),
]
NCCL_LAUNCH_HEAD: List[Frame] = INIT_HEAD + [
    (_RUNNER, 523, "initialize", "self.init_memory_pool(min_per_gpu_memory)"),
    (_RUNNER, 1702, "init_memory_pool", "self.max_total_num_tokens = self.profile_max_num_token(total_gpu_memory)"),
    (_RUNNER, 1540, "profile_max_num_token", "available_gpu_memory = get_available_gpu_memory("),
    ("sglang/srt/utils/common.py", 492, "get_available_gpu_memory", "torch.distributed.all_reduce("),
    ("torch/distributed/c10d_logger.py", 81, "wrapper", "return func(*args, **kwargs)"),
    (_C10D, 2862, "all_reduce", "work = group.allreduce([tensor], opts)"),
]
NCCL_SERVE_HEAD: List[Frame] = [
    (_SCHED, 3205, "run_scheduler_process", "scheduler.event_loop_overlap()"),
    ("torch/utils/_contextlib.py", 120, "decorate_context", "return func(*args, **kwargs)"),
    (_SCHED, 1098, "event_loop_overlap", "recv_reqs = self.recv_requests()"),
    (_SCHED, 1290, "recv_requests", "recv_reqs = broadcast_pyobj("),
    ("sglang/srt/utils/common.py", 1187, "broadcast_pyobj", "dist.broadcast(tensor_size, src=src, group=dist_group)"),
    ("torch/distributed/c10d_logger.py", 81, "wrapper", "return func(*args, **kwargs)"),
    (_C10D, 2772, "broadcast", "work = group.broadcast([tensor], opts)"),
]

NCCL_REMOTE_ERROR = (
    "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, "
    "remote process exited or there was a network error, NCCL version 2.27.3\n"
    "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.\n"
    "Last error:\n"
    "socketProgress: Connection closed by remote peer {peer}")


def model_frames(model_type: str) -> List[Frame]:
    mt = model_type.lower()
    if "glm" in mt:
        f, cls = "sglang/srt/models/glm4_moe.py", 1010
    elif "deepseek" in mt:
        f, cls = "sglang/srt/models/deepseek_v2.py", 3010
    else:
        f, cls = "sglang/srt/models/qwen3_moe.py", 890
    return [
        ("torch/utils/_contextlib.py", 120, "decorate_context", "return func(*args, **kwargs)"),
        (f, cls, "forward", "hidden_states = self.model("),
        ("torch/nn/modules/module.py", 1786, "_call_impl", "return forward_call(*args, **kwargs)"),
        (f, cls - 160, "forward", "hidden_states, residual = layer("),
        ("torch/nn/modules/module.py", 1786, "_call_impl", "return forward_call(*args, **kwargs)"),
        (f, cls - 330, "forward", "hidden_states = self.mlp("),
        ("torch/nn/modules/module.py", 1786, "_call_impl", "return forward_call(*args, **kwargs)"),
        (f, 262, "forward", "final_hidden_states = self.experts(hidden_states, topk_output)"),
        ("torch/nn/modules/module.py", 1786, "_call_impl", "return forward_call(*args, **kwargs)"),
        ("sglang/srt/layers/moe/fused_moe_triton/layer.py", 1004, "forward",
         "return self.forward_impl(hidden_states, topk_output)"),
        ("sglang/srt/layers/moe/fused_moe_triton/layer.py", 1031, "forward_impl",
         "combine_input = self.run_moe_core("),
    ]


def _fmt(frames: List[Frame]) -> str:
    out = []
    for path, line, func, code in frames:
        full = path if path.startswith("/") else f"{SITE}/{path}"
        out.append(f'  File "{full}", line {line}, in {func}\n    {code}\n')
    return "".join(out)


def expand(text: str) -> str:
    """Data frames may write {site} for the site-packages directory; indentation is normalised
    (YAML block scalars lose it): ``File ...`` lines get 2 spaces, code lines 4."""
    out = []
    for line in text.replace("{site}", SITE).splitlines():
        st = line.strip()
        if not st:
            continue
        out.append(("  " if st.startswith('File "') else "    ") + st)
    return "\n".join(out) + "\n"


def build(phase: str, model_type: str, frames_text: Optional[str], error: Optional[str],
          full: Optional[str] = None) -> str:
    """phase: load | capture | forward | nan_assert | init | dist_init | nccl_launch | nccl_serve; ``{site}`` in
    the frames, the error and the full text stands for the site-packages directory."""
    if full:
        t = full.replace("{site}", SITE)
        return t if t.endswith("\n") else t + "\n"
    if phase == "load":
        head = LOAD_HEAD
    elif phase == "capture":
        head = CAPTURE_HEAD + model_frames(model_type)
    elif phase == "nan_assert":
        head = NAN_ASSERT_HEAD
    elif phase == "init":
        head = INIT_HEAD
    elif phase == "dist_init":
        head = DIST_INIT_HEAD
    elif phase == "nccl_launch":
        head = NCCL_LAUNCH_HEAD
    elif phase == "nccl_serve":
        head = NCCL_SERVE_HEAD
    else:
        head = FORWARD_HEAD + model_frames(model_type)
    body = "Traceback (most recent call last):\n" + _fmt(head)
    if frames_text and phase not in ("nan_assert",):
        ft = expand(frames_text)
        body += ft if ft.endswith("\n") else ft + "\n"
    if not error:
        error = DEVICE_ASSERT_ERROR if phase == "nan_assert" else DEFAULT_ERROR
    return body + error.replace("{site}", SITE).rstrip("\n") + "\n"


# --- the main process ---------------------------------------------------------------------------------
def scheduler_died(local_rank: int, code, node_rank: int = 0) -> str:
    """The uncaught RuntimeError of a scheduler that died during the launch (entrypoints/engine.py
    _wait_for_scheduler_ready's poll-timeout path, line 2040), as Python 3.11 prints it. ``local_rank``: the
    index among this node's schedulers, as the real one counts."""
    frames: List[Frame] = [
        ("sglang/launch_server.py", 84, "<module>", "run_server(server_args)"),
        ("sglang/launch_server.py", 67, "run_server", "launch_server(server_args)"),
        ("sglang/srt/entrypoints/http_server.py", 3156, "launch_server", ") = Engine._launch_subprocesses("),
        ("sglang/srt/entrypoints/engine.py", 1236 if node_rank >= 1 else 1350, "_launch_subprocesses",
         "scheduler_init_result.wait_for_ready()"),
        ("sglang/srt/entrypoints/engine.py", 995, "wait_for_ready",
         "infos = _wait_for_scheduler_ready(scheduler_pipe_readers, scheduler_procs)"),
        ("sglang/srt/entrypoints/engine.py", 2040, "_wait_for_scheduler_ready",
         "raise _scheduler_died_error(j, scheduler_procs[j])"),
    ]
    return ("Traceback (most recent call last):\n"
            '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
            '  File "<frozen runpy>", line 88, in _run_code\n' + _fmt(frames) +
            f"RuntimeError: Rank {local_rank} scheduler died during initialization (exit code: {code}). "
            "If exit code is -9 (SIGKILL), a common cause is the OS OOM killer. "
            "Run `dmesg -T | grep -i oom` to check.\n")


def _caret(code: str, expr: str) -> str:
    """Python 3.11's caret line under ``expr`` in ``code`` (shown when the expression is only part of the line)."""
    start = code.index(expr)
    return "    " + " " * start + "^" * len(expr) + "\n"


def scheduler_died_eof(local_rank: int, code, eof_frames: str, node_rank: int = 0) -> str:
    """A scheduler that died during the launch while the main process waited on its pipe (0.5.23
    entrypoints/engine.py _wait_for_scheduler_ready: ``recv()`` at line 2027 raises EOFError, the handler raises
    the RuntimeError at line 2029), as Python 3.11 prints the chain. ``eof_frames``: the stdlib frames of a real
    EOFError of multiprocessing's Connection.recv, from this interpreter (``File ...`` lines with their carets)."""
    wait = "infos = _wait_for_scheduler_ready(scheduler_pipe_readers, scheduler_procs)"
    launch = ") = Engine._launch_subprocesses("
    recv = "data = scheduler_pipe_readers[i].recv()"
    head = (f'  File "{SITE}/sglang/srt/entrypoints/engine.py", line 2027, in _wait_for_scheduler_ready\n'
            f"    {recv}\n" + _caret(recv, "scheduler_pipe_readers[i].recv()"))
    return ("Traceback (most recent call last):\n" + head + eof_frames + "EOFError\n\n"
            "During handling of the above exception, another exception occurred:\n\n"
            "Traceback (most recent call last):\n"
            '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
            '  File "<frozen runpy>", line 88, in _run_code\n' +
            _fmt([("sglang/launch_server.py", 84, "<module>", "run_server(server_args)"),
                  ("sglang/launch_server.py", 67, "run_server", "launch_server(server_args)"),
                  ("sglang/srt/entrypoints/http_server.py", 3156, "launch_server", launch)]) +
            _caret(launch, "Engine._launch_subprocesses(") +
            _fmt([("sglang/srt/entrypoints/engine.py", 1236 if node_rank >= 1 else 1350, "_launch_subprocesses",
                   "scheduler_init_result.wait_for_ready()"),
                  ("sglang/srt/entrypoints/engine.py", 995, "wait_for_ready", wait)]) +
            _caret(wait, "_wait_for_scheduler_ready(scheduler_pipe_readers, scheduler_procs)") +
            _fmt([("sglang/srt/entrypoints/engine.py", 2029, "_wait_for_scheduler_ready",
                   "raise _scheduler_died_error(i, scheduler_procs[i])")]) +
            f"RuntimeError: Rank {local_rank} scheduler died during initialization (exit code: {code}). "
            "If exit code is -9 (SIGKILL), a common cause is the OS OOM killer. "
            "Run `dmesg -T | grep -i oom` to check.\n")


def warmup_failed(error: str, model_info: bool = False) -> str:
    """get_exception_traceback() of _execute_server_warmup's failed assert (entrypoints/http_server.py): on the
    warm-up request (line 2501), or on the last of the 120 /model_info polls (line 2376); ends with an empty
    line, like the real. ``error``: the exception line."""
    frame = (("sglang/srt/entrypoints/http_server.py", 2376, "_execute_server_warmup",
              'assert res.status_code == 200, f"{res=}, {res.text=}"') if model_info else
             ("sglang/srt/entrypoints/http_server.py", 2501, "_execute_server_warmup",
              'assert res.status_code == 200, f"{res.text}"'))
    return "Traceback (most recent call last):\n" + _fmt([frame]) + error.rstrip("\n") + "\n"
