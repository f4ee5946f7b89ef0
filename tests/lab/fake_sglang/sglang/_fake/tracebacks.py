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
SAMPLE_HEAD: List[Frame] = FORWARD_HEAD[:5] + [
    ("sglang/srt/managers/tp_worker.py", 461, "forward_batch_generation", "next_token_ids = self.model_runner.sample("),
    (_RUNNER, 2733, "sample", "next_token_ids = self.sampler("),
    ("torch/nn/modules/module.py", 1775, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
    ("torch/nn/modules/module.py", 1786, "_call_impl", "return forward_call(*args, **kwargs)"),
    ("sglang/srt/layers/sampler.py", 97, "forward", "logits = self._preprocess_logits(logits, sampling_info)"),
    ("sglang/srt/layers/sampler.py", 81, "_preprocess_logits",
     'raise ValueError("Detected errors during sampling! NaN in the logits.")'),
]

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
    """phase: load | capture | forward | sample | init | dist_init | nccl_launch | nccl_serve"""
    if full:
        t = full.replace("{site}", SITE)
        return t if t.endswith("\n") else t + "\n"
    if phase == "load":
        head = LOAD_HEAD
    elif phase == "capture":
        head = CAPTURE_HEAD + model_frames(model_type)
    elif phase == "sample":
        head = SAMPLE_HEAD
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
    if frames_text and phase not in ("sample",):
        ft = expand(frames_text)
        body += ft if ft.endswith("\n") else ft + "\n"
    if not error:
        error = ("ValueError: Detected errors during sampling! NaN in the logits." if phase == "sample" else
                 "RuntimeError: CUDA error: an illegal instruction was encountered\n"
                 "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
                 "below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
                 "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
    return body + error.rstrip("\n") + "\n"
