"""Realistic tracebacks of SGLang 0.5.23 failures, as Python 3.11 prints them.

A scheduler (TP worker) failure: sglang's own frames for the phase (``build``'s head), the model's frames down to
the MoE layer for a forward, then the rule's kernel frames (``frames`` param, data), then the error line (``error``
param). The main process's own tracebacks: a scheduler that died during the launch, SIGINT on a node >= 1, a failed
warm-up. Every frame is the file, line, function and code of the installed 0.5.23 wheels (torch 2.14.1, requests
2.34.2) and of Python 3.11's standard library, with the caret line Python 3.11 prints under the code when the
failing call is only part of the line (tests/unit/test_fake_frames.py checks them against the installed wheels)."""
from __future__ import annotations

import os
import sys
import time
from typing import Dict, List, Optional, Tuple

SITE = f"{sys.prefix}/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
STDLIB = os.path.dirname(os.__file__)           # this interpreter's standard library

# (path under site-packages, or absolute, or "<frozen runpy>"; line; function; code, "" when Python prints none)
Frame = Tuple[str, int, str, str]

_SCHED = "sglang/srt/managers/scheduler.py"
_TPW = "sglang/srt/managers/tp_worker.py"
_RUNNER = "sglang/srt/model_executor/model_runner.py"
_BOOT = "sglang/srt/distributed/bootstrap.py"
_COMMON = "sglang/srt/utils/common.py"
_LOADER = "sglang/srt/model_loader/loader.py"
_DECODE_CG = "sglang/srt/model_executor/runner/decode_cuda_graph_runner.py"
_C10D = "torch/distributed/distributed_c10d.py"
_MOE = "sglang/srt/layers/moe/fused_moe_triton/layer.py"
_ENGINE = "sglang/srt/entrypoints/engine.py"
_HTTP = "sglang/srt/entrypoints/http_server.py"

# decorators' and torch's own frames
_NO_GRAD: Frame = ("torch/utils/_contextlib.py", 124, "decorate_context", "return func(*args, **kwargs)")
_MODULE_CALL: List[Frame] = [          # nn.Module.__call__
    ("torch/nn/modules/module.py", 1783, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
    ("torch/nn/modules/module.py", 1794, "_call_impl", "return forward_call(*args, **kwargs)"),
]
_STAGE_METHOD: List[Frame] = [         # @scheduler_stage_method(...)
    ("sglang/srt/observability/scheduler_stage_metrics.py", 186, "wrapper",
     "return profiled_func(self, *args, **kwargs)"),
    ("sglang/srt/utils/nvtx_utils.py", 109, "wrapper", "return func(*args, **kwargs)"),
]
_C10D_LOGGED: Frame = ("torch/distributed/c10d_logger.py", 83, "wrapper", "return func(*args, **kwargs)")

# --- the scheduler's launch: Scheduler.__init__ --------------------------------------------------------
_NEW_SCHEDULER: List[Frame] = [(_SCHED, 6362, "run_scheduler_process", "scheduler = Scheduler(server_args, port_args)")]
_PARALLEL: List[Frame] = _NEW_SCHEDULER + [(_SCHED, 536, "__init__", "bootstrap.init_parallel_runtime(")]
# torch.cuda.set_device of a GPU that is not there, right after "Init parallel begin."
DEVICE_HEAD: List[Frame] = _PARALLEL + [
    (_BOOT, 133, "init_parallel_runtime", "torch.get_device_module(device).set_device(get_device().gpu_id)"),
    ("torch/cuda/__init__.py", 751, "set_device", "torch._C._cuda_setDevice(device)"),
]
# multi-node: torch.distributed's TCPStore rendezvous (init_process_group)
_RENDEZVOUS: List[Frame] = _PARALLEL + [
    (_BOOT, 152, "init_parallel_runtime", "_init_parallel_groups("),
    (_BOOT, 322, "_init_parallel_groups", "init_distributed_environment("),
    ("sglang/srt/distributed/parallel_state.py", 2517, "init_distributed_environment",
     "torch.distributed.init_process_group("),
    _C10D_LOGGED,
    ("torch/distributed/c10d_logger.py", 97, "wrapper", "func_return = func(*args, **kwargs)"),
    (_C10D, 2546, "init_process_group", "store, rank, world_size = next(rendezvous_iterator)"),
]
DIST_INIT_HEAD: List[Frame] = _RENDEZVOUS + [
    ("torch/distributed/rendezvous.py", 248, "_tcp_rendezvous_handler", "store = _create_c10d_store("),
    ("torch/distributed/rendezvous.py", 215, "_create_c10d_store", "return TCPStore("),
]
DIST_URL_HEAD: List[Frame] = _RENDEZVOUS + [
    ("torch/distributed/rendezvous.py", 234, "_tcp_rendezvous_handler", 'raise _error("port number missing")'),
]
_TP_WORKER: List[Frame] = _NEW_SCHEDULER + [
    (_SCHED, 568, "__init__", "self.init_model_worker()"),
    (_SCHED, 1130, "init_model_worker", "self.init_tp_model_worker()"),
    (_SCHED, 1033, "init_tp_model_worker", "self.tp_worker = TpModelWorker(**worker_kwargs)"),
]
_MODEL_RUNNER: List[Frame] = _TP_WORKER + [
    (_TPW, 319, "__init__", "self._init_model_runner()"),
    (_TPW, 487, "_init_model_runner", "self._model_runner = ModelRunner("),
]
_MEMORY_BASELINE: List[Frame] = _MODEL_RUNNER + [
    (_RUNNER, 466, "__init__", "self.init_torch_distributed()"),
    (_RUNNER, 1262, "init_torch_distributed", "self.pre_model_load_memory = bootstrap.measure_pre_model_load_memory("),
]
# the first CUDA call after the parallel init: the memory baseline's free-memory query
BASELINE_HEAD: List[Frame] = _MEMORY_BASELINE + [
    (_BOOT, 198, "measure_pre_model_load_memory",
     "before_avail_memory = get_available_gpu_memory(device, get_device().gpu_id)"),
    (_COMMON, 456, "get_available_gpu_memory", "free_gpu_memory, _ = torch.cuda.mem_get_info(gpu_id)"),
    ("torch/cuda/memory.py", 863, "mem_get_info", "return torch.cuda.cudart().cudaMemGetInfo(device)"),
]
# multi-node, a peer lost after the barrier that follows the load, during the launch: the next collective,
# TpModelWorker's broadcast of the random seed over the world's gloo group (managers/tp_worker.py:381, before the
# scheduler sizes its memory pools; on a GPU as on the CPU: broadcast_pyobj takes the group's CPU side). Global
# rank 0 sends (utils/common.py:2725), every other rank receives (:2730). The frames as the real 0.5.23 printed them
# on the lab when node 1 crashed right after its load (tests/unit/plugins/module_utils/data/sglang-0.5.23/
# nn2_rank1_crash_after_load_node0.log).
_SEED_BROADCAST: List[Frame] = _TP_WORKER + [(_TPW, 381, "__init__", "self.random_seed = broadcast_pyobj(")]
PEER_LAUNCH_HEAD: List[Frame] = _SEED_BROADCAST + [
    (_COMMON, 2725, "broadcast_pyobj", "dist.broadcast(tensor_size, src=src, group=dist_group)"),
    _C10D_LOGGED,
    (_C10D, 3787, "broadcast", "work.wait()"),
]
PEER_LAUNCH_RECV_HEAD: List[Frame] = _SEED_BROADCAST + [
    (_COMMON, 2730, "broadcast_pyobj", "dist.broadcast(tensor_size, src=src, group=dist_group)"),
    _C10D_LOGGED,
    (_C10D, 3787, "broadcast", "work.wait()"),
]
_INITIALIZE: List[Frame] = _MODEL_RUNNER + [
    (_RUNNER, 499, "__init__", "self.initialize()"),
    (_RUNNER, 715, "initialize", "self.load_model()"),
]
# multi-node, a peer lost before or during the load: the monitored barrier after the rank's own load fails (the frames
# and the error as the real 0.5.23 printed them on the lab, nn2_rank1_load_crash_node0.log)
LOAD_BARRIER_HEAD: List[Frame] = _INITIALIZE + [
    (_RUNNER, 1406, "load_model", "dist_barrier_after_load("),
    ("sglang/srt/model_executor/model_runner_components/load_model_utils.py", 393, "dist_barrier_after_load",
     "raise ValueError("),
]
LOAD_BARRIER_ERROR = ("ValueError: TP rank {rank} could finish the model loading, but there are other ranks that didn't "
                      "finish loading. It is likely due to unexpected failures (e.g., OOM) or a slow node.")


def monitored_barrier_lines(rank: int, failed: List[int], timeout_ms: int) -> str:
    """What torch's gloo monitored barrier logs on the group's rank 0 (c10 logging, unprefixed on stderr) for the
    ranks that did not pass it (ProcessGroupGloo.cpp:2948 each, :68 all), as in nn2_rank1_load_crash_node0.log."""
    now = time.time()
    head = "[rank%d]:[E%s.%09d " % (rank, time.strftime("%m%d %H:%M:%S", time.localtime(now)),
                                    int((now % 1) * 1e9))
    out = ["%sProcessGroupGloo.cpp:2948] [Rank %d]: Rank %d failed to pass monitoredBarrier in %d ms\n"
           % (head, rank, r, timeout_ms) for r in failed]
    out.append("%sProcessGroupGloo.cpp:68] [Rank %d]: Ranks %s failed to pass monitoredBarrier in %d ms\n"
               % (head, rank, ", ".join(str(r) for r in failed), timeout_ms))
    return "".join(out)


_LOAD_MODEL: List[Frame] = _INITIALIZE + [
    (_RUNNER, 1312, "load_model", "loaded = load_model_with_memory_saver("),
    ("sglang/srt/model_executor/model_runner_components/load_model_utils.py", 346, "load_model_with_memory_saver",
     "model = loader.load_model("),
]
# the model loader (model_loader/loader.py get_model_loader): "default" (DefaultModelLoader), "modelopt" (a ModelOpt
# checkpoint, already quantized: ModelOptModelLoader hands it to DefaultModelLoader), "dummy" (--load-format dummy)
LOADERS = ("default", "modelopt", "dummy")
_MODELOPT_LOADER: Frame = (_LOADER, 3830, "load_model", "return super().load_model(")
_INITIALIZE_MODEL: Frame = (_LOADER, 309, "_initialize_model", "model = model_class(**kwargs)")
# the model is built (its weights allocated on the GPU), after "Load weight begin."
_BUILD_MODEL: Dict[str, List[Frame]] = {
    "default": [(_LOADER, 1014, "load_model", "model = _initialize_model("), _INITIALIZE_MODEL],
    "dummy": [(_LOADER, 1509, "load_model", "model = _initialize_model("), _INITIALIZE_MODEL],
}
# its weights are loaded (the rule's frames go on in the model's load_weights), or set to random values
_LOAD_WEIGHTS: Dict[str, List[Frame]] = {
    "default": [
        (_LOADER, 1020, "load_model", "self.load_weights_and_postprocess("),
        (_LOADER, 1029, "load_weights_and_postprocess",
         "DefaultModelLoader.load_weights_only(model, weights, target_device)"),
        (_LOADER, 1063, "load_weights_only", "model.load_weights(weights)"),
    ],
    "dummy": [
        (_LOADER, 1517, "load_model", "initialize_dummy_weights(model)"),
        ("sglang/srt/model_loader/weight_utils.py", 1776, "initialize_dummy_weights",
         "param.uniform_(low, high, generator=generator)"),
    ],
}
# the decode CUDA graph capture (after "Capture target decode CUDA graph begin."): the first warm-up forward
CAPTURE_HEAD: List[Frame] = _NEW_SCHEDULER + [
    (_SCHED, 568, "__init__", "self.init_model_worker()"),
    (_SCHED, 1146, "init_model_worker", "self.init_all_cuda_graphs()"),
    _NO_GRAD,
    (_SCHED, 1124, "init_all_cuda_graphs", "self.tp_worker.init_cuda_graphs()"),
    (_TPW, 435, "init_cuda_graphs", "self.model_runner.init_cuda_graphs("),
    (_RUNNER, 1192, "init_cuda_graphs", "capture = capture_cuda_graphs("),
    ("sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py", 437, "capture_cuda_graphs",
     "decode = capture_decode_graph(model_runner=model_runner)"),
    ("sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py", 780, "capture_decode_graph",
     "runner = GraphRunnerCls(model_runner)"),
    (_DECODE_CG, 600, "__init__", "self.capture()"),
    (_DECODE_CG, 1251, "capture", "self._capture()"),
    (_DECODE_CG, 1303, "_capture", "self._capture_one_stream()"),
    (_DECODE_CG, 1359, "_capture_one_stream", "self.capture_one_shape("),
    (_DECODE_CG, 1499, "capture_one_shape", "self.backend.capture_one("),
    ("sglang/srt/model_executor/runner_backend/full_cuda_graph_backend.py", 166, "capture_one",
     "output = forward_fn()"),
    (_DECODE_CG, 1458, "run_once", "out = forward("),
]

# --- serving: the overlap event loop ------------------------------------------------------------------
_EVENT_LOOP: List[Frame] = [
    (_SCHED, 6368, "run_scheduler_process", "scheduler.run_event_loop()"),
    (_SCHED, 2010, "run_event_loop", "dispatch_event_loop(self)"),
    (_SCHED, 6215, "dispatch_event_loop", "return _dispatch_event_loop_once(scheduler)"),
    (_SCHED, 6231, "_dispatch_event_loop_once", "scheduler.event_loop_overlap()"),
    _NO_GRAD,
]
# a prefill batch, run eagerly (the decode CUDA graphs replay decode batches only)
FORWARD_HEAD: List[Frame] = _EVENT_LOOP + [
    (_SCHED, 2109, "event_loop_overlap", "batch_result = self.run_batch(batch)"),
] + _STAGE_METHOD + [
    (_SCHED, 4704, "run_batch", "batch_result = self.model_worker.forward_batch_generation("),
    (_TPW, 675, "forward_batch_generation", "out = self.model_runner.forward("),
    (_RUNNER, 1860, "forward", "output = self._forward_raw("),
    (_RUNNER, 2063, "_forward_raw", "ret = self.eager_runner.execute("),
    ("sglang/srt/model_executor/runner/eager_runner.py", 226, "execute",
     "return self._execute_extend(forward_batch, pp_proxy_tensors)"),
    ("sglang/srt/model_executor/runner/eager_runner.py", 361, "_execute_extend", "ret = model_runner.model.forward("),
]
# 0.5.23 with SGLANG_ENABLE_NAN_LOGITS_CHECK: Sampler.forward's maybe_detect_nan (utils/async_probe.py) fires a
# Triton device assert; the error surfaces at the next sync, processing the batch's result
NAN_ASSERT_HEAD: List[Frame] = _EVENT_LOOP + [
    (_SCHED, 2120, "event_loop_overlap", "pop_and_process()"),
    (_SCHED, 2071, "pop_and_process", "self.process_batch_result(tmp_batch, tmp_result)"),
] + _STAGE_METHOD + [
    (_SCHED, 5099, "process_batch_result", "self.batch_result_processor.process_batch_result_prefill(batch, result)"),
    ("sglang/srt/managers/scheduler_components/batch_result_processor.py", 268, "process_batch_result_prefill",
     "result.copy_done.synchronize()"),
    ("torch/cuda/streams.py", 254, "synchronize", "super().synchronize()"),
]
NAN_MESSAGE = "NaN detected! sampler: next_token_logits"
# multi-node, a peer lost while serving: the broadcast of the received requests across the ranks, idle (no request:
# global rank 0 sends an empty list, utils/common.py:2715; the others receive, :2730), as in
# tests/unit/plugins/module_utils/data/sglang-0.5.23/nn2_kill_node0.log
_RECV_REQUESTS: List[Frame] = _EVENT_LOOP + [
    (_SCHED, 2078, "event_loop_overlap", "self.ingest_requests()"),
    (_SCHED, 2205, "ingest_requests", "self.request_receiver.recv_requests(local_reqs=local_reqs)"),
] + _STAGE_METHOD + [
    ("sglang/srt/managers/scheduler_components/request_receiver.py", 101, "recv_requests",
     "recv_reqs = self._broadcast_reqs_across_ranks(recv_reqs, local_reqs)"),
    ("sglang/srt/managers/scheduler_components/request_receiver.py", 206, "_broadcast_reqs_across_ranks",
     "recv_reqs = broadcast_pyobj("),
]
PEER_SERVE_HEAD: List[Frame] = _RECV_REQUESTS + [
    (_COMMON, 2715, "broadcast_pyobj", "dist.broadcast(tensor_size, src=src, group=dist_group)"),
    _C10D_LOGGED,
    (_C10D, 3787, "broadcast", "work.wait()"),
]
PEER_SERVE_RECV_HEAD: List[Frame] = _RECV_REQUESTS + [
    (_COMMON, 2730, "broadcast_pyobj", "dist.broadcast(tensor_size, src=src, group=dist_group)"),
    _C10D_LOGGED,
    (_C10D, 3787, "broadcast", "work.wait()"),
]


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


# gloo's error for a peer gone (torch's third_party/gloo/gloo/transport/tcp/pair.cc): the peer's connection ended
# (:561), as the real 0.5.23 printed it on the lab when node 1 crashed right after its load
# (nn2_rank1_crash_after_load_node0.log);
# a read reset by the peer (:545), as it printed it when node 1's scheduler was SIGKILLed while serving
# (nn2_kill_node0.log). {addr} and {port}: the peer's end of the connection.
GLOO_PEER_CLOSED = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:561] Connection "
                    "closed by peer [{addr}]:{port}. This is typically caused by a remote worker crashing. Check the "
                    "logs of the remote worker before reporting an error. GLHF! \U0001f3d6\ufe0f")
GLOO_PEER_RESET = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:545] Read error "
                   "[{addr}]:{port}: Connection reset by peer. This is typically caused by a remote worker hanging or "
                   "bugs in the application. Check the logs of the remote worker before reporting an error. GLHF! "
                   "\U0001f3d6\ufe0f")


# --- the model's forward, down to the MoE layer (the rule's frames go on in FusedMoE.run_moe_core) ---------------
_Q35 = "sglang/srt/models/qwen3_5.py"
_Q2 = "sglang/srt/models/qwen2_moe.py"
_Q3 = "sglang/srt/models/qwen3_moe.py"
_GLM = "sglang/srt/models/glm4_moe.py"
_DS = "sglang/srt/models/deepseek_v2.py"
MODEL_FAMILIES = ("qwen3_5_vl", "qwen3_5", "glm4_moe", "deepseek_v2", "qwen3_moe")
# the model's forward (@torch.no_grad()) down to its body's call
_ENTRY: Dict[str, List[Frame]] = {
    "qwen3_5_vl": [
        _NO_GRAD,
        ("sglang/srt/models/qwen3_vl.py", 1652, "forward", "hidden_states = general_mm_embed_routine("),
        ("sglang/srt/managers/mm_utils.py", 885, "general_mm_embed_routine", "hidden_states = language_model("),
    ],
    "qwen3_5": [_NO_GRAD, ("sglang/srt/models/qwen3_5_text.py", 194, "forward", "hidden_states = self.model(")],
    "glm4_moe": [_NO_GRAD, (_GLM, 1049, "forward", "hidden_states = self.model(")],
    "deepseek_v2": [_NO_GRAD, (_DS, 3414, "forward", "hidden_states = self.model(")],
    "qwen3_moe": [_NO_GRAD, (_Q3, 1056, "forward", "hidden_states = self.model(")],
}
# the body's decoder loop down to the layer's MoE block call (Qwen3.5: layer 0, a linear-attention layer)
_QWEN3_5_LAYER: List[Frame] = [_NO_GRAD, (_Q35, 1947, "forward", "hidden_states = layer(")] + _MODULE_CALL + [
    (_Q35, 1227, "forward", "hidden_states = self.mlp(")]
_LAYER: Dict[str, List[Frame]] = {
    "qwen3_5_vl": _QWEN3_5_LAYER,
    "qwen3_5": _QWEN3_5_LAYER,
    "glm4_moe": [(_GLM, 952, "forward", "hidden_states = layer(")] + _MODULE_CALL + [
        (_GLM, 860, "forward", "hidden_states = self.mlp(hidden_states, forward_batch)")],
    "deepseek_v2": [(_DS, 3185, "forward", "(hidden_states, topk_indices) = layer(")] + _MODULE_CALL + [
        (_DS, 2854, "forward", "hidden_states = self.mlp(")],
    "qwen3_moe": [(_Q2, 1196, "forward", "hidden_states = layer(")] + _MODULE_CALL + [
        (_Q3, 916, "forward", "hidden_states = self.mlp(hidden_states, forward_batch)")],
}
# the MoE block down to its experts' call, eager (False) or under a CUDA graph capture (True), where a block with
# an unfused shared expert runs the routed experts on the alternate stream
_QWEN3_5_EXPERTS: Frame = (_Q2, 722, "_forward_router_experts", "return self.experts(hidden_states, topk_output)")
_MOE_BLOCK: Dict[str, Dict[bool, List[Frame]]] = {
    "qwen3_5": {
        False: [(_Q2, 857, "forward", "final_hidden_states = self._forward_router_experts("), _QWEN3_5_EXPERTS],
        True: [(_Q2, 844, "forward", "final_hidden_states, shared_output = self.forward_normal_dual_stream("),
               (_Q2, 789, "forward_normal_dual_stream", "router_output = self._forward_router_experts(hidden_states)"),
               _QWEN3_5_EXPERTS]},
    "glm4_moe": {
        False: [(_GLM, 581, "forward", "return self.forward_normal(hidden_states)"),
                (_GLM, 618, "forward_normal", "final_hidden_states = self.experts(hidden_states, topk_output)")],
        True: [(_GLM, 579, "forward", "return self.forward_normal_dual_stream(hidden_states)"),
               (_GLM, 597, "forward_normal_dual_stream",
                "final_hidden_states = self.experts(hidden_states, topk_output)")]},
    "deepseek_v2": {
        False: [(_DS, 1113, "forward", "return self.forward_normal("),
                (_DS, 1411, "forward_normal", "final_hidden_states = self.experts(")],
        True: [(_DS, 1103, "forward", "return self.forward_normal_dual_stream("),
               (_DS, 1232, "forward_normal_dual_stream",
                "final_hidden_states = self.experts(hidden_states, topk_output)")]},
    "qwen3_moe": dict.fromkeys((False, True), [
        (_Q3, 323, "forward", "return self.forward_normal(hidden_states)"),
        (_Q3, 350, "forward_normal", "final_hidden_states = self.experts(hidden_states, topk_output)")]),
}
_MOE_BLOCK["qwen3_5_vl"] = _MOE_BLOCK["qwen3_5"]
_MOE_LAYER: List[Frame] = [(_MOE, 1705, "forward", "return self.forward_impl("),
                           (_MOE, 1726, "forward_impl", "combine_input = self.run_moe_core(")]


def model_family(model_type: str) -> str:
    """The family of a checkpoint's architecture (config.json architectures[0])."""
    mt = model_type.lower()
    if "qwen3_5" in mt:
        return "qwen3_5_vl" if "conditionalgeneration" in mt else "qwen3_5"
    if "glm" in mt:
        return "glm4_moe"
    if "deepseek" in mt:
        return "deepseek_v2"
    return "qwen3_moe"


def model_frames(model_type: str, capture: bool = False) -> List[Frame]:
    """The model's forward from its entry down to FusedMoE.run_moe_core, eager or in the decode CUDA graph capture
    (``capture``). GLM's and DeepSeek's first layers are dense: these are the frames of the first MoE layer."""
    family = model_family(model_type)
    return (_ENTRY[family] + _MODULE_CALL + _LAYER[family] + _MODULE_CALL + _MOE_BLOCK[family][capture]
            + _MODULE_CALL + _MOE_LAYER)


# --- printing ------------------------------------------------------------------------------------------
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")


def _expression_start(code: str) -> int:
    """Where the call a frame stopped in starts in its code line: after return/with/yield, after an assignment's
    '=', else at the start."""
    for keyword in ("return ", "with ", "yield ", "await "):
        if code.startswith(keyword):
            return len(keyword)
    depth = 0
    for i, ch in enumerate(code):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(depth - 1, 0)
        elif ch == "=" and depth == 0 and code[i + 1:i + 2] != "=" and code[i - 1:i] not in ("=", "!", "<", ">"):
            return i + 2 if code[i + 1:i + 2] == " " else i + 1
    return 0


def _expression_end(code: str, start: int) -> int:
    """The end of the call starting at ``start`` (dotted names, calls, subscripts); the line's end when the call
    goes on past the line."""
    depth, i = 0, start
    while i < len(code):
        ch = code[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and ch not in _NAME_CHARS:
            break
        i += 1
    return len(code) if depth > 0 else i


def carets(code: str) -> str:
    """Python 3.11's caret line under a frame's code line: under the failing call (an assert's test), when that is
    only part of the line; "" when it is the whole line (a raise statement is)."""
    if not code or code.startswith("raise "):
        return ""
    if code.startswith("assert "):
        start = len("assert ")
        end = code.find(", ", start)
        end = len(code) if end < 0 else end
    else:
        start = _expression_start(code)
        end = _expression_end(code, start)
    if end - start >= len(code):
        return ""
    return "    " + " " * start + "^" * (end - start) + "\n"


def _fmt(frames: List[Frame]) -> str:
    out = []
    for path, line, func, code in frames:
        full = path if path.startswith(("/", "<")) else f"{SITE}/{path}"
        out.append(f'  File "{full}", line {line}, in {func}\n')
        if code:
            out.append(f"    {code}\n" + carets(code))
    return "".join(out)


def expand(text: str) -> str:
    """Data frames may write {site} for the site-packages directory; indentation is normalised
    (YAML block scalars lose it): ``File ...`` lines get 2 spaces, code lines 4 and their caret line."""
    out = []
    for line in text.replace("{site}", SITE).splitlines():
        st = line.strip()
        if not st or not st.strip("^~"):
            continue
        out.append(("  " + st + "\n") if st.startswith('File "') else ("    " + st + "\n" + carets(st)))
    return "".join(out)


PHASES = ("device", "baseline", "dist_init", "dist_url", "load_barrier", "peer_launch", "peer_launch_recv", "init",
          "load", "capture", "forward", "nan_assert", "peer_serve", "peer_serve_recv")


def head(phase: str, model_type: str, loader: str = "default") -> List[Frame]:
    """sglang's own frames of a scheduler failure in ``phase`` (PHASES; anything else is a forward)."""
    heads = {"device": DEVICE_HEAD, "baseline": BASELINE_HEAD, "dist_init": DIST_INIT_HEAD,
             "dist_url": DIST_URL_HEAD, "load_barrier": LOAD_BARRIER_HEAD, "peer_launch": PEER_LAUNCH_HEAD, "peer_launch_recv": PEER_LAUNCH_RECV_HEAD,
             "nan_assert": NAN_ASSERT_HEAD, "peer_serve": PEER_SERVE_HEAD, "peer_serve_recv": PEER_SERVE_RECV_HEAD}
    if phase in heads:
        return heads[phase]
    if phase in ("init", "load"):
        load = _LOAD_MODEL + ([_MODELOPT_LOADER] if loader == "modelopt" else [])
        steps = _BUILD_MODEL if phase == "init" else _LOAD_WEIGHTS
        return load + steps["dummy" if loader == "dummy" else "default"]
    if phase == "capture":
        return CAPTURE_HEAD + model_frames(model_type, capture=True)
    return FORWARD_HEAD + model_frames(model_type)


def build(phase: str, model_type: str, frames_text: Optional[str], error: Optional[str],
          full: Optional[str] = None, loader: str = "default") -> str:
    """A scheduler's traceback: ``head(phase, model_type, loader)``, the rule's frames, the error line;
    ``{site}`` in the frames, the error and the full text stands for the site-packages directory.
    phase: device (the GPU index), baseline (the first CUDA call after the parallel init), dist_init / dist_url
    (the rendezvous), load_barrier (a peer lost before the barrier after the load), peer_launch /
    peer_launch_recv (a peer lost after it during the launch, on global rank 0 / the others), init (building the
    model), load (loading its weights), capture (the decode CUDA graph capture), forward (a prefill), nan_assert,
    peer_serve / peer_serve_recv (a peer lost while serving). ``loader``: one of LOADERS, the model loader of init
    and load."""
    if full:
        t = full.replace("{site}", SITE)
        return t if t.endswith("\n") else t + "\n"
    body = "Traceback (most recent call last):\n" + _fmt(head(phase, model_type, loader))
    if frames_text and phase not in ("nan_assert",):
        body += expand(frames_text)
    if not error:
        error = DEVICE_ASSERT_ERROR if phase == "nan_assert" else DEFAULT_ERROR
    return body + error.replace("{site}", SITE).rstrip("\n") + "\n"


# --- the main process ---------------------------------------------------------------------------------
def _launch(node_rank: int) -> Tuple[List[Frame], List[Frame]]:
    """``python -m sglang.launch_server`` down to Engine._launch_subprocesses, and on to
    _wait_for_scheduler_ready (node 0 after starting its tokenizer, a node >= 1 straight away)."""
    launch: List[Frame] = [
        ("<frozen runpy>", 198, "_run_module_as_main", ""),
        ("<frozen runpy>", 88, "_run_code", ""),
        ("sglang/launch_server.py", 84, "<module>", "run_server(server_args)"),
        ("sglang/launch_server.py", 67, "run_server", "launch_server(server_args)"),
        (_HTTP, 3156, "launch_server", ") = Engine._launch_subprocesses("),
    ]
    wait: List[Frame] = [
        (_ENGINE, 1236 if node_rank >= 1 else 1350, "_launch_subprocesses", "scheduler_init_result.wait_for_ready()"),
        (_ENGINE, 995, "wait_for_ready", "infos = _wait_for_scheduler_ready(scheduler_pipe_readers, scheduler_procs)"),
    ]
    return launch, wait


def _died(local_rank: int, code) -> str:
    return (f"RuntimeError: Rank {local_rank} scheduler died during initialization (exit code: {code}). "
            "If exit code is -9 (SIGKILL), a common cause is the OS OOM killer. "
            "Run `dmesg -T | grep -i oom` to check.\n")


def scheduler_died(local_rank: int, code, node_rank: int = 0) -> str:
    """The uncaught RuntimeError of a scheduler that died during the launch (entrypoints/engine.py
    _wait_for_scheduler_ready's poll-timeout path, line 2040), as Python 3.11 prints it. ``local_rank``: the
    index among this node's schedulers, as the real one counts."""
    launch, wait = _launch(node_rank)
    return ("Traceback (most recent call last):\n"
            + _fmt(launch + wait + [(_ENGINE, 2040, "_wait_for_scheduler_ready",
                                     "raise _scheduler_died_error(j, scheduler_procs[j])")])
            + _died(local_rank, code))


def scheduler_died_eof(local_rank: int, code, eof_frames: str, node_rank: int = 0) -> str:
    """A scheduler that died during the launch while the main process waited on its pipe (0.5.23
    entrypoints/engine.py _wait_for_scheduler_ready: ``recv()`` at line 2027 raises EOFError, the handler raises
    the RuntimeError at line 2029), as Python 3.11 prints the chain. ``eof_frames``: the stdlib frames of a real
    EOFError of multiprocessing's Connection.recv, from this interpreter (``File ...`` lines with their carets)."""
    launch, wait = _launch(node_rank)
    return ("Traceback (most recent call last):\n"
            + _fmt([(_ENGINE, 2027, "_wait_for_scheduler_ready", "data = scheduler_pipe_readers[i].recv()")])
            + eof_frames + "EOFError\n\n"
            "During handling of the above exception, another exception occurred:\n\n"
            "Traceback (most recent call last):\n"
            + _fmt(launch + wait + [(_ENGINE, 2029, "_wait_for_scheduler_ready",
                                     "raise _scheduler_died_error(i, scheduler_procs[i])")])
            + _died(local_rank, code))


def keyboard_interrupt() -> str:
    """SIGINT on a node >= 1's main process, which waits in block_until_scheduler_exits for its schedulers to end
    (multiprocessing's Process.join, this interpreter's standard library)."""
    launch, _wait = _launch(1)
    return ("Traceback (most recent call last):\n" + _fmt(launch + [
        (_ENGINE, 1287, "_launch_subprocesses", "scheduler_init_result.block_until_scheduler_exits()"),
        (_ENGINE, 1022, "block_until_scheduler_exits", "proc.join()"),
        (f"{STDLIB}/multiprocessing/process.py", 149, "join", "res = self._popen.wait(timeout)"),
        (f"{STDLIB}/multiprocessing/popen_fork.py", 43, "wait",
         "return self.poll(os.WNOHANG if timeout == 0.0 else 0)"),
        (f"{STDLIB}/multiprocessing/popen_fork.py", 27, "poll", "pid, sts = os.waitpid(self.pid, flag)"),
    ]) + "KeyboardInterrupt\n")


def warmup_failed(error: str, model_info: bool = False) -> str:
    """get_exception_traceback() of _execute_server_warmup's failure (entrypoints/http_server.py): the failed
    assert on the warm-up request (line 2501) or on the last of the 120 /model_info polls (line 2376); a
    ``requests.exceptions.*`` ``error`` is raised by requests.get (line 2373) or requests.post (line 2494) in
    requests' adapter (the last exception of the chain). Ends with an empty line, like the real. ``error``: the
    exception line."""
    if error.startswith("requests.exceptions."):
        frames: List[Frame] = ([(_HTTP, 2373, "_execute_server_warmup", "res = requests.get("),
                                ("requests/api.py", 87, "get", 'return request("get", url, params=params, **kwargs)')]
                               if model_info else
                               [(_HTTP, 2494, "_execute_server_warmup", "res = requests.post("),
                                ("requests/api.py", 134, "post",
                                 'return request("post", url, data=data, json=json, **kwargs)')]) + [
            ("requests/api.py", 71, "request", "return session.request(method=method, url=url, **kwargs)"),
            ("requests/sessions.py", 651, "request", "resp = self.send(prep, **send_kwargs)"),
            ("requests/sessions.py", 784, "send", "r = adapter.send(request, **kwargs)"),
            ("requests/adapters.py", 729, "send", "raise ConnectionError(e, request=request)"),
        ]
    elif model_info:
        frames = [(_HTTP, 2376, "_execute_server_warmup", 'assert res.status_code == 200, f"{res=}, {res.text=}"')]
    else:
        frames = [(_HTTP, 2501, "_execute_server_warmup", 'assert res.status_code == 200, f"{res.text}"')]
    return "Traceback (most recent call last):\n" + _fmt(frames) + error.rstrip("\n") + "\n"
