"""Interpreter start-up of the lab's real SGLang (loaded by ``llmlab-gpu.pth`` in the lab's SGLang venv).

Inert unless the host is a lab host that runs the real server (the marker file below is in its seed).
It only sets what SGLang must see before its first import on a host without a GPU:

* ``SGLANG_USE_CPU_ENGINE=1``: SGLang's CPU platform (without it the CPU path imports vllm and fails);
* ``SGLANG_NCCL_SO_PATH`` to a missing file: with pip's NCCL wheel present SGLang would build a NCCL
  communicator and fail on the CPU; a missing one makes it fall back to gloo, as the recipe showed.

The stand-in for the NVIDIA driver library (``libcuda.so.1``, every call answers CUDA_ERROR_NO_DEVICE)
lies in the host's /usr/lib/x86_64-linux-gnu, where the real driver puts it.
"""
import os

MARKER = "/etc/llmserve-lab/real-sglang.json"

if os.path.exists(MARKER):
    os.environ.setdefault("SGLANG_USE_CPU_ENGINE", "1")
    os.environ.setdefault("SGLANG_NCCL_SO_PATH", "/nonexistent/libnccl.so.2")
