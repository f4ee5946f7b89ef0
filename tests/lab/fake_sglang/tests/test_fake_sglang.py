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
import time

from conftest import LAB, PKG_ROOT, write_table

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
    assert r.stderr.startswith("usage: launch_server.py [-h] --model-path MODEL_PATH")
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


def test_parser_introspection_matches_dump():
    sys.path.insert(0, PKG_ROOT)
    from sglang.srt.server_args import ServerArgs

    p = argparse.ArgumentParser()
    ServerArgs.add_cli_args(p)
    a = p.parse_args(["--model-path", "/m", "--tp", "8", "--context-length", "128k", "--enable-tf32-matmul"])
    assert a.tp_size == 8 and a.context_length == 128000 and a.enable_tf32_matmul is True
    with open(os.path.join(LAB, "..", "data", "sglang", "server-args-0.5.23.json")) as f:
        dump = json.load(f)
    with open(os.path.join(PKG_ROOT, "sglang", "_fake", "data", "server-args-0.5.23.json")) as f:
        assert json.load(f) == dump
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
    order = ["server_args=ServerArgs(", " TP0] Load weight begin",
             "Loading safetensors checkpoint shards:  50% Completed | 2/4", " TP0] Load weight end. elapsed=",
             " TP0] KV Cache is allocated. #tokens: ", " TP0] Capture cuda graph end. Time elapsed: ",
             f"Uvicorn running on http://127.0.0.1:{s.port}", '"GET /get_model_info HTTP/1.1" 200',
             '"POST /generate HTTP/1.1" 200', "The server is fired up and ready to roll!"]
    pos = [lg.index(x) for x in order]
    assert pos == sorted(pos), lg
    assert " TP1] Load weight end." in lg
    assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] server_args=", lg, re.M)
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
    st, b = s.json("/get_model_info", headers=auth)
    assert b["model_path"] == s.model and b["is_generation"] is True and b["weight_version"] == "default"
    st, b = s.json("/get_server_info", headers=auth)
    assert b["version"] == "0.5.23" and b["tp_size"] == 2 and b["served_model_name"] == "qwen-test"
    st, _hdrs, body = s.request("/flush_cache", headers=auth, method="POST")
    assert st == 200 and body.startswith(b"Cache flushed.")
    # fake GPU memory is held by the two ranks
    import fakegpu
    os.environ["FAKEGPU_ROOT"] = s.root
    try:
        recs = fakegpu.records()
    finally:
        del os.environ["FAKEGPU_ROOT"]
    assert sorted(int(g) for r in recs for g in r["gpus"]) == [0, 1]
    # SIGTERM: drain and exit 0
    s.proc.send_signal(signal.SIGTERM)
    assert s.wait_exit(15) == 0
    assert "Finished server process" in s.log()


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
    s = server(["--skip-server-warmup"])
    s.wait_log("Uvicorn running on")
    for _attempt in range(50):
        st, _hdrs, _body = s.request("/health")
        if st == 200:
            break
        time.sleep(0.1)
    assert st == 200
    assert "POST /generate" not in s.log() and "fired up" not in s.log()


# --- ways to die --------------------------------------------------------------------------------------------
def test_crash_trtllm_on_sm120(server):
    s = server(["--tp", "2", "--moe-runner-backend", "flashinfer_trtllm", "--quantization", "modelopt_fp4"])
    rc = s.wait_exit(30)
    assert rc == -signal.SIGKILL
    lg = s.log()
    assert re.search(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP[01]\] Scheduler hit an exception: Traceback \(most recent "
                     r"call last\):", lg)
    assert "in trtllm_fp4_block_scale_moe" in lg and "requires SM 10.x architecture" in lg
    assert "Capture cuda graph begin" in lg                # first forward = capture
    assert "Received sigquit from a child process. It usually means the child failed." in lg
    assert "fired up" not in lg


def test_crash_at_first_request_without_cuda_graph(server):
    s = server(["--moe-runner-backend", "flashinfer_trtllm", "--disable-cuda-graph"])
    assert s.wait_exit(30) == -signal.SIGKILL
    lg = s.log()
    assert "Uvicorn running on" in lg and '"GET /get_model_info' in lg
    assert "SIGQUIT received. signum=3" in lg and "It usually means one child failed." in lg
    assert "in forward_extend" in lg and "trtllm_fp4_block_scale_moe" in lg


def test_killed_variant_empty_log(server):
    s = server(["--moe-runner-backend", "flashinfer_trtllm"],
               table=os.path.join(LAB, "behaviour", "sm120-trtllm-killed.yml"))
    assert s.wait_exit(20) == -signal.SIGKILL
    assert s.log() == ""
    s2 = server(["--moe-runner-backend", "flashinfer_trtllm"], env={"LAB_SCENARIO": "killed"})
    assert s2.wait_exit(20) == -signal.SIGKILL and s2.log() == ""


def test_killed_during_load(server, tmp_path):
    t = write_table(tmp_path / "t.yml", [{"behaviour": "killed", "params": {"at": "load", "delay_seconds": 0.5}}])
    s = server(["--tp", "2"], table=t)
    assert s.wait_exit(20) == -signal.SIGKILL
    lg = s.log()
    assert "Load weight begin" in lg and "Load weight end" not in lg and "exception" not in lg


def test_hang_in_capture(server, tmp_path):
    t = write_table(tmp_path / "t.yml", [{"behaviour": "hang", "params": {"at": "capture"}}])
    s = server([], table=t)
    s.wait_log("Capture cuda graph begin")
    time.sleep(1.5)
    assert s.proc.poll() is None
    lg = s.log()
    assert "Capture cuda graph end" not in lg and "Uvicorn" not in lg


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
    assert st == 503
    assert "Health check failed. Server couldn't get a response from detokenizer for last 1 seconds." in s.log()
    assert s.proc.poll() is None


def test_garbage_cutedsl(server):
    s = server(["--moe-runner-backend", "flashinfer_cutedsl"])
    s.wait_ready()
    assert s.request("/health")[0] == 200
    st, b = s.json("/generate", {"text": "The capital of France is",
                                 "sampling_params": {"max_new_tokens": 6, "temperature": 0}})
    assert b["text"] == "!!!!!!"


def test_nan_dies_on_first_decode(server, tmp_path):
    t = write_table(tmp_path / "t.yml", [{"match": {"arch": "sm120"}, "behaviour": "nan"}])
    s = server(["--tp", "2"], table=t)
    assert s.wait_exit(30) == -signal.SIGKILL
    lg = s.log()
    assert "Detected errors during sampling! NaN in the logits." in lg
    assert "ValueError: Detected errors during sampling! NaN in the logits." in lg
    assert "fired up" not in lg


def test_watchdog(server, tmp_path):
    t = write_table(tmp_path / "t.yml", [{"behaviour": "watchdog", "params": {"watchdog_grace_seconds": 0.2}}])
    s = server(["--watchdog-timeout", "1"], table=t)
    assert s.wait_exit(30) == -signal.SIGKILL
    lg = s.log()
    assert "Scheduler watchdog timeout (self.watchdog_timeout=1, self.soft=False)" in lg
    assert "It usually means one child failed." in lg


def test_die_after_ready(server, tmp_path):
    t = write_table(tmp_path / "t.yml", [{"behaviour": "die_after_ready", "params": {"requests": 2}}])
    s = server([], table=t)
    s.wait_ready()
    for _attempt in range(2):
        assert s.json("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 2}})[0] == 200
    try:
        s.request("/generate", {"text": "hi"}, timeout=10)
    except OSError:
        pass
    assert s.wait_exit(20) == -signal.SIGKILL
    assert "SIGQUIT received." in s.log()


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
    assert "Initialization failed. warmup error: Traceback (most recent call last):" in s.log()


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


def test_nan_without_crash_serves_bangs(server, tmp_path):
    t = write_table(tmp_path / "t.yml", [{"behaviour": "nan", "params": {"nan_crash": False}}])
    s = server([], table=t)
    s.wait_ready()
    b = s.json("/generate", {"text": "The capital of France is", "sampling_params": {"max_new_tokens": 4}})[1]
    assert b["text"] == "!!!!" and "Detected errors during sampling! NaN in the logits." in s.log()


def test_rank_killed_from_outside_makes_server_unhealthy(server):
    s = server(["--tp", "2"], env={"SGLANG_HEALTH_CHECK_TIMEOUT": "1"})
    s.wait_ready()
    ranks = [int(p) for p in open(f"/proc/{s.proc.pid}/task/{s.proc.pid}/children").read().split()]
    os.kill(ranks[1], signal.SIGKILL)
    time.sleep(0.3)
    assert "Child process unexpectedly failed with exitcode=9." in s.log()
    assert s.request("/health", timeout=5)[0] == 503
    assert s.proc.poll() is None


# --- multi-node tensor parallel (two fake nodes on loopback) -------------------------------------------------
NCCL_REMOTE = ("torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
               "ProcessGroupNCCL.cpp:3356, remote process exited or there was a network error, NCCL version 2.27.3\n"
               "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
               "prematurely.")
FAST = {"FAKE_SGLANG_LOAD_SECONDS": "0.3"}


def _node(server, rank, dport, *extra, env=None):
    return server(["--tp", "4", "--nnodes", "2", "--node-rank", str(rank), "--dist-init-addr", f"127.0.0.1:{dport}",
                   *extra], env={**FAST, **(env or {})})


def test_multinode_tp_not_divisible_by_nnodes():
    r = run_cli("--model-path", "/m", "--tp", "3", "--nnodes", "2", "--node-rank", "1")
    assert r.returncode == 1
    assert r.stderr.rstrip().endswith("AssertionError: tp_size must be divisible by number of nodes")


def test_multinode_serves_then_sigterm_of_node1_kills_node0(server):
    from conftest import free_port

    dport = free_port()
    n0 = _node(server, 0, dport)
    n0.wait_log(" TP0] Init torch distributed begin.")
    time.sleep(0.8)
    assert "Init torch distributed ends" not in n0.log() and _refused(n0.port)   # waits for node 1
    n1 = _node(server, 1, dport, env={"FAKE_SGLANG_LOAD_SECONDS": "1.5"})
    n1.wait_log(" TP2] Load weight begin")
    time.sleep(1.0)                                 # node 0 has loaded and captured; node 1 is still loading
    assert " TP0] Capture cuda graph end" in n0.log() and "Load weight end" not in n1.log()
    assert "Uvicorn running" not in n0.log() and _refused(n0.port)   # node 0 waits for every node to load
    lg0 = n0.wait_ready()
    lg1 = n1.wait_log(f"Starting dummy health check server at 127.0.0.1:{n1.port}")
    assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] Starting dummy health check server at ", lg1, re.M)
    assert " TP2] Load weight end." in lg1 and " TP3] Load weight end." in lg1
    assert " TP0]" not in lg1 and " TP1]" not in lg1 and "Loading safetensors" not in lg1 and "Uvicorn" not in lg1
    assert " TP0] Load weight end." in lg0 and " TP1] Load weight end." in lg0 and " TP2]" not in lg0
    b = n0.json("/generate", {"text": "The capital of France is",
                              "sampling_params": {"max_new_tokens": 5, "temperature": 0}})[1]
    assert "Paris" in b["text"]
    for path in ("/health", "/health_generate"):
        st, _h, body = n1.request(path)
        assert (st, body) == (200, b"")
    st, _h, body = n1.request("/generate", {"text": "hi"})
    assert (st, body) == (404, b'{"detail":"Not Found"}')
    assert n1.request("/get_model_info")[0] == 404
    # the GPUs of each node: local 0..1
    import fakegpu
    for node in (n0, n1):
        os.environ["FAKEGPU_ROOT"] = node.root
        try:
            recs = fakegpu.records()
        finally:
            del os.environ["FAKEGPU_ROOT"]
        assert sorted(int(g) for r in recs for g in r["gpus"]) == [0, 1]
    # a second node 1 is turned away; the pair keeps serving
    dup = _node(server, 1, dport)
    assert dup.wait_exit(20) == -signal.SIGKILL
    assert "torch.distributed.DistStoreError: node_rank 1 has already joined the store" in dup.log()
    assert n0.request("/health")[0] == 200 and n1.proc.poll() is None
    # SIGTERM of node 1: it exits 0 at once; node 0 loses its peer and dies like a crash
    n1.proc.send_signal(signal.SIGTERM)
    assert n1.wait_exit(5) == 0
    assert n0.wait_exit(15) == -signal.SIGKILL
    lg0 = n0.log()
    assert NCCL_REMOTE in lg0 and " TP0] Scheduler hit an exception: Traceback" in lg0
    assert "SIGQUIT received. signum=3" in lg0


def test_multinode_rank1_crash_takes_node0_down(server):
    from conftest import free_port

    dport = free_port()
    n0 = _node(server, 0, dport, env={"LAB_SCENARIO": "crash_rank1"})
    n1 = _node(server, 1, dport, env={"LAB_SCENARIO": "crash_rank1", "FAKE_SGLANG_DEBUG": "1"})
    assert n1.wait_exit(20) == -signal.SIGKILL
    lg1 = n1.log()
    assert "rule='multinode-rank1-crash'" in lg1
    assert re.search(r" TP[23]\] Scheduler hit an exception: Traceback", lg1)
    assert "RuntimeError: CUDA error: an illegal memory access was encountered" in lg1 and "in load_weights" in lg1
    assert "Received sigquit from a child process. It usually means the child failed." in lg1
    assert n0.wait_exit(15) == -signal.SIGKILL
    lg0 = n0.log()
    assert NCCL_REMOTE in lg0 and "fired up" not in lg0 and "illegal memory access" not in lg0
    assert "Received sigquit from a child process. It usually means the child failed." in lg0


def test_multinode_node0_alone_times_out(server):
    from conftest import free_port

    n0 = _node(server, 0, free_port(), "--dist-timeout", "1")
    assert n0.wait_exit(15) == -signal.SIGKILL
    lg = n0.log()
    assert (" TP0] Scheduler hit an exception: Traceback" in lg and "in _create_c10d_store" in lg)
    assert "torch.distributed.DistStoreError: Timed out after 2 seconds waiting for clients. 2/4 clients joined." in lg
    assert "Load weight begin" not in lg


def test_multinode_node1_alone_times_out(server):
    from conftest import free_port

    dport = free_port()
    n1 = _node(server, 1, dport, "--dist-timeout", "1")
    assert n1.wait_exit(15) == -signal.SIGKILL
    lg = n1.log()
    assert (f"torch.distributed.DistNetworkError: The client socket has timed out after 1000ms while trying to "
            f"connect to (127.0.0.1, {dport}).") in lg
    assert " TP2] Scheduler hit an exception" in lg and "Starting dummy health check server" not in lg


def test_multinode_dist_port_in_use(server):
    from conftest import free_port

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
