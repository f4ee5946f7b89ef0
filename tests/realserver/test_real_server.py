# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real-server gate: the collection against the real SGLang 0.5.23 on the lab (only the GPU is faked).

The lab's GPU hosts run the real ``python -m sglang.launch_server`` (PyPI sglang 0.5.23, on the CPU, with the
stand-in driver library and the tiny trained model of tests/lab/realsglang); the lab's GPU plugin plays the GPU's
failures inside the real processes, at the real call sites, so that SGLang's own code reports them. Each scenario
prints what the collection reported beside what the real server logged (the evidence line, found in the unit's
journal on the host). The tests of this file follow one another on one host (each starts from what the one before
left); test_real_deploys.py and test_real_download.py hold the gate's other real deploys.

prints what the collection reported beside what the real server logged (the evidence line, found in the unit's
journal on the host).

- S1 ``flashinfer_trtllm`` forced on SM120 -> crashed at the first forward, FlashInfer's exception as evidence
  (the lab injects that exception line; the traceback around it and the tear-down are SGLang's own)
- S2 a scheduler SIGKILLed at start, nothing logged by it -> killed (the real main process then exits with status 1)
- S3 a broken MoE kernel's NaN activations -> the real sampler serves ``!!!!`` -> garbage
- S4 the kernel error of S1 on the smoke test's first request (``LAB_SCENARIO=crash_smoke``) -> crashed, judged by
  the smoke test's watch on the unit's journal while the request waits (the real server's tree lives on for seconds
  after the traceback, a minute on a GPU that waits for CUDA core dumps)
- S5 the known-good configuration serves, is enabled and answers; a second run changes nothing
- the installed service restarts on failure: ``kill -9`` of its main process, systemd starts it again, it answers
- clean-up ends the real process tree (main, ``sglang::scheduler``, ``sglang::detokenizer``, resource tracker)

Run as root: ``make realserver`` (part of ``make test``).
"""

from __future__ import absolute_import, division, print_function

import json
import os
import re
import sys
import time
import urllib.parse

import benchcompare

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".tmp", "collections"))
# pylint: disable-next=wrong-import-position
from labsession import LAST_REPORT_DIR, recap  # noqa: E402
# pylint: disable-next=wrong-import-position
from realserver import (CHECKOUT, INJECTED_TRTLLM, RESULTS, by_name, deploy_falls_back, evidence_text, journal_line,  # noqa: E402
                        playbook, show, ssh, traceback_before)
# pylint: disable-next=wrong-import-position
from ansible_collections.llmserve.sglang.plugins.module_utils._systemd import parse_show  # noqa: E402


SINGLE = {
    "sglang_screen": False,          # one real start per candidate: the gate stays small
    "sglang_candidates": [
        {"name": "trtllm-forced", "moe_runner_backend": "flashinfer_trtllm", "force": True},
        {"name": "killed-at-start", "moe_runner_backend": "flashinfer_trtllm", "fp4_gemm_backend": "flashinfer_cutlass",
         "env": {"LAB_SCENARIO": "killed"}, "force": True},
        {"name": "cutedsl-moe", "moe_runner_backend": "flashinfer_cutedsl", "fp4_gemm_backend": "flashinfer_cudnn",
         "force": True},
        # the kernel error of S1 on the smoke test's first request, while the smoke test waits for its answer
        {"name": "crash-at-smoke", "moe_runner_backend": "flashinfer_cutlass", "fp4_gemm_backend": "flashinfer_cutlass",
         "env": {"LAB_SCENARIO": "crash_smoke"}, "force": True},
    ],
}


def test_faults_then_known_good_serves(lab):  # pylint: disable=unused-argument,redefined-outer-name
    rep, cands = deploy_falls_back(SINGLE)

    s1 = cands["trtllm-forced"]
    assert (s1["outcome"], s1["reason"]) == ("failed", "crashed"), s1
    # From the lab's injection: the exception only. The lab's GPU plugin raises it inside the real
    # ModelRunner.forward, with the text FlashInfer 0.7.2 builds on SM120 (tests/lab/behaviour/default.yml names
    # its source) and this server's own site-packages path in it.
    assert INJECTED_TRTLLM in evidence_text(s1), s1
    real1 = journal_line("gpu01", "RuntimeError: Error in function 'TrtllmGenBatchedGemmRunner' at /")
    show("S1 trtllm forced on SM120", "gpu01", s1, real1)
    assert real1, "the evidence is not a line of the real server's journal"
    assert INJECTED_TRTLLM in real1 and "/site-packages/flashinfer/data/csrc/trtllm_batched_gemm_runner.cu:218: " in real1
    # From SGLang itself: the scheduler's report and the frames of the real call down to the forward the plugin
    # replaced; then the tree's tear-down.
    tb = traceback_before("gpu01", real1)
    assert tb.startswith("Scheduler hit an exception: Traceback (most recent call last):"), tb[-3000:]
    for frame in ('/sglang/srt/managers/scheduler.py", line ', '/sglang/srt/managers/tp_worker.py", line ',
                  '/llmlab_gpu/__init__.py", line '):
        assert frame in tb, (frame, tb[-3000:])
    frames = tb.rsplit("\n", 1)[0]
    assert "/flashinfer/" not in frames, "the lab plays no FlashInfer frame on the real server: " + tb[-3000:]
    assert journal_line("gpu01", "It usually means") != "", "SGLang did not report the SIGQUIT of its scheduler"

    s2 = cands["killed-at-start"]
    assert (s2["outcome"], s2["reason"]) == ("failed", "killed"), s2
    real2 = journal_line("gpu01", "scheduler died during initialization (exit code: -9)")
    show("S2 scheduler SIGKILLed", "gpu01", s2, real2)
    assert real2, "the real main process did not report its scheduler's death"

    s3 = cands["cutedsl-moe"]
    assert (s3["outcome"], s3["reason"]) == ("failed", "garbage"), s3
    assert "!!!!" in json.dumps(s3.get("smoke") or s3.get("evidence")), s3
    show("S3 broken MoE kernel (NaN)", "gpu01", s3, "(HTTP 200, text %r)" % evidence_text(s3)[-40:])

    s4 = cands["crash-at-smoke"]
    assert (s4["outcome"], s4["reason"]) == ("failed", "crashed"), s4
    assert INJECTED_TRTLLM in evidence_text(s4), s4
    show("S4 crash during smoke (%.1f s)" % s4["seconds"], "gpu01", s4,
         journal_line("gpu01", "RuntimeError: Error in function 'TrtllmGenBatchedGemmRunner' at /"))

    s5 = cands["known-good"]
    assert (s5["outcome"], s5["reason"]) == ("ready", None), s5
    show("S5 known-good", "gpu01", s5, journal_line("gpu01", "The server is fired up and ready to roll!"))
    assert ssh("gpu01", "systemctl is-enabled sglang.service; systemctl is-active sglang.service").split() == \
        ["enabled", "active"]
    answer = ssh("gpu01", "curl -s -m 30 -H 'Content-Type: application/json' -d '{\"text\": \"The capital city of "
                          "France is\", \"sampling_params\": {\"max_new_tokens\": 12, \"temperature\": 0}}' "
                          "http://127.0.0.1:30000/generate")
    assert "Paris" in json.loads(answer)["text"], answer


def test_second_run_changes_nothing(lab):  # pylint: disable=unused-argument,redefined-outer-name
    before = ssh("gpu01", "systemctl show sglang.service -p MainPID -p InvocationID")
    rc, out, reports = playbook("deploy", SINGLE, limit="gpu01")
    assert rc == 0, out[-4000:]
    assert recap(out)["gpu01"]["changed"] == 0, out[-3000:]
    assert ssh("gpu01", "systemctl show sglang.service -p MainPID -p InvocationID") == before
    cands = by_name(reports["gpu01"])
    for name in ("trtllm-forced", "killed-at-start", "cutedsl-moe", "crash-at-smoke"):
        # forced candidates are tried again only when the record has no failure for them; these failed just now
        assert cands[name]["outcome"] in ("skipped",), cands[name]
    assert reports["gpu01"]["final_state"] == "serving"


def test_prometheus_scrapes_sglangs_own_names(lab):  # pylint: disable=unused-argument,redefined-outer-name
    """playbooks/prometheus.yml on pve01 with the last deploy's file_sd: the real server's target is up, and every
    name Prometheus has from it is SGLang's own as Prometheus 2.42 stores it (prometheus_client answers its Accept
    header with OpenMetrics, ``:`` escaped as ``_``), and one the fake serves too (its capture of the real 0.5.23)."""
    targets = os.path.join(LAST_REPORT_DIR[0], "file_sd")
    rc, out, _reports = playbook("prometheus", {"prometheus_targets_src": targets, "prometheus_scrape_interval": "1s"})
    assert rc == 0, out[-3000:]
    api = "curl -s 'http://127.0.0.1:9090/api/v1/%s'"
    up, names = [], []
    for _try in range(30):
        active = json.loads(ssh("pve01", api % "targets") or "{}").get("data", {}).get("activeTargets", [])
        up = [t["labels"].get("sglang_host") for t in active if t["labels"].get("job") == "sglang" and t["health"] == "up"]
        names = [n for n in json.loads(ssh("pve01", api % "label/__name__/values") or "{}").get("data", [])
                 if n.startswith("sglang")]
        if up == ["gpu01"] and "sglang_num_running_reqs" in names:
            break
        time.sleep(1)
    with open(os.path.join(CHECKOUT, "tests", "lab", "fake_sglang", "sglang", "_fake", "metrics-0.5.23.prom"),
              encoding="utf-8") as handle:
        fake = set(re.split(r"[{ ]", line, maxsplit=1)[0].replace(":", "_") for line in handle
                   if line.strip() and not line.startswith("#"))
    RESULTS.append("%-34s %-8s %s" % ("Prometheus on pve01", "gpu01", "target up: %s; %d sglang_* names, %d of them "
                                      "not served by the fake" % (up == ["gpu01"], len(names), len(set(names) - fake))))
    assert up == ["gpu01"], up
    for name in ("sglang_num_running_reqs", "sglang_num_queue_reqs", "sglang_gen_throughput",
                 "sglang_time_to_first_token_seconds_bucket", "sglang_e2e_request_latency_seconds_bucket",
                 "sglang_generation_tokens_total"):
        assert name in names, (name, names)
    assert not set(names) - fake, sorted(set(names) - fake)
    # the README's queries answer
    for _req in range(3):
        ssh("gpu01", "curl -s -m 30 -H 'Content-Type: application/json' -d '{\"text\": \"Hello\", \"sampling_params\": "
                     "{\"max_new_tokens\": 8}}' http://127.0.0.1:30000/generate")
    time.sleep(3)
    for query in ("sum by (host) (sglang_num_running_reqs)", "sum by (host) (sglang_num_queue_reqs)",
                  "histogram_quantile(0.95, sum by (le) (rate(sglang_time_to_first_token_seconds_bucket[5m])))",
                  "sum by (host) (rate(sglang_generation_tokens_total[1m]))"):
        found = json.loads(ssh("pve01", api % ("query?query=" + urllib.parse.quote(query))) or "{}")
        assert found.get("data", {}).get("result"), (query, found)


def test_benchmark_serves_and_reads_like_bench_serving(lab, monkeypatch):  # pylint: disable=unused-argument,redefined-outer-name
    """playbooks/benchmark.yml against the serving real server: every request served, the server alive after it;
    SGLang's own bench_serving on the same server beside it (the figures are printed; `make bench` P5 compares)."""
    pid_before = ssh("gpu01", "systemctl show -p MainPID --value sglang.service").strip()
    monkeypatch.setenv("ANSIBLE_STDOUT_CALLBACK", "ansible.builtin.json")
    rc, out, _reports = playbook("benchmark", {"sglang_benchmark": benchcompare.BENCH}, limit="gpu01")
    result, level = benchcompare.collection_result(out, "gpu01")
    pid_after = ssh("gpu01", "systemctl show -p MainPID --value sglang.service").strip()
    theirs = benchcompare.bench_serving_result(ssh("gpu01", benchcompare.bench_serving_command(), timeout=600)) or {}
    text = ("collection: %s done, %s failed; bench_serving: %s done; %s" % (
        level.get("completed"), level.get("failed"), theirs.get("completed"), benchcompare.row(level, theirs)))
    RESULTS.append("%-35s %s" % ("S6 benchmark vs bench_serving", text))
    print(RESULTS[-1])
    assert rc == 0, out[-3000:]
    assert level.get("completed") == benchcompare.BENCH["num_prompts"] and not level.get("failed"), level
    assert pid_after == pid_before != "0", (pid_before, pid_after)
    assert not journal_line("gpu01", "index out of range"), "the load test crashed the server"
    vocab = (result or {}).get("benchmark", {}).get("input") or {}
    assert vocab.get("vocab_size") and vocab["vocab_size"] <= 662, vocab
    assert theirs.get("completed") == benchcompare.BENCH["num_prompts"], ssh("gpu01", "tail -n 30 /tmp/bench-serving.log")


def test_installed_service_restarts_on_failure(lab):  # pylint: disable=unused-argument,redefined-outer-name
    """kill -9 of the serving main process: systemd starts the unit again (sglang_restart: on-failure), it answers."""
    show = ssh("gpu01", "systemctl show sglang.service -p Restart -p NRestarts -p MainPID")
    props = parse_show(show)
    assert props["Restart"] == "on-failure", show
    ssh("gpu01", "kill -9 %s" % props["MainPID"])
    deadline = time.time() + 400
    after = {}
    while time.time() < deadline:
        now = ssh("gpu01", "systemctl show sglang.service -p NRestarts -p MainPID -p InvocationID")
        after = parse_show(now)
        restarted = int(after.get("NRestarts", 0)) > int(props["NRestarts"])
        # the new invocation's own lines only
        log = ssh("gpu01", "journalctl _SYSTEMD_INVOCATION_ID=%s --no-pager -o cat" % after.get("InvocationID"))
        if restarted and "ready to roll" in log:
            break
        time.sleep(5)
    assert int(after.get("NRestarts", 0)) == int(props["NRestarts"]) + 1, after
    assert after["MainPID"] != props["MainPID"], after
    answer = ssh("gpu01", "curl -s -m 30 -H 'Content-Type: application/json' -d '{\"text\": \"The capital city of "
                          "France is\", \"sampling_params\": {\"max_new_tokens\": 12, \"temperature\": 0}}' "
                          "http://127.0.0.1:30000/generate")
    assert "Paris" in json.loads(answer)["text"], answer
    RESULTS.append("%-28s %-6s kill -9 of main %s -> systemd restart %s -> new main %s answers %r" % (
        "restart on failure", "gpu01", props["MainPID"], after["NRestarts"], after["MainPID"],
        json.loads(answer)["text"][:30]))


def test_cleanup_ends_the_real_process_tree(lab):  # pylint: disable=unused-argument,redefined-outer-name
    tree = ssh("gpu01", "ps -eo pid,ppid,comm,args --forest | grep -v ' ps \\| grep '")
    for name in ("sglang::schedul", "sglang::detoken"):
        assert name in tree, tree
    assert "resource_tracker" in tree, tree
    held = ssh("gpu01", "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader")
    assert "sglang::schedul" in held, held
    rc, out, _reports = playbook("cleanup", {}, limit="gpu01")
    assert rc == 0, out[-3000:]
    after = ssh("gpu01", "ps -eo comm,args | grep -c '[s]glang' ; nvidia-smi --query-compute-apps=pid "
                         "--format=csv,noheader | wc -l")
    assert after.split() == ["0", "0"], (after, out[-2000:])
    RESULTS.append("%-28s %-6s before: main + %s; after clean-up: no SGLang process, no GPU holder" % (
        "clean-up of the real tree", "gpu01", ", ".join(sorted(set(re.findall(r"sglang::\w+", tree))))))
