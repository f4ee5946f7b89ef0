# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plays one scenario on a lab GPU host with one SGLang (the fake or the real 0.5.23) and prints what it saw as JSON.

Runs ON the lab host (stdlib, and the collection's ``systemctl show`` parser from the checkout's .tmp/collections,
which ``make links`` makes): ``python3 diff_probe.py --python PY --model DIR --scenario NAME``. The server
runs in a transient systemd unit with the settings of the collection's unit (Type=simple, KillMode=mixed,
SIGTERM, TimeoutStopSec=30, PYTHONUNBUFFERED=1) and the argv the collection renders for a candidate. While it runs,
every 0.25 s: the status code of each endpoint (1 s to answer; /health and /health_generate, which take at
least 1 s when up, in a thread of their own with 3 s), the processes of the unit's cgroup (comm and parent), the
unit's state. Then the unit's journal, systemd's lines about how it ended and, for a stop, how long it took.

Scenarios:
  serve_stop            the known-good configuration (with --enable-metrics) becomes ready, answers one /generate
                        and a streamed one, shows /metrics, is stopped
  sched_killed_serving  the same, then its scheduler is SIGKILLed (as by the OOM killer) while serving
  killed_at_start       the scheduler is SIGKILLed at start (LAB_SCENARIO=killed with flashinfer_trtllm on SM120)
  crash_first_forward   flashinfer_trtllm forced on SM120: its MoE kernel raises at the first forward
  crash_after_requests  the known-good configuration serves, then the kernel raises on its second /generate
                        (LAB_SCENARIO=crash_serving; no health checks are asked): /generate is asked until an
                        answer fails (at most 4 times)
  sigterm_in_flight     the known-good configuration serves, is stopped while a 256-token /generate is in flight
  hang_at_load          the load never ends (LAB_SCENARIO=hang_load): stopped 10 s after "Load weight begin"
  hang_serving_stop     the known-good configuration serves; its first /generate hangs the rank (LAB_SCENARIO=
                        hang_serving) and its client gives up after 3 s; a /health_generate is asked and given up
                        after 3 s; the server is stopped with SGL_FORCE_SHUTDOWN=1 and SGLANG_HEALTH_CHECK_TIMEOUT=28,
                        so that the check is still running when uvicorn shuts down (no health checks besides)
  rank1_crash_at_load   a two-node group (--dist-init-addr, --node-rank; the probe runs on each node at once): node
                        1's rank hits a CUDA fault while loading (LAB_SCENARIO=crash_rank1 on both nodes)
"""

from __future__ import absolute_import, division, print_function

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".tmp", "collections"))
# pylint: disable-next=wrong-import-position
from ansible_collections.llmserve.sglang.plugins.module_utils._systemd import parse_show  # noqa: E402

PORT = 30100
ENDPOINTS = ("/model_info", "/server_info", "/v1/models")
# a 1-token generation that sleeps at least 1 s when the server is up (FACTS.md): asked in a thread of its own
HEALTH = ("/health", "/health_generate")
KNOWN_GOOD = ["--moe-runner-backend", "flashinfer_cutlass", "--fp4-gemm-backend", "flashinfer_cudnn"]
TRTLLM = ["--moe-runner-backend", "flashinfer_trtllm", "--fp4-gemm-backend", "flashinfer_cutlass"]
SCENARIOS = {
    # with --enable-metrics: /metrics is read after a plain and a streamed /generate (families, types, label names)
    "serve_stop": (KNOWN_GOOD + ["--enable-metrics", "--extra-metric-labels", '{"host": "lab"}'], {}),
    "sched_killed_serving": (KNOWN_GOOD, {}),
    "killed_at_start": (TRTLLM, {"LAB_SCENARIO": "killed"}),
    # without CUDA graphs on both, so that the first forward is the warm-up request on both (the real server on the
    # CPU never captures graphs; the fake, like SGLang on a GPU, would run its first forward in the capture)
    "crash_first_forward": (TRTLLM + ["--disable-cuda-graph"], {}),
    "crash_after_requests": (KNOWN_GOOD, {"LAB_SCENARIO": "crash_serving"}),
    "sigterm_in_flight": (KNOWN_GOOD, {}),
    "hang_at_load": (KNOWN_GOOD, {"LAB_SCENARIO": "hang_load"}),
    "hang_serving_stop": (KNOWN_GOOD, {"LAB_SCENARIO": "hang_serving", "SGL_FORCE_SHUTDOWN": "1",
                                       "SGLANG_HEALTH_CHECK_TIMEOUT": "28"}),
    "rank1_crash_at_load": (KNOWN_GOOD, {"LAB_SCENARIO": "crash_rank1"}),
}
# scenarios that ask no health checks of their own: a health check is a generation, which the lab's plugin in the
# real server counts among the forwards that decide its fault and the fake does not
QUIET = ("crash_after_requests", "hang_serving_stop")
HUNG_FOR = 10.0    # hang_at_load: seconds of silence after "Load weight begin" before the stop
PROMPT = {"text": "The capital city of France is", "sampling_params": {"max_new_tokens": 8, "temperature": 0}}
LONG = {"text": "Tell me a long story.", "sampling_params": {"max_new_tokens": 256, "temperature": 0, "ignore_eos": True}}


def code(path, timeout=1.0, body=None):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (PORT, path), data=body,
                                 headers={"Content-Type": "application/json"} if body else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return str(resp.status)
    except urllib.error.HTTPError as exc:
        return str(exc.code)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return "refused" if "refused" in str(reason).lower() else "timeout"


def show(unit, *props):
    out = subprocess.run(["systemctl", "show", unit] + ["-p" + p for p in props], capture_output=True, text=True,
                         check=False).stdout
    return parse_show(out)


def procs(unit):
    """[(pid, ppid, comm)] of the unit's cgroup."""
    path = "/sys/fs/cgroup/system.slice/%s/cgroup.procs" % unit
    out = []
    try:
        with open(path, encoding="utf-8") as handle:
            pids = [int(p) for p in handle.read().split()]
    except OSError:
        return out
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid, encoding="utf-8") as handle:
                stat = handle.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        out.append((pid, ppid, comm))
    return out


def shape(plist):
    """'comm<-parent comm' for each process (the main process's parent is systemd: '<-')."""
    by_pid = dict((pid, comm) for pid, _ppid, comm in plist)
    return sorted("%s<-%s" % (comm, by_pid.get(ppid, "")) for _pid, ppid, comm in plist)


def stop_unit(unit):
    """``systemctl stop`` the unit; -> (the time it was asked, the seconds the stop took)."""
    t0 = time.time()
    subprocess.run(["systemctl", "stop", unit], capture_output=True, check=False)
    return t0, round(time.time() - t0, 2)


def journal_text(invocation):
    return subprocess.run(["journalctl", "_SYSTEMD_INVOCATION_ID=%s" % invocation, "-o", "cat", "--no-pager"],
                          capture_output=True, text=True, check=False).stdout


# what Prometheus 2.42 (Debian 12) sends when it scrapes
PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                     "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


def _fake_metrics():
    """The fake SGLang's metrics module (its exposition parser), loaded by path: this host's ``sglang`` may be the
    real one."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lab", "fake_sglang", "sglang", "_fake",
                        "metrics.py")
    spec = importlib.util.spec_from_file_location("fake_sglang_metrics", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def metric_families():
    """After a streamed /generate: GET /metrics as curl asks (text 0.0.4) and as Prometheus asks (OpenMetrics) ->
    {form: {"content_type": ..., "families": ...}}."""
    stream = dict(PROMPT, stream=True)
    req = urllib.request.Request("http://127.0.0.1:%d/generate" % PORT, data=json.dumps(stream).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        resp.read()
    out = {}
    for form, accept in (("text", None), ("prometheus", PROMETHEUS_ACCEPT)):
        req = urllib.request.Request("http://127.0.0.1:%d/metrics" % PORT, headers={"Accept": accept} if accept else {})
        with urllib.request.urlopen(req, timeout=30) as resp:
            out[form] = {"content_type": resp.headers.get("Content-Type"),
                         "families": _fake_metrics().families(resp.read().decode())}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    ap.add_argument("--unit", default="llmdiff")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--dist-init-addr", help="a two-node group: rank 0's ADDRESS:PORT (--nnodes 2, --tp-size 2)")
    ap.add_argument("--node-rank", type=int, default=0)
    a = ap.parse_args()
    args, env = SCENARIOS[a.scenario]
    unit = a.unit + ".service"
    subprocess.run(["systemctl", "stop", unit], capture_output=True, check=False)
    subprocess.run(["systemctl", "reset-failed", unit], capture_output=True, check=False)
    argv = [a.python, "-m", "sglang.launch_server", "--model-path", a.model, "--served-model-name", "tiny",
            "--tp-size", "2" if a.dist_init_addr else "1", "--host", "127.0.0.1", "--port", str(PORT),
            "--quantization", "modelopt_fp4"]
    if a.dist_init_addr:
        argv += ["--nnodes", "2", "--node-rank", str(a.node_rank), "--dist-init-addr", a.dist_init_addr]
    argv += args + ["--disable-custom-all-reduce"]
    run = ["systemd-run", "--unit", a.unit, "-p", "Type=simple", "-p", "KillMode=mixed",
           "-p", "KillSignal=SIGTERM", "-p", "SendSIGKILL=yes", "-p", "TimeoutStopSec=30",
           "-p", "WorkingDirectory=/", "--setenv=PYTHONUNBUFFERED=1"]
    run += ["--setenv=%s=%s" % kv for kv in sorted(env.items())]
    started = time.time()
    subprocess.run(run + ["--"] + argv, check=True, capture_output=True)
    first = show(unit, "InvocationID")
    invocation = first.get("InvocationID", "")
    timeline = []      # (t, phase, {endpoint: code}, [shape], ActiveState)
    phase, ready_at, fault_at, stop_s, serving_shape = "starting", None, None, None, []
    state_box = {"phase": "starting", "done": False}

    def health_poll():
        # crash_after_requests counts requests: each health check is a generation, which the real server counts
        # (the lab's plugin counts prefills) and the fake does not, so that scenario asks none
        while not state_box["done"] and a.scenario not in QUIET:
            for path in HEALTH:
                ph = state_box["phase"]
                got = code(path, timeout=3.0)
                timeline.append((round(time.time() - started, 2), ph, {path: got}, [], ""))
            time.sleep(0.25)

    poller = threading.Thread(target=health_poll, daemon=True)
    poller.start()
    answer, load_begin, after_answer, metrics = None, None, None, None
    in_flight = []     # the answer to the request in flight at the stop (sigterm_in_flight)
    while time.time() - started < a.timeout:
        now = time.time() - started
        state = show(unit, "ActiveState", "MainPID")
        codes = dict((p, code(p)) for p in ENDPOINTS)
        plist = procs(unit)
        timeline.append((round(now, 2), phase, codes, shape(plist), state.get("ActiveState")))
        if state.get("ActiveState") in ("inactive", "failed"):
            break
        state_box["phase"] = phase
        if a.scenario == "hang_at_load" and phase == "starting":
            if load_begin is None and "Load weight begin" in journal_text(invocation):
                load_begin = now
            if load_begin is not None and now - load_begin >= HUNG_FOR:
                _t0, stop_s = stop_unit(unit)
                phase = "stopped"
                state_box["phase"] = phase
                continue
        if phase == "starting" and codes["/v1/models"] == "200":
            if "The server is fired up and ready to roll!" in journal_text(invocation):
                phase, ready_at = "serving", now
                state_box["phase"] = phase
                serving_shape = shape(plist)
                codes = dict((p, code(p, timeout=30.0)) for p in ENDPOINTS + (
                    HEALTH if a.scenario not in QUIET else ()))
                timeline.append((round(time.time() - started, 2), phase, codes, serving_shape, "active"))
                if a.scenario == "hang_serving_stop":
                    # both given up after 3 s: the generation is aborted by SGLang's next look at its client, the
                    # check runs on to SGLANG_HEALTH_CHECK_TIMEOUT
                    answer = code("/generate", timeout=3.0, body=json.dumps(PROMPT).encode())
                    timeline.append((round(time.time() - started, 2), phase, {"/health_generate": code(
                        "/health_generate", timeout=3.0)}, [], ""))
                    _t0, stop_s = stop_unit(unit)
                    phase = "stopped"
                    state_box["phase"] = phase
                    continue
                answer = code("/generate", timeout=60, body=json.dumps(PROMPT).encode())
                if a.scenario == "crash_after_requests":
                    for _again in range(3):
                        if answer != "200":
                            break
                        answer = code("/generate", timeout=60, body=json.dumps(PROMPT).encode())
                    phase = "after_fault"
                    state_box["phase"] = phase
                elif a.scenario == "sigterm_in_flight":
                    flight = threading.Thread(target=lambda: in_flight.append(
                        (code("/generate", timeout=120, body=json.dumps(LONG).encode()), time.time())), daemon=True)
                    flight.start()
                    time.sleep(0.5)
                    t0, stop_s = stop_unit(unit)
                    flight.join(130)
                    # the drain: how long the stop went on after the request in flight had its answer
                    after_answer = round(t0 + stop_s - max(t0, in_flight[0][1]), 2) if in_flight else None
                    phase = "stopped"
                    state_box["phase"] = phase
                elif a.scenario == "serve_stop":
                    metrics = metric_families()
                    _t0, stop_s = stop_unit(unit)
                    phase = "stopped"
                    state_box["phase"] = phase
                elif a.scenario == "sched_killed_serving":
                    sched = [pid for pid, _ppid, comm in plist if comm.startswith("sglang::schedul")]
                    for pid in sched:
                        os.kill(pid, signal.SIGKILL)
                    fault_at = time.time() - started
                    phase = "after_fault"
                    state_box["phase"] = phase
                continue
        time.sleep(0.25)
    state_box["done"] = True
    time.sleep(1.0)  # journald's last lines
    journal = journal_text(invocation)
    # systemd's own lines about this invocation: how the main process ended, the unit's result (a unit that ended
    # cleanly is unloaded at once, so `systemctl show` no longer has them)
    manager = subprocess.run(["journalctl", "INVOCATION_ID=%s" % invocation, "_PID=1", "-o", "cat", "--no-pager"],
                             capture_output=True, text=True, check=False).stdout
    props = {"manager": manager.splitlines()}
    ended = time.time() - started
    subprocess.run(["systemctl", "stop", unit], capture_output=True, check=False)
    subprocess.run(["systemctl", "reset-failed", unit], capture_output=True, check=False)
    print(json.dumps({"scenario": a.scenario, "python": a.python, "argv": argv, "env": env, "props": props,
                      "journal": journal.splitlines(), "timeline": timeline, "ready_at": ready_at,
                      "fault_at": fault_at, "ended_at": round(ended, 2), "stop_s": stop_s,
                      "serving_shape": serving_shape, "generate": answer,
                      "in_flight": in_flight[0][0] if in_flight else None, "stop_after_answer": after_answer,
                      "metrics": metrics}))


if __name__ == "__main__":
    main()
