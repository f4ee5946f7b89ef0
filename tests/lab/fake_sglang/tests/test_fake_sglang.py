"""The fake SGLang behaves like the real one where the collection looks (see shared FACTS.md)."""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from fakesg_helpers import LAB, PKG_ROOT, free_port, write_table

sys.path.insert(0, PKG_ROOT)
# pylint: disable-next=wrong-import-position
from sglang._fake import metrics  # noqa: E402  (the fake's /metrics and its exposition parser)

ENV = {**os.environ, "PYTHONPATH": PKG_ROOT}


def run_cli(*args, env=None):
    e = dict(ENV)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "sglang.launch_server", *args], capture_output=True, text=True,
                          env=e, timeout=30, check=False)


# --- command line ------------------------------------------------------------------------------------------
def test_rejects_nsa_prefill_backend_like_argparse():
    r = run_cli("--model-path", "/m", "--nsa-prefill-backend", "flashmla_sparse")
    assert r.returncode == 2
    # launch_server.py's UserWarning (three lines) comes first, as 0.5.23 warns before it parses
    assert "UserWarning: 'python -m sglang.launch_server' is still supported" in r.stderr.splitlines()[0]
    assert r.stderr.splitlines()[3].startswith("usage: launch_server.py [-h] --model-path MODEL_PATH")
    assert r.stderr.rstrip().endswith("launch_server.py: error: unrecognized arguments: --nsa-prefill-backend "
                                      "flashmla_sparse")


def test_invalid_choice_and_bool_flag_value():
    r = run_cli("--model-path", "/m", "--moe-runner-backend", "nope")
    assert r.returncode == 2 and "argument --moe-runner-backend: invalid choice: 'nope' (choose from" in r.stderr
    r = run_cli("--model-path", "/m", "--trust-remote-code", "yes")
    assert r.returncode == 2 and "unrecognized arguments: yes" in r.stderr
    r = run_cli("--port", "1")
    assert r.returncode == 2 and "the following arguments are required: --model-path/--model" in r.stderr
    r = run_cli("--model-path", "/m", "--context-length", "lots")
    assert r.returncode == 2 and "invalid human_readable_int value: 'lots'" in r.stderr


def test_served_model_name_colon_rejected():
    r = run_cli("--model-path", "/m", "--served-model-name", "qwen3.5:9b")
    assert r.returncode == 1
    assert "AssertionError: served_model_name cannot contain a colon (':') character." in r.stderr


def test_parser_introspection_matches_dump(monkeypatch):
    sys.path.insert(0, PKG_ROOT)
    from sglang.srt.server_args import ServerArgs, table_path

    monkeypatch.delenv("FAKE_SGLANG_ARGS_TABLE", raising=False)
    dump_path = os.path.join(LAB, "..", "data", "sglang", "server-args-0.5.23.json")
    assert os.path.samefile(table_path("0.5.23"), dump_path)  # the unit tests' dump, the one copy

    p = argparse.ArgumentParser()
    ServerArgs.add_cli_args(p)
    a = p.parse_args(["--model-path", "/m", "--tp", "8", "--context-length", "128k", "--enable-tf32-matmul"])
    assert a.tp_size == 8 and a.context_length == 128000 and a.enable_tf32_matmul is True
    with open(dump_path) as f:
        dump = json.load(f)
    acts = {tuple(x.option_strings): x for x in p._actions}
    for o in dump["options"]:
        a = acts[tuple(o["flags"])]
        assert a.dest == o["dest"] and a.nargs == o["nargs"] and a.choices == o["choices"]
        assert getattr(a.type, "__name__", None) == o["type"]


def test_version_selectable(tmp_path):
    r = subprocess.run([sys.executable, "-c", "import sglang; print(sglang.__version__)"], capture_output=True,
                       text=True, env={**ENV, "FAKE_SGLANG_VERSION": "0.5.9"}, check=False)
    assert r.stdout.strip() == "0.5.9"
    vf = tmp_path / "version"
    vf.write_text("0.4.10\n")
    r = subprocess.run([sys.executable, "-c", "import sglang; print(sglang.__version__)"], capture_output=True,
                       text=True, env={**ENV, "FAKE_SGLANG_VERSION_FILE": str(vf)}, check=False)
    assert r.stdout.strip() == "0.4.10"


# --- ready path ---------------------------------------------------------------------------------------------
def _refused(port):
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", port))
        return False
    except ConnectionRefusedError:
        return True
    finally:
        s.close()


def test_ready_path(server):
    s = server(["--tp", "2", "--api-key", "sekret", "--served-model-name", "qwen-test"],
               env={"FAKE_SGLANG_LOAD_SECONDS": "2"})
    s.wait_log("Load weight begin")
    assert _refused(s.port), "the port must not be bound while loading"
    lg = s.wait_ready()
    # the order of tp1_idle.log / tp2_sigterm.log (real 0.5.23)
    order = ["server_args={'model_path': ", " TP0] Init parallel begin.", " TP0] Init parallel ends. elapsed=",
             " TP0] Memory baseline taken. mem usage=", " TP0] Load weight begin",
             "Multi-thread loading shards:  50% Completed | 2/4", " TP0] Load weight end. elapsed=",
             " TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: ", " TP0] Memory pool end. avail mem=",
             " TP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=",
             " TP0] Capture target decode CUDA graph end. bs=[1, 2, 4, 8, 12, 16, ",
             " TP0] max_total_num_tokens=", "] Engine startup timings (s): load_weight=",
             f"] INFO:     Started server process [{s.proc.pid}]", f"Uvicorn running on http://127.0.0.1:{s.port}",
             '"GET /model_info HTTP/1.1" 200', " TP0] Prefill batch, #new-seq: 1, ",
             '"POST /generate HTTP/1.1" 200', '"POST /freeze_gc HTTP/1.1" 200',
             "The server is fired up and ready to roll!"]
    pos = [lg.index(x) for x in order]
    assert pos == sorted(pos), lg
    assert " TP1] Load weight end." in lg and " TP1] max_total_num_tokens=" not in lg
    assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] server_args=\{'model_path': ", lg, re.M)
    assert re.search(r"\] Engine startup timings \(s\): load_weight=[\d.]+, kv_cache_allocation=[\d.]+, "
                     r"scheduler_e2e=[\d.]+, cuda_graph=\{prefill=0\.00, decode=[\d.]+, target_verify=0\.00, "
                     r"draft_prefill=0\.00, draft_decode=0\.00, draft_extend=0\.00\}, tokenizer_e2e=[\d.]+$", lg, re.M)
    assert re.search(r" TP0\] Capture target decode CUDA graph end\. bs=\[1, 2, 4, 8, 12, [\d, ]+, 256\], "
                     r"elapsed=[\d.]+ s, mem usage=[\d.]+ GB, avail mem=[\d.]+ GB\.$", lg, re.M)
    assert re.search(r"Load weight end\. elapsed=[\d.]+ s, type=Qwen3MoeForCausalLM, .*avail mem=[\d.]+ GB, "
                     r"mem usage=[\d.]+ GB\.", lg)
    st, _hdrs, body = s.request("/health")
    assert (st, body) == (200, b"")
    # API key: 401 with sglang's body; /health is exempt
    st, b = s.json("/generate", {"text": "hi"})
    assert (st, b) == (401, {"error": "Unauthorized"})
    auth = {"Authorization": "Bearer sekret"}
    st, b = s.json("/generate", {"text": "The capital city of France is",
                                 "sampling_params": {"max_new_tokens": 8, "temperature": 0}}, headers=auth)
    assert st == 200 and b["text"].startswith(" Paris.")
    m = b["meta_info"]
    assert m["finish_reason"] == {"type": "length", "length": 8} and m["completion_tokens"] == 8
    assert len(b["output_ids"]) == 8 and m["prompt_tokens"] > 0 and m["cached_tokens"] == 0 and "e2e_latency" in m
    st, b = s.json("/generate", {"text": "2 + 2 =", "sampling_params": {"max_new_tokens": 32, "temperature": 0}},
                   headers=auth)
    assert b["text"].strip() == "4" and b["meta_info"]["finish_reason"]["type"] == "stop"
    # streaming /generate: cumulative text, ends with [DONE]
    ev = s.sse("/generate", {"text": "Tell me a story", "stream": True,
                             "sampling_params": {"max_new_tokens": 12, "temperature": 0}}, headers=auth)
    assert ev[-1] == "[DONE]" and len(ev) == 13
    last = json.loads(ev[-2])
    assert last["meta_info"]["finish_reason"] == {"type": "length", "length": 12}
    assert json.loads(ev[0])["text"] and last["text"].startswith(json.loads(ev[0])["text"])
    # chat completions (plain and streaming)
    st, b = s.json("/v1/chat/completions", {"model": "qwen-test", "messages": [
        {"role": "user", "content": "What is 17 + 25?"}], "temperature": 0, "max_tokens": 32}, headers=auth)
    assert st == 200 and b["object"] == "chat.completion" and "42" in b["choices"][0]["message"]["content"]
    assert b["choices"][0]["finish_reason"] == "stop" and b["usage"]["completion_tokens"] > 0
    ev = s.sse("/v1/chat/completions", {"messages": [{"role": "user", "content": "Say hello"}], "stream": True,
                                        "stream_options": {"include_usage": True}}, headers=auth)
    assert ev[-1] == "[DONE]"
    text = "".join((json.loads(e)["choices"][0]["delta"].get("content") or "") for e in ev[:-1]
                   if json.loads(e)["choices"])
    assert text.startswith("Hello!")
    assert json.loads(ev[-2])["usage"]["completion_tokens"] > 0
    st, b = s.json("/v1/completions", {"prompt": "The capital of France is", "max_tokens": 5, "temperature": 0},
                   headers=auth)
    assert st == 200 and b["choices"][0]["text"].startswith(" Paris") and b["choices"][0]["finish_reason"] == "length"
    # validation errors are 400
    st, _hdrs, body = s.request("/v1/chat/completions", b"{not json", headers=auth)
    assert st == 400 and json.loads(body)["code"] == 400
    st, b = s.json("/v1/chat/completions", {"model": "x"}, headers=auth)
    assert st == 400
    # info endpoints
    st, b = s.json("/v1/models", headers=auth)
    assert b["object"] == "list" and b["data"][0]["id"] == "qwen-test"
    st, b = s.json("/model_info", headers=auth)
    assert b["model_path"] == s.model and b["is_generation"] is True and b["weight_version"] == "default"
    st, b = s.json("/server_info", headers=auth)
    assert b["version"] == "0.5.23" and b["tp_size"] == 2 and b["served_model_name"] == "qwen-test"
    assert "is deprecated" not in s.log()
    st, _hdrs, body = s.request("/flush_cache", headers=auth, method="POST")
    assert st == 200 and body.startswith(b"Cache flushed.")
    # fake GPU memory is held by the two ranks, named like the real processes (sglang::scheduler_TP<n>)
    recs = _records(s)
    assert sorted(int(g) for r in recs for g in r["gpus"]) == [0, 1]
    assert sorted(r["name"] for r in recs) == ["sglang::scheduler_TP0", "sglang::scheduler_TP1"]
    # and multiprocessing's resource tracker beside them (tp1_idle.pstree.txt)
    kids = _children(s)
    tracker = [p for p in kids if "multiprocessing.resource_tracker import main" in _cmdline(p)]
    assert len(tracker) == 1, [_cmdline(p) for p in kids]
    assert sorted(_comm(p) for p in kids if p not in tracker) == ["sglang::detoken", "sglang::schedul",
                                                                  "sglang::schedul"]
    # SIGTERM: drain and exit 0 (tp2_sigterm.log)
    _sigterm_exits_like_the_real(s)


def _records(s):
    import fakegpu
    os.environ["FAKEGPU_ROOT"] = s.root
    try:
        return fakegpu.records()
    finally:
        del os.environ["FAKEGPU_ROOT"]


def _children(s):
    with open(f"/proc/{s.proc.pid}/task/{s.proc.pid}/children") as f:
        return [int(p) for p in f.read().split()]


def _cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode()


def _comm(pid):
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()


def _sigterm_exits_like_the_real(s):
    """tp1_sigterm.log: exit 0 a few seconds later (the sigterm watchdog's 5-s tick), in this order."""
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)
    assert s.wait_exit(15) == 0
    assert time.time() - t0 < 6.5
    lg = s.log()
    pid = s.proc.pid
    order = ["] SIGTERM received. signum=None frame=None. Draining requests and shutting down...",
             "] Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[].",
             f"] kill_process_tree called: parent_pid={pid}, include_parent=False, pid={pid}",
             "] INFO:     Shutting down", "] INFO:     Waiting for application shutdown.",
             "] INFO:     Application shutdown complete.", f"] INFO:     Finished server process [{pid}]"]
    pos = [lg.index(x) for x in order]
    assert pos == sorted(pos), lg[-2000:]
    assert lg.count(f"kill_process_tree called: parent_pid={pid}, include_parent=False") == 2
    assert lg.rstrip().endswith(f"kill_process_tree called: parent_pid={pid}, include_parent=False, pid={pid}")


def test_health_503_until_warmup_done(server, tmp_path):
    t = write_table(tmp_path / "t.yml", [{"name": "slow-first", "behaviour": "hang",
                                          "params": {"at": "first_forward"}}])
    s = server([], table=t)
    s.wait_log("Uvicorn running on")
    time.sleep(0.5)
    st, _hdrs, body = s.request("/health")
    assert (st, body) == (503, b"")
    assert "fired up" not in s.log()


def test_skip_server_warmup(server):
    """_wait_and_warmup with --skip-server-warmup: status Up at once, no /model_info nor /generate, but the
    /freeze_gc request and the ready line all the same."""
    s = server(["--skip-server-warmup"])
    lg = s.wait_ready()
    assert lg.index("Uvicorn running on") < lg.index('"POST /freeze_gc HTTP/1.1" 200') < lg.index("fired up")
    st, _hdrs, _body = s.request("/health")
    assert st == 200
    assert "POST /generate" not in s.log() and "/model_info" not in s.log()


def test_tp1_logs_without_rank_prefix_and_plain_scheduler_name(server):
    """tp1_idle.log: a tp 1 scheduler logs with no " TP0" and is titled sglang::scheduler."""
    s = server([])
    lg = s.wait_ready()
    assert " TP0]" not in lg
    assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] Init parallel begin\.$", lg, re.M)
    assert re.search(r"^\[[\d :-]+\] Init parallel ends\. elapsed=\d+\.\d\d s$", lg, re.M)
    assert re.search(r"^\[[\d :-]+\] Capture target decode CUDA graph begin\. backend=full, num_tokens_per_req=1, "
                     r"avail mem=[\d.]+ GB$", lg, re.M)
    assert [r["name"] for r in _records(s)] == ["sglang::scheduler"]
    s.json("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 50}})
    assert re.search(r"^\[[\d :-]+\] Decode batch, #running-req: 1, #token: \d+, token usage: [\d.]+, cuda graph: "
                     r"True, gen throughput \(token/s\): [\d.]+, #queue-req: 0$", s.log(), re.M)


def test_cuda_graph_lines_follow_the_flags(server):
    s = server(["--cuda-graph-backend-decode", "breakable", "--cuda-graph-max-bs-decode", "48"])
    lg = s.wait_ready()
    assert "Capture target decode CUDA graph begin. backend=breakable, num_tokens_per_req=1, avail mem=" in lg
    assert "Capture target decode CUDA graph end. bs=[1, 2, 4, 8, 12, 16, 24, 32, 40, 48], elapsed=" in lg
    s2 = server(["--disable-cuda-graph"])
    lg = s2.wait_ready()
    assert "'--disable-cuda-graph' is deprecated and will be removed in a future release." in lg
    assert "CUDA graph begin" not in lg and "CUDA graph end" not in lg


def test_deprecated_info_endpoints_warn_on_every_call(server):
    """http_server.py: /get_model_info and /get_server_info answer, with a warning each time."""
    s = server([])
    s.wait_ready()
    for path in ("/get_model_info", "/get_model_info", "/get_server_info", "/model_info", "/server_info"):
        assert s.request(path)[0] == 200
    lg = s.log()
    assert lg.count("] Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
                    "Please use '/model_info' instead.") == 2
    assert lg.count("] Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
                    "Please use '/server_info' instead.") == 1
    warn = lg.index("Endpoint '/get_server_info' is deprecated")
    assert warn < lg.index('"GET /get_server_info HTTP/1.1" 200 OK')
    assert '"GET /get_model_info' not in lg.split("fired up")[0]      # the warm-up polls /model_info
    assert s.request("/ready")[0] == 200


# --- ways to die --------------------------------------------------------------------------------------------
FAST_DEATH = {"FAKE_SGLANG_TIME_SCALE": "0.05", "FAKE_SGLANG_LOAD_SECONDS": "6"}   # real durations / 20


def _pid_of(lg, name):
    return int(re.search(r"Subprocess %s \(pid=(\d+)\)" % name, lg).group(1))


def _running_crash_diagnostics(lg, pid, live):
    """The main process after a SIGQUIT while serving (tokenizer_manager.py running_phase_sigquit_handler and
    dump_requests_before_crash, py-spy not installed), in this order, then kill_process_tree of itself."""
    order = ["] SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
             "] Sleeping 5 seconds before crash diagnostics to let GPU activity settle."]
    if live:
        for r in live:
            order += [f"] Pyspy failed (py-spy dump --native --pid {r}). Error: /bin/sh: 1: py-spy: not found\n\n",
                      f"] Pyspy failed (py-spy dump  --pid {r}). Error: /bin/sh: 1: py-spy: not found\n\n",
                      f"] All pyspy dump attempts failed for PID {r}."]
        order += ["] CUDA user-triggered coredump is not enabled. Set CUDA_ENABLE_USER_TRIGGERED_COREDUMP=1 before "
                  "CUDA initialization."]
        order += [f"] CUDA coredump pipe not found for PID {r}: " for r in live]
        order += ["] Waiting 60.0 seconds for CUDA coredumps before exiting."]
    else:
        order += ["] No live scheduler processes found; skipping py-spy and CUDA coredump."]
    order += [f"] kill_process_tree called: parent_pid={pid}, include_parent=True, pid={pid}"]
    at = lg.index(order[0])
    for x in order[1:]:
        assert x in lg[at:], (x, lg[-4000:])
        at = lg.index(x, at)
    assert lg.rstrip().endswith(order[-1][2:])


def test_crash_trtllm_on_sm120(server):
    """A rank's exception during the launch (the capture): the launch-phase SIGQUIT handler kills the tree."""
    s = server(["--tp", "2", "--moe-runner-backend", "flashinfer_trtllm", "--quantization", "modelopt_fp4"])
    rc = s.wait_exit(30)
    assert rc == -signal.SIGKILL
    lg = s.log()
    assert re.search(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP[01]\] Scheduler hit an exception: Traceback \(most recent "
                     r"call last\):", lg)
    assert "in trtllm_fp4_block_scale_moe\n" in lg and "in tvm_ffi.core.Function.__call__\n" in lg
    site = re.search(r'File "(/\S+/site-packages)/flashinfer/fused_moe/core\.py", line 6518, in ', lg).group(1)
    assert (f"RuntimeError: Error in function 'TrtllmGenBatchedGemmRunner' at {site}/flashinfer/data/csrc/"
            "trtllm_batched_gemm_runner.cu:218: The trtllm-gen batched GEMM cubin manifest contains no kernels "
            "runnable on sm120; this backend currently ships cubins for sm100, sm103 and sm107.") in lg
    assert "] Capture target decode CUDA graph begin. backend=full" in lg     # first forward = capture
    pid = s.proc.pid
    assert re.search(r"^\[[\d :-]+\] Received sigquit from a child process\. It usually means the child failed\.$", lg,
                     re.M)
    assert lg.index("Received sigquit from a child process") < lg.index(
        f"] kill_process_tree called: parent_pid={pid}, include_parent=True, pid={pid}")
    assert "fired up" not in lg and "Sleeping 5 seconds" not in lg
    assert "ships cubins for sm100, sm103 and sm107.\n\n" in lg      # get_exception_traceback() ends with a newline


def test_crash_while_serving_diagnoses_then_kills_after_65_s(server):
    """f: an exception while serving (first request, no CUDA graph): the rank stays alive (a wedged GPU), so the
    main process runs py-spy and the CUDA coredump step, waits 60 s, then kills its tree: 5 + 60 s after the
    SIGQUIT (here scaled by 0.05), during which SIGTERM does nothing (the handler blocks the event loop)."""
    s = server(["--moe-runner-backend", "flashinfer_trtllm", "--disable-cuda-graph"], env=FAST_DEATH)
    lg = s.wait_log("Sleeping 5 seconds before crash diagnostics", 30)
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)              # ignored: the loop is blocked in the SIGQUIT handler
    assert s.wait_exit(30) == -signal.SIGKILL
    assert 2.5 < time.time() - t0 < 5.5             # 65 s * 0.05 = 3.25 s
    lg = s.log()
    assert "Uvicorn running on" in lg and '"GET /model_info' in lg
    assert "] Scheduler hit an exception: Traceback" in lg
    assert "in _execute_extend\n    ret = model_runner.model.forward(\n          ^^^^^^^^^^^^^^^^^^^^^^^^^^^\n" in lg
    assert "trtllm_fp4_block_scale_moe" in lg
    live = [int(x) for x in re.findall(r"All pyspy dump attempts failed for PID (\d+)\.", lg)]
    assert len(live) == 1
    _running_crash_diagnostics(lg, s.proc.pid, live)
    assert "SIGTERM received" not in lg and "Subprocess scheduler_0" not in lg


def test_crash_diagnostics_follow_their_env(server, tmp_path):
    t = write_table(tmp_path / "t.yml", [{"behaviour": "crash", "params": {"when": "after_requests",
                                                                           "rank_exits": True}}])
    # the failing rank exits after its SIGQUIT (as on the CPU run): no live scheduler, ~5 s
    s = server([], table=t, env=FAST_DEATH)
    s.wait_ready()
    try:
        s.request("/generate", {"text": "hi"}, timeout=10)
    except OSError:
        pass
    assert s.wait_exit(20) == -signal.SIGKILL
    _running_crash_diagnostics(s.log(), s.proc.pid, [])
    # SGLANG_PYSPY_DUMP_BEFORE_CRASH=0 and SGLANG_CUDA_COREDUMP_BEFORE_CRASH=0: no diagnostics at all
    s2 = server([], table=t, env={**FAST_DEATH, "SGLANG_PYSPY_DUMP_BEFORE_CRASH": "0",
                                  "SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "false"})
    s2.wait_ready()
    try:
        s2.request("/generate", {"text": "hi"}, timeout=10)
    except OSError:
        pass
    assert s2.wait_exit(20) == -signal.SIGKILL
    lg = s2.log()
    assert "SIGQUIT received. signum=None, frame=None." in lg and "Sleeping 5 seconds" not in lg
    assert f"kill_process_tree called: parent_pid={s2.proc.pid}, include_parent=True" in lg


def test_killed_at_start_is_a_scheduler_death_at_launch(server):
    """e: the schedulers SIGKILLed (the OOM killer) before ready: the main process's recv() on the rank's pipe
    raises EOFError at once, it kills the rest (include_parent=False), prints the chained EOFError / RuntimeError
    traceback (as the real 0.5.23 on the lab: engine.py lines 2027 and 2029) and exits with status 1."""
    s = server(["--moe-runner-backend", "flashinfer_trtllm"],
               table=os.path.join(LAB, "behaviour", "sm120-trtllm-killed.yml"))
    t0 = time.time()
    assert s.wait_exit(20) == 1
    assert time.time() - t0 < 9
    lg = s.log()
    pid = s.proc.pid
    assert "Init parallel begin" not in lg                   # killed at its start
    tail = lg[lg.index(f"] kill_process_tree called: parent_pid={pid}, include_parent=False, pid={pid}\n"):]
    assert tail.split("\n", 1)[1].startswith("Traceback (most recent call last):\n  File \"")
    first, second = tail.split("During handling of the above exception, another exception occurred:\n")
    assert "sglang/srt/entrypoints/engine.py\", line 2027, in _wait_for_scheduler_ready\n" \
        "    data = scheduler_pipe_readers[i].recv()\n" \
        "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n" in first
    assert "multiprocessing/connection.py\", line " in first and first.rstrip().endswith("\nEOFError")
    assert second.startswith("\nTraceback (most recent call last):\n"
                             '  File "<frozen runpy>", line 198, in _run_module_as_main\n')
    assert "sglang/srt/entrypoints/engine.py\", line 2029, in _wait_for_scheduler_ready\n" \
        "    raise _scheduler_died_error(i, scheduler_procs[i])\n" in second
    assert lg.rstrip().endswith(
        "RuntimeError: Rank 0 scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), a "
        "common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check.")
    s2 = server(["--moe-runner-backend", "flashinfer_trtllm"], env={"LAB_SCENARIO": "killed"})
    assert s2.wait_exit(20) == 1 and "Rank 0 scheduler died during initialization (exit code: -9)" in s2.log()


def test_killed_during_load_and_capture(server, tmp_path):
    t = write_table(tmp_path / "t.yml", [{"behaviour": "killed", "params": {"at": "load", "delay_seconds": 0.5}}])
    s = server(["--tp", "2"], table=t)
    assert s.wait_exit(20) == 1
    lg = s.log()
    assert "Load weight begin" in lg and "Load weight end" not in lg and "hit an exception" not in lg
    assert "RuntimeError: Rank 0 scheduler died during initialization (exit code: -9)." in lg
    assert not _records(s)                                  # every holder gone: GPU memory freed
    t2 = write_table(tmp_path / "t2.yml", [{"behaviour": "killed", "params": {"at": "capture", "rank": 1}}])
    s2 = server(["--tp", "2"], table=t2)
    assert s2.wait_exit(20) == 1
    lg = s2.log()
    assert " TP1] Capture target decode CUDA graph begin." in lg and " TP1] Capture target decode CUDA graph end" \
        not in lg
    assert "RuntimeError: Rank 1 scheduler died during initialization (exit code: -9)." in lg


def test_killed_while_serving_dies_7_s_later(server, tmp_path):
    """e: tp1_kill9sched.log: the subprocess watchdog (1 s), SIGQUIT, 5 s, no live scheduler, SIGKILL."""
    t = write_table(tmp_path / "t.yml", [{"behaviour": "killed", "params": {"at": "after_requests", "requests": 1}}])
    s = server([], table=t, env={"FAKE_SGLANG_TIME_SCALE": "0.2"})
    s.wait_ready()
    assert s.json("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 2}})[0] == 200
    t0 = time.time()
    try:
        s.request("/generate", {"text": "hi"}, timeout=10)
    except OSError:
        pass
    assert s.wait_exit(20) == -signal.SIGKILL
    assert time.time() - t0 < 2.5                           # (<= 1 + 5 s) * 0.2
    lg = s.log()
    sched = _pid_of(lg, "scheduler_0")
    assert re.search(r"^\[[\d :-]+\] Subprocess scheduler_0 \(pid=%d\) crashed with exit code -9\. Triggering SIGQUIT "
                     r"for cleanup\.\.\.$" % sched, lg, re.M)
    assert lg.index("Subprocess scheduler_0") < lg.index("SIGQUIT received.")
    _running_crash_diagnostics(lg, s.proc.pid, [])
    assert "exception" not in lg


def test_hang_in_capture(server, tmp_path):
    t = write_table(tmp_path / "t.yml", [{"behaviour": "hang", "params": {"at": "capture"}}])
    s = server([], table=t)
    s.wait_log("Capture target decode CUDA graph begin")
    time.sleep(1.5)
    assert s.proc.poll() is None
    lg = s.log()
    assert "Capture target decode CUDA graph end" not in lg and "Uvicorn" not in lg


def test_hang_at_load_start_leaves_the_bar_open(server, tmp_path):
    """load_fraction 0: the rank stops as the first shard's weights arrive; its bar is drawn at 0 % with no newline
    (a journal shows it only when the stream closes), and nothing after it is logged."""
    t = write_table(tmp_path / "t.yml", [{"behaviour": "hang", "params": {"at": "load", "load_fraction": 0}}])
    s = server([], table=t, env={"FAKE_SGLANG_LOAD_SECONDS": "1"})
    s.wait_log("Load weight begin")
    time.sleep(2.5)
    assert s.proc.poll() is None
    with open(s.log_path, "rb") as f:
        raw = f.read()
    assert re.search(rb"Load weight begin[^\n]*\n\rMulti-thread loading shards:   0% Completed \| 0/\d+ "
                     rb"\[00:00<\?, \?it/s\]$", raw), raw[-200:]
    assert b"Load weight end" not in raw


def test_hang_after_ready_health_times_out(server, tmp_path):
    t = write_table(tmp_path / "t.yml", [{"behaviour": "hang", "params": {"at": "after_requests", "requests": 0}}])
    s = server([], table=t, env={"SGLANG_HEALTH_CHECK_TIMEOUT": "1"})
    s.wait_ready()
    assert s.request("/health")[0] == 200
    try:
        s.request("/generate", {"text": "hello"}, timeout=1)
    except OSError:
        pass
    st, _hdrs, _body = s.request("/health", timeout=5)
    assert st == 503 and s.request("/ready")[0] == 503
    assert re.search(r"Health check failed\. Server couldn't get a response from detokenizer for last 1 seconds\. "
                     r"tic start time: \d\d:\d\d:\d\d\. last_heartbeat time: \d\d:\d\d:\d\d$", s.log(), re.M)
    assert s.proc.poll() is None


def test_sigterm_while_unhealthy_forces_the_exit(server, tmp_path):
    """sigterm_watchdog: unhealthy -> "Force exiting.", the crash diagnostics (the hung scheduler is alive),
    ShutdownReq unanswered for 15 s, the stragglers killed, exit 0 (durations scaled by 0.05)."""
    t = write_table(tmp_path / "t.yml", [{"behaviour": "hang", "params": {"at": "after_requests", "requests": 0}}])
    s = server([], table=t, env={"SGLANG_HEALTH_CHECK_TIMEOUT": "1", "FAKE_SGLANG_TIME_SCALE": "0.05"})
    s.wait_ready()
    try:
        s.request("/generate", {"text": "hello"}, timeout=1)
    except OSError:
        pass
    assert s.request("/health", timeout=5)[0] == 503
    s.proc.send_signal(signal.SIGTERM)
    assert s.wait_exit(20) == 0
    lg = s.log()
    sched = int(re.search(r"All pyspy dump attempts failed for PID (\d+)", lg).group(1))
    order = ["SIGTERM received. signum=None frame=None.", "Signal SIGTERM received while health check failed. Force "
             "exiting.", "Sleeping 5 seconds before crash diagnostics", "Waiting 60.0 seconds for CUDA coredumps",
             f"Schedulers still alive 15s after ShutdownReq, killing them before they released: [{sched}]",
             "include_parent=False", "INFO:     Finished server process"]
    pos = [lg.index(x) for x in order]
    assert pos == sorted(pos), lg[-3000:]


def test_sigterm_lists_the_health_check_in_flight(server, tmp_path):
    """A /health_generate in flight at SIGTERM: the sigterm watchdog lists its rid, HEALTH_CHECK_<uuid hex>
    (entrypoints/http_server.py:754, managers/tokenizer_manager.py:3534), as the real 0.5.23 does when a check is
    still running at the tick; the check then fails, and the next tick forces the exit (durations scaled by 0.05)."""
    t = write_table(tmp_path / "t.yml", [{"behaviour": "hang", "params": {"at": "after_requests", "requests": 0}}])
    s = server([], table=t, env={"SGLANG_HEALTH_CHECK_TIMEOUT": "3", "FAKE_SGLANG_TIME_SCALE": "0.05"})
    s.wait_ready()
    try:
        s.request("/generate", {"text": "hello"}, timeout=1)   # the engine stalls on it
    except OSError:
        pass
    answers = []
    check = threading.Thread(target=lambda: answers.append(s.request("/health_generate", timeout=10)[0]))
    check.start()
    time.sleep(1.0)
    s.proc.send_signal(signal.SIGTERM)
    s.wait_log("'HEALTH_CHECK_", 5)
    check.join(10)
    assert answers == [503]
    assert s.wait_exit(20) == 0
    lg = s.log()
    listed = re.search(r"Remaining requests remaining_rids=\[.*'HEALTH_CHECK_[0-9a-f]{32}'.*\]\.$", lg, re.M)
    assert listed, lg[-2000:]
    assert listed.start() < lg.index(
        "Signal SIGTERM received while health check failed. Force exiting.")


def test_garbage_cutedsl(server):
    s = server(["--moe-runner-backend", "flashinfer_cutedsl"])
    s.wait_ready()
    assert s.request("/health")[0] == 200
    st, b = s.json("/generate", {"text": "The capital of France is",
                                 "sampling_params": {"max_new_tokens": 6, "temperature": 0}})
    assert b["text"] == "!!!!!!"


def test_nan_is_silent_by_default(server, tmp_path):
    """d: 0.5.23 samples NaN logits as token 0 without a word unless SGLANG_ENABLE_NAN_LOGITS_CHECK is set."""
    t = write_table(tmp_path / "t.yml", [{"match": {"arch": "sm120"}, "behaviour": "nan"}])
    s = server(["--tp", "2"], table=t)
    s.wait_ready()
    for _attempt in range(2):
        b = s.json("/generate", {"text": "The capital of France is", "sampling_params": {"max_new_tokens": 4}})[1]
        assert b["text"] == "!!!!"
    assert s.request("/health")[0] == 200 and s.proc.poll() is None
    assert "NaN" not in s.log()
    # SGLANG_SANITIZE_NAN_LOGITS: the one-time warning of maybe_warn_nan, still "!!!!"
    s2 = server([], table=t, env={"SGLANG_SANITIZE_NAN_LOGITS": "1"})
    s2.wait_ready()
    assert s2.json("/generate", {"text": "x", "sampling_params": {"max_new_tokens": 4}})[1]["text"] == "!!!!"
    assert s2.log().count("] NaN detected in sampler: next_token_logits; values were sanitized before sampling.") == 1


def test_nan_check_env_asserts_on_the_device_and_dies_like_a_crash(server, tmp_path):
    t = write_table(tmp_path / "t.yml", [{"match": {"arch": "sm120"}, "behaviour": "nan"}])
    s = server(["--tp", "2"], table=t, env={**FAST_DEATH, "SGLANG_ENABLE_NAN_LOGITS_CHECK": "1"})
    assert s.wait_exit(30) == -signal.SIGKILL
    lg = s.log()
    assert re.search(r"^/\S+/sglang/srt/utils/async_probe\.py:115: _assert_no_nan_kernel: block: \[0,0,0\], thread: "
                     r"\[0,0,0\] Assertion `NaN detected! sampler: next_token_logits` failed\.$", lg, re.M)
    assert re.search(r" TP[01]\] Scheduler hit an exception: Traceback", lg)
    assert "torch.AcceleratorError: CUDA error: device-side assert triggered\nSearch for `cudaErrorAssert' in " in lg
    assert "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n" in lg and "TORCH_USE_CUDA_DSA" not in lg
    assert "in process_batch_result_prefill\n    result.copy_done.synchronize()" in lg
    assert "fired up" not in lg
    live = sorted(int(x) for x in re.findall(r"All pyspy dump attempts failed for PID (\d+)\.", lg))
    assert len(live) == 2
    _running_crash_diagnostics(lg, s.proc.pid, sorted(live, key=lambda p: lg.index(f"PID {p}.")))
    # nan_crash: true in a rule stands for the env (tests/bench/fake_scenarios.py)
    t2 = write_table(tmp_path / "t2.yml", [{"behaviour": "nan", "params": {"nan_crash": True}}])
    s2 = server([], table=t2, env=FAST_DEATH)
    assert s2.wait_exit(30) == -signal.SIGKILL
    assert "Assertion `NaN detected! sampler: next_token_logits` failed." in s2.log()


def test_watchdog(server, tmp_path):
    t = write_table(tmp_path / "t.yml", [{"behaviour": "watchdog", "params": {"watchdog_grace_seconds": 0.2}}])
    s = server(["--watchdog-timeout", "1"], table=t, env={"FAKE_SGLANG_TIME_SCALE": "0.05"})
    assert s.wait_exit(30) == -signal.SIGKILL
    lg = s.log()
    sched = int(re.search(r"All pyspy dump attempts failed for PID (\d+)", lg).group(1))
    assert f"] Pyspy failed (py-spy dump --native --pid {sched}). Error: /bin/sh: 1: py-spy: not found\n" in lg
    assert "Scheduler watchdog timeout (self.watchdog_timeout=1, self.soft=False)" in lg
    assert lg.index("Scheduler watchdog timeout") < lg.index("SIGQUIT received. signum=None, frame=None.")
    _running_crash_diagnostics(lg, s.proc.pid, [sched])


def test_die_after_ready(server, tmp_path):
    t = write_table(tmp_path / "t.yml", [{"behaviour": "die_after_ready", "params": {"requests": 2}}])
    s = server([], table=t, env=FAST_DEATH)
    s.wait_ready()
    for _attempt in range(2):
        assert s.json("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 2}})[0] == 200
    try:
        s.request("/generate", {"text": "hi"}, timeout=10)
    except OSError:
        pass
    assert s.wait_exit(20) == -signal.SIGKILL
    assert "SIGQUIT received." in s.log() and "Waiting 60.0 seconds for CUDA coredumps" in s.log()


def test_ignore_sigterm(server, tmp_path):
    t = write_table(tmp_path / "t.yml", [{"behaviour": "ready", "ignore_sigterm": True}])
    s = server(["--tp", "2"], table=t)
    s.wait_ready()
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(1.0)
    assert s.proc.poll() is None and s.request("/health")[0] == 200


def test_warmup_failure_kills_tree(server, tmp_path):
    t = write_table(tmp_path / "t.yml", [{"behaviour": "ready", "params": {"fail_warmup": True}}])
    s = server([], table=t)
    assert s.wait_exit(20) == -signal.SIGKILL
    lg = s.log()
    assert ("Initialization failed. warmup error: Traceback (most recent call last):\n  File \"" in lg and
            "/sglang/srt/entrypoints/http_server.py\", line 2501, in _execute_server_warmup\n" in lg)
    assert "AssertionError: {\"error\": {\"message\": \"CUDA error: an illegal memory access was encountered\"}}\n\n" \
        in lg
    assert f"kill_process_tree called: parent_pid={s.proc.pid}, include_parent=True" in lg


@pytest.mark.parametrize("kind", [1, 3])
def test_request_whose_client_left_is_aborted_without_an_answer(server, tmp_path, kind):
    """A non-streamed /generate whose client went away: SGLang looks at the client after each output short of the
    last (type 3: a decode that runs on) and after SGLANG_REQUEST_STATE_WAIT_TIMEOUT seconds without one (type 1:
    a stalled engine; scaled by 0.05 here: 0.2 s), aborts the request with its error line
    (managers/tokenizer_manager.py:1963-1975, 2061-2072; entrypoints/http_server.py:988-990), and uvicorn drops the
    answer unsent, so no access line."""
    if kind == 1:
        t = write_table(tmp_path / "t.yml", [{"behaviour": "hang", "params": {"at": "after_requests", "requests": 0}}])
        s = server([], table=t, env={"FAKE_SGLANG_TIME_SCALE": "0.05"})
    else:
        s = server([])
    s.wait_ready()
    with pytest.raises(OSError):        # the engine stalls on it, or decodes on; the client gives up after 1 s
        s.request("/generate", {"text": "hello", "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True}},
                  timeout=1)
    gave_up = time.time()
    line = s.wait_log("Request is disconnected from the client side (type %d)" % kind, 5)
    assert time.time() - gave_up < 2.0, "SGLang looks at the client within a decode step or 4 s (scaled)"
    assert re.search(r"^\[[^]]+\] \[http_server\] Error: Request is disconnected from the client side \(type %d\)\. "
                     r"Abort request obj\.rid='[0-9a-f]{32}'$" % kind, line, re.M), line[-2000:]
    after_ready = s.log().split("The server is fired up and ready to roll!", 1)[1]   # the warm-up's is before
    assert '"POST /generate HTTP/1.1"' not in after_ready, after_ready


@pytest.mark.parametrize("client_waits", [False, True])
def test_stop_waits_for_the_request_still_running(server, tmp_path, client_waits):
    """uvicorn's shutdown (uvicorn/server.py:290-326 of 0.55.0) waits for a /health_generate still running when
    SGL_FORCE_SHUTDOWN ends the drain at the first tick: for its connection while its client waits, for its task
    alone once its client has gone; the check fails at SGLANG_HEALTH_CHECK_TIMEOUT (3 s) on the stalled engine,
    and only then does the lifespan end (the fake's durations scaled by 0.05)."""
    t = write_table(tmp_path / "t.yml", [{"behaviour": "hang", "params": {"at": "after_requests", "requests": 0}}])
    s = server([], table=t, env={"SGL_FORCE_SHUTDOWN": "1", "SGLANG_HEALTH_CHECK_TIMEOUT": "3",
                                 "FAKE_SGLANG_TIME_SCALE": "0.05"})
    s.wait_ready()
    with pytest.raises(OSError):
        s.request("/generate", {"text": "hello"}, timeout=1)   # the engine stalls on it
    answers = []

    def check():
        try:
            answers.append(s.request("/health_generate", timeout=10 if client_waits else 0.5)[0])
        except OSError:
            answers.append("gone")

    asked = threading.Thread(target=check)
    asked.start()
    time.sleep(1.0)
    s.proc.send_signal(signal.SIGTERM)
    asked.join(15)
    assert s.wait_exit(20) == 0
    lg = s.log()
    waited = ("Waiting for connections to close. (CTRL+C to force quit)" if client_waits
              else "Waiting for background tasks to complete. (CTRL+C to force quit)")
    other = "Waiting for background tasks to complete." if client_waits else "Waiting for connections to close."
    assert waited in lg and other not in lg, lg[-3000:]
    assert lg.index("Signal SIGTERM received while force shutdown flag set. Force exiting.") < lg.index(
        "INFO:     Shutting down") < lg.index(waited) < lg.index("Health check failed.") < lg.index(
        "INFO:     Waiting for application shutdown."), lg[-3000:]
    assert answers == ([503] if client_waits else ["gone"])


def test_legacy_sgl_variable_warned_in_every_process(server):
    """An SGL_ variable is rewritten to SGLANG_ with Python's warning at environ.py's import in each SGLang
    process (environ.py:2294-2305): the main process, its one scheduler and the detokenizer."""
    s = server([], env={"SGL_FORCE_SHUTDOWN": "1"})
    lg = s.wait_ready()
    lines = lg.splitlines()
    warned = [i for i, line in enumerate(lines) if re.search(
        r"/sglang/srt/environ\.py:\d+: UserWarning: Environment variable SGL_FORCE_SHUTDOWN is deprecated, please "
        r"use SGLANG_FORCE_SHUTDOWN$", line)]
    assert len(warned) == 3 and warned[0] == 0, lg[:3000]
    assert all(lines[i + 1] == "  warnings.warn(" for i in warned)


def test_sigterm_before_the_first_request_is_uvicorns(server):
    """With --skip-server-warmup and no request yet the tokenizer manager has not taken SIGTERM over."""
    s = server(["--skip-server-warmup"])
    s.wait_ready()
    s.proc.send_signal(signal.SIGTERM)
    assert s.wait_exit(10) == 0
    lg = s.log()
    assert "SIGTERM received" not in lg and "INFO:     Shutting down" in lg
    assert lg.rstrip().endswith(f"include_parent=False, pid={s.proc.pid}")


# --- behaviour table ----------------------------------------------------------------------------------------
def test_first_match_wins_and_data_only_rule(server, tmp_path):
    t = write_table(tmp_path / "t.yml", [
        {"name": "new-scenario-plus", "match": {"arch": ["sm100", "sm120"], "tp_size": 2,
                                                "moe-runner-backend": "triton"},
         "behaviour": "garbage", "params": {"garbage_text": "+"}},
        {"name": "shadowed", "match": {"moe_runner_backend": "triton"}, "behaviour": "garbage",
         "params": {"garbage_text": "0"}},
        {"name": "rest", "behaviour": "ready"},
    ])
    s = server(["--tp-size", "2", "--moe-runner-backend", "triton"], table=t, env={"FAKE_SGLANG_DEBUG": "1"})
    s.wait_ready()
    assert s.json("/generate", {"text": "x", "sampling_params": {"max_new_tokens": 4}})[1]["text"] == "++++"
    assert "rule='new-scenario-plus'" in s.log()
    s2 = server(["--moe-runner-backend", "triton"], table=t)      # tp 1: second rule
    s2.wait_ready()
    assert s2.json("/generate", {"text": "x", "sampling_params": {"max_new_tokens": 4}})[1]["text"] == "0000"
    s3 = server(["--moe-runner-backend", "triton"], table=t, arch="sm90")
    s3.wait_ready()
    assert s3.json("/generate", {"text": "x", "sampling_params": {"max_new_tokens": 4}})[1]["text"] == "0000"


def test_default_table_seeds_ready_on_sm120_cutlass_and_sm100(server):
    s = server(["--moe-runner-backend", "flashinfer_cutlass", "--fp4-gemm-backend", "flashinfer_cudnn",
                "--quantization", "modelopt_fp4"], env={"FAKE_SGLANG_DEBUG": "1"})
    s.wait_ready()
    assert "rule='sm120-cutlass-moe-ok'" in s.log()
    s2 = server(["--moe-runner-backend", "flashinfer_trtllm"], arch="sm100")
    s2.wait_ready()


def test_dummy_load_is_faster_and_random(server, tmp_path):
    t = write_table(tmp_path / "t.yml", [{"behaviour": "ready", "params": {"load_seconds": 4}}])
    s = server(["--load-format", "dummy", "--json-model-override-args", '{"num_hidden_layers": 4}'], table=t)
    t0 = time.time()
    lg = s.wait_ready()
    assert time.time() - t0 < 3.5
    el = float(re.search(r"Load weight end\. elapsed=([\d.]+) s", lg).group(1))
    assert el < 0.2
    b = s.json("/generate", {"text": "The capital of France is",
                             "sampling_params": {"max_new_tokens": 8, "temperature": 0}})[1]
    assert "Paris" not in b["text"]
    # a dummy screen still dies on the incompatible kernel
    s2 = server(["--load-format", "dummy", "--moe-runner-backend", "flashinfer_trtllm"])
    assert s2.wait_exit(20) == -signal.SIGKILL
    assert "trtllm_fp4_block_scale_moe" in s2.log()


def test_gpu_memory_already_held_gives_oom(server):
    s0 = server([])
    s0.wait_ready()
    s = server([], env={"FAKEGPU_ROOT": s0.root})          # same fake GPUs, memory still held by s0
    assert s.wait_exit(20) == -signal.SIGKILL
    assert "torch.OutOfMemoryError: CUDA out of memory." in s.log()


def test_nan_crash_false_serves_bangs_silently(server, tmp_path):
    t = write_table(tmp_path / "t.yml", [{"behaviour": "nan", "params": {"nan_crash": False}}])
    s = server([], table=t, env={"SGLANG_ENABLE_NAN_LOGITS_CHECK": "1"})   # the rule wins over the env
    s.wait_ready()
    b = s.json("/generate", {"text": "The capital of France is", "sampling_params": {"max_new_tokens": 4}})[1]
    assert b["text"] == "!!!!" and "NaN" not in s.log()


def test_rank_killed_from_outside_while_serving(server):
    """utils/watchdog.py: a dead rank is noticed within 1 s; the live one gets py-spy'd; /health hangs."""
    s = server(["--tp", "2"], env={"FAKE_SGLANG_TIME_SCALE": "0.1", "FAKE_SGLANG_LOAD_SECONDS": "10"})
    s.wait_ready()
    ranks = [p for p in _children(s) if _comm(p) == "sglang::schedul"]
    os.kill(ranks[1], signal.SIGKILL)
    lg = s.wait_log("Sleeping 5 seconds before crash diagnostics", 5)
    assert (f"] Subprocess scheduler_1 (pid={ranks[1]}) crashed with exit code -9. Triggering SIGQUIT for "
            f"cleanup...") in lg
    try:
        s.request("/health", timeout=0.3)
        hung = False
    except OSError:
        hung = True
    assert hung, "/health must hang while the SIGQUIT handler blocks the loop"
    assert s.wait_exit(20) == -signal.SIGKILL
    _running_crash_diagnostics(s.log(), s.proc.pid, [ranks[0]])


# --- multi-node tensor parallel (two fake nodes on loopback) -------------------------------------------------
# gloo's errors for a lost peer, as the real 0.5.23 printed them (tests/unit/plugins/module_utils/data/sglang-0.5.23:
# nn2_kill_node0.log while serving, nn2_rank1_load_crash_node0.log during the launch)
PEER_RESET = re.compile(r"RuntimeError: \[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair\.cc:545\] "
                        r"Read error \[127\.0\.0\.1\]:\d+: Connection reset by peer\. This is typically caused by a "
                        r"remote worker hanging")
PEER_CLOSED = re.compile(r"RuntimeError: \[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair\.cc:561\] "
                         r"Connection closed by peer \[127\.0\.0\.1\]:\d+\. This is typically caused by a remote "
                         r"worker crashing")
# a peer lost before the barrier after the load (nn2_rank1_load_crash_node0.log): node 0 (4 ranks, 2 per node) names
# node 1's ranks, every rank of node 0 raises SGLang's ValueError from the barrier
LOAD_BARRIER = ("ProcessGroupGloo.cpp:2948] [Rank 0]: Rank 2 failed to pass monitoredBarrier in 480000 ms",
                "ProcessGroupGloo.cpp:2948] [Rank 0]: Rank 3 failed to pass monitoredBarrier in 480000 ms",
                "ProcessGroupGloo.cpp:68] [Rank 0]: Ranks 2, 3 failed to pass monitoredBarrier in 480000 ms",
                'in dist_barrier_after_load\n    raise ValueError(\n',
                "ValueError: TP rank 0 could finish the model loading, but there are other ranks that didn't finish "
                "loading. It is likely due to unexpected failures (e.g., OOM) or a slow node.")
FAST = {"FAKE_SGLANG_LOAD_SECONDS": "0.3"}


def _node(server, rank, dport, *extra, env=None):
    return server(["--tp", "4", "--nnodes", "2", "--node-rank", str(rank), "--dist-init-addr", f"127.0.0.1:{dport}",
                   *extra], env={**FAST, **(env or {})})


def test_multinode_tp_not_divisible_by_nnodes():
    r = run_cli("--model-path", "/m", "--tp", "3", "--nnodes", "2", "--node-rank", "1")
    assert r.returncode == 1
    assert r.stderr.rstrip().endswith("AssertionError: tp_size must be divisible by number of nodes")


def test_multinode_serves_sigterm_of_node1_waits_then_node0_stops_both(server):
    dport = free_port()
    n0 = _node(server, 0, dport)
    n0.wait_log(" TP0] Init parallel begin.")
    time.sleep(0.8)
    assert "Init parallel ends" not in n0.log() and _refused(n0.port)   # waits for node 1
    n1 = _node(server, 1, dport, env={"FAKE_SGLANG_LOAD_SECONDS": "1.5"})
    n1.wait_log(" TP2] Load weight begin")
    time.sleep(1.0)    # node 0 has loaded and waits at the barrier after the load; node 1 is still loading
    assert " TP0] Load weight end" in n0.log() and " TP1] Load weight end" in n0.log()
    assert "KV Cache" not in n0.log() and "Load weight end" not in n1.log()
    assert "Uvicorn running" not in n0.log() and _refused(n0.port)   # node 0 waits for every node to load
    lg0 = n0.wait_ready()
    lg1 = n1.wait_log(f"Dummy health check server started in background thread at 127.0.0.1:{n1.port}")
    # nn2_node1.log: the main process's line (no rank prefix), after its ranks' start-up
    assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] Dummy health check server started in background thread "
                     r"at 127\.0\.0\.1:\d+$", lg1, re.M)
    assert lg1.index(" TP3] Memory pool end") < lg1.index("Dummy health check server started")
    assert " TP2] Load weight end." in lg1 and " TP3] Load weight end." in lg1
    assert " TP0]" not in lg1 and " TP1]" not in lg1 and "Loading safetensors" not in lg1 and "Uvicorn" not in lg1
    assert "Engine startup timings" not in lg1 and "max_total_num_tokens" not in lg1
    assert " TP0] Load weight end." in lg0 and " TP1] Load weight end." in lg0 and " TP2]" not in lg0
    b = n0.json("/generate", {"text": "The capital of France is",
                              "sampling_params": {"max_new_tokens": 5, "temperature": 0}})[1]
    assert "Paris" in b["text"]
    for path in ("/health", "/health_generate"):
        st, _h, body = n1.request(path)
        assert (st, body) == (200, b"")
    st, _h, body = n1.request("/generate", {"text": "hi"})
    assert (st, body) == (404, b'{"detail":"Not Found"}')
    assert n1.request("/model_info")[0] == 404
    # the GPUs of each node: local 0..1, named by their global rank
    for node, names in ((n0, ["sglang::scheduler_TP0", "sglang::scheduler_TP1"]),
                        (n1, ["sglang::scheduler_TP2", "sglang::scheduler_TP3"])):
        recs = _records(node)
        assert sorted(int(g) for r in recs for g in r["gpus"]) == [0, 1]
        assert sorted(r["name"] for r in recs) == names
    # a second node 1 is turned away; the pair keeps serving
    dup = _node(server, 1, dport)
    assert dup.wait_exit(20) == -signal.SIGKILL
    assert "torch.distributed.DistStoreError: node_rank 1 has already joined the store" in dup.log()
    assert n0.request("/health")[0] == 200 and n1.proc.poll() is None
    # g: SIGTERM of node 1: it only says so and waits for rank 0's ShutdownReq; both keep serving
    n1.proc.send_signal(signal.SIGTERM)
    n1.wait_log("] SIGTERM received on node_rank 1; waiting for the rank-0 ShutdownReq broadcast to stop the "
                "schedulers.", 5)
    time.sleep(1.0)
    assert n1.proc.poll() is None and n1.request("/health")[0] == 200 and n0.request("/health")[0] == 200
    # SIGTERM of node 0: both nodes exit 0 (nn2_node0.log, nn2_node1.log)
    n0.proc.send_signal(signal.SIGTERM)
    assert n0.wait_exit(15) == 0
    assert n1.wait_exit(10) == 0
    lg0, lg1 = n0.log(), n1.log()
    assert "Gracefully exiting... Remaining number of requests 0." in lg0 and "exception" not in lg0
    ranks1 = [int(x) for x in re.findall(r"\] Scheduler or DataParallelController (\d+) terminated with 0$", lg1, re.M)]
    assert len(ranks1) == 2
    assert lg1.rstrip().endswith(f"kill_process_tree called: parent_pid={n1.proc.pid}, include_parent=False, "
                                 f"pid={n1.proc.pid}")
    assert "exception" not in lg1


def test_multinode_node1_scheduler_killed(server):
    """nn2_kill: node 1's scheduler SIGKILLed: node 1 exits 0; node 0's rank fails on the lost peer, SIGQUIT,
    5 s, no live scheduler (every local rank's collective failed), SIGKILL (durations scaled by 0.1)."""
    dport = free_port()
    env = {"FAKE_SGLANG_TIME_SCALE": "0.1", "FAKE_SGLANG_LOAD_SECONDS": "3"}
    n0 = _node(server, 0, dport, env=env)
    n1 = _node(server, 1, dport, env=env)
    n0.wait_ready()
    n1.wait_log("Dummy health check server started in background thread")
    for pid in [p for p in _children(n1) if _comm(p) == "sglang::schedul"]:
        os.kill(pid, signal.SIGKILL)
    assert n1.wait_exit(10) == 0
    lg1 = n1.log()
    assert len(re.findall(r"\] Scheduler or DataParallelController \d+ terminated with -9$", lg1, re.M)) == 2
    assert n0.wait_exit(15) == -signal.SIGKILL
    lg0 = n0.log()
    assert PEER_RESET.search(lg0) and " TP0] Scheduler hit an exception: Traceback" in lg0
    assert " TP1] Scheduler hit an exception: Traceback" in lg0
    # rank 0 sends the (empty) broadcast of the received requests, the other ranks receive it
    assert 'in _broadcast_reqs_across_ranks\n    recv_reqs = broadcast_pyobj(\n' in lg0
    assert 'common.py", line 2715, in broadcast_pyobj' in lg0 and 'common.py", line 2730, in broadcast_pyobj' in lg0
    _running_crash_diagnostics(lg0, n0.proc.pid, [])


def test_multinode_rank1_killed_at_load(server):
    """multinode-rank1-killed: node 1's schedulers SIGKILLed while loading: node 1 reports the scheduler death
    (exit 1), node 0 loses its peer during the launch."""
    dport = free_port()
    n0 = _node(server, 0, dport, env={"LAB_SCENARIO": "killed_rank1"})
    n1 = _node(server, 1, dport, env={"LAB_SCENARIO": "killed_rank1"})
    assert n1.wait_exit(20) == 1
    lg1 = n1.log()
    assert "RuntimeError: Rank 0 scheduler died during initialization (exit code: -9)." in lg1
    assert "sglang/srt/entrypoints/engine.py\", line 1236, in _launch_subprocesses" in lg1
    assert n0.wait_exit(15) == -signal.SIGKILL
    lg0 = n0.log()
    assert all(text in lg0 for text in LOAD_BARRIER), lg0[-3000:]
    assert "Received sigquit from a child process. It usually means the child failed." in lg0


def test_multinode_peer_lost_after_the_load_barrier(server):
    """Node 1's schedulers SIGKILLed once node 0 is past the barrier after the load (in its capture): node 0 fails
    with gloo's closed connection at the seed broadcast's frames (nn2_rank1_crash_after_load_node0.log)."""
    dport = free_port()
    n0 = _node(server, 0, dport, env={"FAKE_SGLANG_TIME_SCALE": "4"})     # load 1.2 s, capture 2 s
    n1 = _node(server, 1, dport)
    n0.wait_log(" TP0] Capture target decode CUDA graph begin")
    for pid in [p for p in _children(n1) if _comm(p) == "sglang::schedul"]:
        os.kill(pid, signal.SIGKILL)
    assert n0.wait_exit(15) == -signal.SIGKILL
    lg0 = n0.log()
    assert PEER_CLOSED.search(lg0) and 'tp_worker.py", line 381, in __init__\n    self.random_seed = broadcast_pyobj(' in lg0
    assert "monitoredBarrier" not in lg0 and "fired up" not in lg0


def test_multinode_rank1_crash_takes_node0_down(server):
    """multinode-rank1-crash: node 1 crashes in its load; node 0 finishes its own load and fails the monitored
    barrier after it, before its memory pools."""
    dport = free_port()
    n0 = _node(server, 0, dport, env={"LAB_SCENARIO": "crash_rank1"})
    n1 = _node(server, 1, dport, env={"LAB_SCENARIO": "crash_rank1", "FAKE_SGLANG_DEBUG": "1"})
    assert n1.wait_exit(20) == -signal.SIGKILL
    lg1 = n1.log()
    assert "rule='multinode-rank1-crash'" in lg1
    assert re.search(r" TP[23]\] Scheduler hit an exception: Traceback", lg1)
    assert "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\nSearch for " in lg1
    assert "in load_weights" in lg1 and "in _load_w13\n    expert_data.copy_(loaded_weight)\n" in lg1
    assert "Received sigquit from a child process. It usually means the child failed." in lg1
    assert n0.wait_exit(15) == -signal.SIGKILL
    lg0 = n0.log()
    assert all(text in lg0 for text in LOAD_BARRIER), lg0[-3000:]
    assert "fired up" not in lg0 and "illegal memory access" not in lg0
    assert lg0.index(" TP0] Load weight end.") < lg0.index("failed to pass monitoredBarrier")
    assert lg0.index("failed to pass monitoredBarrier") < lg0.index(" TP0] Scheduler hit an exception")
    assert "KV Cache" not in lg0
    assert "Received sigquit from a child process. It usually means the child failed." in lg0
    assert " TP0] multimem all-gather disabled because the TP group spans across nodes." in lg0


def test_multinode_node0_alone_times_out(server):
    n0 = _node(server, 0, free_port(), "--dist-timeout", "1")
    assert n0.wait_exit(15) == -signal.SIGKILL
    lg = n0.log()
    assert (" TP0] Scheduler hit an exception: Traceback" in lg and "in _create_c10d_store" in lg)
    assert "torch.distributed.DistStoreError: Timed out after 2 seconds waiting for clients. 2/4 clients joined." in lg
    assert "Load weight begin" not in lg


def test_multinode_node1_alone_times_out(server):
    dport = free_port()
    n1 = _node(server, 1, dport, "--dist-timeout", "1")
    assert n1.wait_exit(15) == -signal.SIGKILL
    lg = n1.log()
    assert (f"torch.distributed.DistNetworkError: The client socket has timed out after 1000ms while trying to "
            f"connect to (127.0.0.1, {dport}).") in lg
    assert " TP2] Scheduler hit an exception" in lg and "Dummy health check server" not in lg


def test_multinode_dist_port_in_use(server):
    dport = free_port()
    blocker = socket.socket()
    blocker.bind(("0.0.0.0", dport))
    blocker.listen(1)
    try:
        n0 = _node(server, 0, dport)
        assert n0.wait_exit(15) == -signal.SIGKILL
    finally:
        blocker.close()
    assert (f"torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
            f"address. port: {dport}, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use"
            in n0.log())


# --- metrics ----------------------------------------------------------------------------------------------
def test_metrics_are_the_real_families(server):
    """With --enable-metrics, /metrics has every family of the real 0.5.23's capture, with its type and label names,
    the served name and --extra-metric-labels in place of the capture's; without it, 404."""
    plain = server([])
    plain.wait_ready()
    assert plain.request("/metrics")[0] == 404
    s = server(["--enable-metrics", "--extra-metric-labels", '{"host": "h7"}', "--served-model-name", "m1",
                "--api-key", "k"])
    s.wait_ready()
    auth = {"Authorization": "Bearer k"}
    assert s.json("/generate", {"text": "Hello", "sampling_params": {"max_new_tokens": 4}}, headers=auth)[0] == 200
    assert s.sse("/generate", {"text": "Hi", "stream": True, "sampling_params": {"max_new_tokens": 6}},
                 headers=auth)[-1] == "[DONE]"
    st, hdrs, body = s.request("/metrics")         # no API key needed (FACTS.md)
    assert st == 200
    assert {k.lower(): v for k, v in hdrs.items()}["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    text = body.decode()
    with open(os.path.join(PKG_ROOT, "sglang", "_fake", "metrics-0.5.23.prom"), encoding="utf-8") as handle:
        real = metrics.families(handle.read())
    assert metrics.families(text) == real
    assert 'sglang:num_requests_total{engine_type="unified",host="h7",is_streaming="true",model_name="m1"} 1.0' in text
    assert 'sglang:generation_tokens_total{engine_type="unified",host="h7",is_streaming="true",model_name="m1"} 6.0' \
        in text
    assert 'sglang:inter_token_latency_seconds_count{engine_type="unified",host="h7",model_name="m1"} 5.0' in text
    # the warm-up's /model_info, /generate and /freeze_gc count, as on the real server
    assert 'sglang:num_requests_total{engine_type="unified",host="h7",is_streaming="false",model_name="m1"} 2.0' in text
    assert 'sglang:http_requests_total{endpoint="/generate",method="POST"} 3.0' in text
    assert 'sglang:http_responses_total{endpoint="/generate",method="POST",status_code="200"} 3.0' in text
    assert 'sglang:http_requests_total{endpoint="/freeze_gc",method="POST"} 1.0' in text
    assert 'sglang:http_requests_active{endpoint="/metrics",method="GET"} 1.0' in text
    assert "gpu01" not in text and "qwen3.5-397b" not in text


PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                     "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


def test_metrics_as_prometheus_asks(server):
    """With Prometheus 2.42's Accept header, OpenMetrics 1.0.0 with escaped names: the families, types and label
    names of the real 0.5.23's answer to the same header (metrics-0.5.23.openmetrics, a capture on the lab)."""
    s = server(["--enable-metrics", "--extra-metric-labels", '{"host": "h7"}'])
    s.wait_ready()
    assert s.sse("/generate", {"text": "Hi", "stream": True, "sampling_params": {"max_new_tokens": 6}})[-1] == "[DONE]"
    st, hdrs, body = s.request("/metrics", headers={"Accept": PROMETHEUS_ACCEPT})
    assert st == 200
    ctype = {k.lower(): v for k, v in hdrs.items()}["content-type"]
    assert ctype == "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores"
    text = body.decode()
    with open(os.path.join(PKG_ROOT, "sglang", "_fake", "metrics-0.5.23.openmetrics"), encoding="utf-8") as handle:
        real = handle.read()
    assert metrics.families(text) == metrics.families(real)
    assert text.endswith("# EOF\n") and "# TYPE sglang:num_requests counter" in text
    assert "\nsglang_num_requests_total{" in text and "\nsglang:" not in text
    utf8 = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8"
    st, hdrs, body = s.request("/metrics", headers={"Accept": utf8})
    assert "\nsglang:num_requests_total{" in body.decode()
