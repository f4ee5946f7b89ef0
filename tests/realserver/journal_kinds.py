# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Two journals compared line by line (``test_differential.py``): the fake SGLang's and the real 0.5.23's for the
same scenario. Stdlib only, so that the unit tests check the comparison itself (tests/unit/test_journal_kinds.py)."""

from __future__ import absolute_import, division, print_function

import re

# The whole journal, line by line: each line is reduced to its kind (timestamps, numbers, addresses, the python
# and site-packages paths, whitespace runs normalised; an HTTP access line to method, path and status), and a kind
# one side prints and the other never does is a difference unless a row here says why. A row: (the side that prints
# it: "fake", "real", or "either" for a race both sides run; the pattern on the normalised line; the scenarios it
# holds for, or None for all; the reason).
LAB_CPU = ("the lab's real server runs on the CPU (the lab's GPU plugin maps GPU-only choices to CPU ones): "
           "SGLang's and torch's CPU-platform lines")
GPU_CRASH = ("a kernel exception on a GPU leaves the failing rank wedged, so SGLang 0.5.23 runs its crash-dump "
             "wait (py-spy, CUDA coredump, tokenizer_manager.py), which the fake plays; on the lab's CPU the "
             "plugin's exception returns, the rank exits and SGLang finds no live scheduler")
GPU_FRAMES = ("the fake prints the kernel's own call path (each frame sourced in tests/lab/behaviour/default.yml); "
              "the lab's real server raises from its plugin's wrapper of the forward or of the weights' iterator")
ALLOWED_LINES = [
    ("real", r"^\[\] llmlab_gpu: |SITE/llmlab_gpu/|^ raise _gpu_error\(p\)$|^ out = orig_load\(self, \*a, \*\*kw\)$"
             r"|^ action\(\)$", None,
     "the lab's GPU plugin in the real server (tests/lab/realsglang/plugin): its own lines and the frame it raises "
     "from, not SGLang's"),
    ("real", r"support AWQ currently|support GGUF quantization currently|Triton is not supported on current platform"
             r"|SGLANG_CPU_OMP_THREADS_BIND|init_threads_binding|init_cpu_threads_env|Cuda graph is disabled because "
             r"of using torch native attention|Cannot detect CUDA architecture|Ignore import error when loading"
             r"|Disable prefill CUDA graph because cuda_graph_config resolved|available_cpu_mem=|cpu graph: "
             r"|is larger than numa node number", None, LAB_CPU),
    ("real", r"Found nccl from environment variable SGLANG_NCCL_SO_PATH=/nonexistent/|Failed to load NCCL library "
             r"from /nonexistent/", None,
     "the lab's real server points SGLANG_NCCL_SO_PATH at a missing file (tests/lab/realsglang/plugin/llmlab_gpu/"
     "boot.py), so that a group of more than one rank falls back to gloo on the CPU; SGLang logs both lines at its "
     "parallel init"),
    ("fake", r"available_gpu_mem=|cuda graph: ", None, "the same lines as a GPU prints them (" + LAB_CPU + ")"),
    ("fake", r"Capture target decode CUDA graph (begin|end)\.", None,
     "the lab's real server runs on the CPU, where the lab's GPU plugin turns CUDA graphs off; SGLang 0.5.23 on a "
     "GPU logs these two lines before 'Engine startup timings', as the fake does"),
    ("real", r"\[c10d\] The hostname of the client socket cannot be retrieved", None,
     "torch's c10d on a lab host, whose name no resolver knows (the lab has no DNS)"),
    ("real", r"Fail to set RLIMIT_NOFILE", None, "the lab host's hard limit of open files is below what SGLang asks"),
    ("real", r"Attention backend not specified\. Use \w+ backend by default\.", None,
     "the default depends on the arch and the model (srt/arg_groups/overrides.py:1127-1139); the fake resolves no "
     "attention backend"),
    ("real", r"Using default HuggingFace chat template", None,
     "the tokenizer's own chat template (srt/parser/template_manager.py:202); the fake reads no tokenizer"),
    ("real", r"Init Unified Radix Cache\.|Tree cache initialized: ", None,
     "the prefix cache SGLang builds depends on the model's layers (srt/mem_cache/registry.py:293); the fake builds "
     "none"),
    ("real", r"Using fallback token IDs for yes/no", None,
     "the lab's 662-token model has no one-token 'yes' and 'no' (srt/entrypoints/openai/serving_rerank.py:48)"),
    ("real", r"FastAPIDeprecationWarning: ORJSONResponse is deprecated|original_handler\(ORJSONRequest"
             r"|^ return _create_error_response\(e\)$", None,
     "FastAPI's own warning (the FastAPI release installed beside SGLang); the fake serves HTTP with the standard "
     "library"),
    ("real", r"No live scheduler processes found", ("crash_first_forward",), GPU_CRASH),
    ("fake", r"Pyspy failed|All pyspy dump attempts failed|CUDA user-triggered coredump is not enabled"
             r"|CUDA coredump pipe not found|Waiting N seconds for CUDA coredumps", ("crash_first_forward",), GPU_CRASH),
    ("fake", r"^ ", ("crash_first_forward", "crash_after_requests", "rank1_crash_at_load"), GPU_FRAMES),
    ("real", r"SITE/sglang/srt/models/qwen2\.py|in (<genexpr>|_get_all_weights)$|^ (for name, loaded_weight in weights:"
             r"|return \(\(source\.prefix \+ name, tensor\) for \(name, tensor\) in weights_iterator\)"
             r"|return self\._legacy_load_weights\(weights\)"
             r"|yield from self\._get_weights_iterator\(primary_weights\))$|^ \^+$", ("rank1_crash_at_load",),
     "the lab's model is a dense Qwen2: its load reaches the plugin's fault in the weights' iterator through "
     "qwen2.py's load_weights and the loader's iterators (and their carets); the fake prints the rule's frames, a "
     "Qwen3 MoE expert's copy (tests/lab/behaviour/default.yml)"),
    ("either", r"Gracefully exiting\.\.\. Remaining number of requests N\. Remaining requests remaining_rids=\[\S",
     ("sigterm_in_flight",),
     "SGLang's sigterm watchdog reports the requests still running at each 5-s tick: whether a tick comes before "
     "the request in flight has its answer depends on the decode speed (the real server's CPU decode is slower)"),
    ("either", r"Gracefully exiting\.\.\. Remaining number of requests N\. Remaining requests "
               r"remaining_rids=\['HEALTH_CHECK_\w+'\]\.$", ("serve_stop",),
     "a /health_generate of the probe in flight at the sigterm watchdog's first tick: its 1-token request "
     "(rid HEALTH_CHECK_<uuid hex>, entrypoints/http_server.py:754) is listed until its answer "
     "(managers/tokenizer_manager.py:2774); on both sides whether a check is still running at that tick is luck "
     "of the timing, likelier on the real server, whose CPU forward on a loaded machine takes longer"),
    ("either", r"Health check request received during shutdown\. Returning N\.", ("serve_stop",),
     "SGLang logs it for a health check between SIGTERM and its sigterm watchdog's next 5-s tick "
     "(entrypoints/http_server.py:731-733, managers/tokenizer_manager.py:3508-3510): whether one of the probe's "
     "health checks (each asked 0.25 s after the last answered; /health_generate takes 1 s while serving) lands in "
     "that 0-to-5-s window is luck of the timing, on both sides"),
    ("either", r"INFO: Waiting for (connections to close|background tasks to complete)\. \(CTRL\+C to force quit\)$",
     ("serve_stop", "sigterm_in_flight"),
     "uvicorn's shutdown (uvicorn/server.py:310-323 of uvicorn 0.55.0, which the fake plays the same way) waits for "
     "a request still running after it asked every connection to close: for its connection while its client "
     "waits, for its task alone once the client has gone. The probe asks /health_generate with 3 s to answer, and "
     "a check asked just before the sigterm watchdog's last tick is still running at the shutdown, its client there "
     "or, past 3 s, gone (the real server's CPU forward on a loaded machine can take that long): luck of the "
     "timing, on both sides"),
    ("real", r"resource_tracker: There appear to be N leaked semaphore objects|warnings\.warn\('resource_tracker: ",
     ("hang_at_load", "killed_at_start", "sched_killed_serving"),
     "Python's multiprocessing resource tracker (multiprocessing/resource_tracker.py) warns of the semaphores the "
     "real main process left when it ended without its clean-up; whether it writes before systemd kills it is a "
     "race; the fake's main process creates no semaphores"),
    ("real", r"resource_tracker: process died unexpectedly, relaunching\. Some resources might leak\."
             r"|warnings\.warn\('resource_tracker: process died unexpectedly, '", None,
     "Python's multiprocessing resource tracker (multiprocessing/resource_tracker.py:123 of 3.11.7) relaunches "
     "itself, with this warning, when a process of the real server asks for it after SGLang's kill_process_tree "
     "(srt/utils/common.py:2507) ended it first: the order of the tree's deaths is a race; the fake's tracker "
     "serves none of its processes"),
]
_PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d((?: [A-Z]{2}\d+)*)\] ")
_ACCESS = re.compile(r'INFO:\s+\S+ - "(\w+) (\S+) HTTP/[\d.]+" (\d+)')
_NORMALISE = ((re.compile(r"\x1b\[[\d;]*m"), ""),
              (re.compile(r"/\S*?/site-packages/"), "SITE/"),
              # the fake's package is on the path from the checkout, where Python's warnings name its files
              (re.compile(r"/\S*?/tests/lab/fake_sglang/"), "SITE/"),
              (re.compile(r"/\S*?/lib/python3\.\d+/"), "STDLIB/"),
              (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
              # a request's rid (uuid4 hex, GenerateReqInput's default)
              (re.compile(r"(?<![\w])[0-9a-f]{32}\b"), "RID"),
              (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "ADDR"),
              (re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?"), "N"),
              (re.compile(r"\s+"), " "))


def line_kind(line):
    """A journal line reduced to its kind, or None for a blank one."""
    if not line.strip():
        return None
    found = _PREFIX.match(line)
    head = ""
    if found:
        head = "[%s] " % re.sub(r"\d+", "N", found.group(1)).strip()
        line = line[found.end():]
    access = _ACCESS.search(line)
    if access:
        return head + "HTTP %s %s %s" % access.groups()
    if line.startswith("server_args="):
        return head + "server_args={...}"
    for pattern, repl in _NORMALISE:
        line = pattern.sub(repl, line)
    return head + line.rstrip()


def journal_differences(scenario, fake_lines, real_lines):
    """The kinds of line one side prints and the other does not: (unexplained, explained), each a list of
    (side, kind[, reason])."""
    kinds = {"fake": set(), "real": set()}
    for side, lines in (("fake", fake_lines), ("real", real_lines)):
        kinds[side] = set(k for k in (line_kind(x) for x in lines) if k is not None)
    unexplained, explained = [], []
    for side, other in (("fake", "real"), ("real", "fake")):
        for kind in sorted(kinds[side] - kinds[other]):
            reason = [r for s, pat, only, r in ALLOWED_LINES
                      if s in (side, "either") and (only is None or scenario in only) and re.search(pat, kind)]
            (explained if reason else unexplained).append((side, kind) + tuple(reason[:1]))
    return unexplained, explained
