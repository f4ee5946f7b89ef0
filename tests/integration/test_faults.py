# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Faults: every run ends with a serving host and a written report; clean-up ends only what it may end."""

from __future__ import absolute_import, division, print_function

import json
import os
import signal
import subprocess
import tempfile
import time

from conftest import (BASE_VARS, CHECKOUT, PLAYBOOK, STATE, deploy, gpu_pids, playbook_env, serving_pids, ssh,
                      wait_for)

# candidate name -> (LAB_SCENARIO, reasons the report may give)
FAULTS = [
    ("crash-at-load", "crash_load", ("crashed",)),
    ("crash-at-first-forward", "crash_forward", ("crashed",)),
    ("sigkill-empty-log", "killed", ("killed",)),
    ("hang-after-load-end", "hang_after_load", ("hang",)),
    ("garbage", "garbage", ("garbage",)),
    ("nan-first-decode", "nan", ("nan", "crashed")),
    ("dies-on-first-request", "die_first", ("crashed",)),
    # a server that dies while the smoke test or the benchmark talks to it is judged by its own log, not by the
    # client's HTTP error
    ("dies-during-smoke", "die_smoke", ("crashed", "killed")),
    ("garbage-stop-hangs", "garbage_ignore_term", ("garbage",)),
    ("dies-during-benchmark", "die_bench", ("crashed", "killed")),
]

HOLDER = "/usr/bin/python3 %s/tests/lab/fakes/fakegpu.py hold" % CHECKOUT


def _start(host, unit, cmd):
    ssh(host, "systemd-run --unit=%s --collect %s" % (unit, cmd))


def _main_pid(host, unit):
    return int(ssh(host, "systemctl show -p MainPID --value %s" % unit).stdout.strip() or 0)


def test_faults_fall_back_to_known_good(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    host = "gpu01"
    # a stale GPU holder that ignores SIGTERM, and decoys that must survive
    _start(host, "it-stale-holder", HOLDER + " --gpus 0-7 --mib 20000 --ignore-sigterm --name python3")
    _start(host, "it-decoy-sleep", "/usr/bin/python3 -c 'import time; time.sleep(3600)'")
    _start(host, "it-decoy-named", HOLDER + " --gpus 0 --mib 300 --name keepme-holder")
    _start(host, "it-decoy-pid", HOLDER + " --gpus 1 --mib 300 --name python3")
    assert wait_for(lambda: len(gpu_pids(host)) >= 3 + len(serving_pids(host)[1] & gpu_pids(host)), 10)
    stale = _main_pid(host, "it-stale-holder")
    decoys = {u: _main_pid(host, u) for u in ("it-decoy-sleep", "it-decoy-named", "it-decoy-pid")}
    candidates = [{"name": n, "env": {"LAB_SCENARIO": s}, "force": True} for n, s, _reasons in FAULTS]
    t0 = time.time()
    rc, out, reports = deploy({
        # a base configuration of its own: the serving one is not reused, every candidate is tried
        "sglang_env": dict(BASE_VARS["sglang_env"], IT_SCENARIO_RUN="faults"),
        "sglang_candidates": candidates,
        "sglang_benchmark": {"enabled": True, "concurrency": [2], "num_prompts": 6, "input_len": 16, "output_len": 8},
        "gpu_cleanup_protected_names": ["keepme-holder"],
        "gpu_cleanup_protected_pids": [decoys["it-decoy-pid"]],
    }, limit=host)
    seconds = time.time() - t0
    try:
        report = reports[host]
        by_name = {c["name"]: c for c in report["candidates"]}
        for name, _scenario, reasons in FAULTS:
            entry = by_name[name]
            ok = entry["outcome"] == "failed" and entry["reason"] in reasons and bool(entry["evidence"])
            results.add("fault", name, "%s/%s: %s" % (entry["outcome"], entry["reason"], str(entry["evidence"])[:90]), ok)
        alive = {u: ssh(host, "kill -0 %d" % pid, check=False).returncode == 0 for u, pid in decoys.items()}
        stale_gone = ssh(host, "kill -0 %d" % stale, check=False).returncode != 0
        results.add("fault", "gpu-holder-ignoring-SIGTERM", "ended (SIGKILL after grace): %s" % stale_gone, stale_gone)
        for unit, up in alive.items():
            results.add("safety", "decoy %s survives" % unit, "alive: %s" % up, up)
        results.add("fault", "whole run (%d faults + known-good)" % len(FAULTS),
                    "rc=%s final_state=%s selected=%s in %.0f s" % (rc, report["final_state"], report["selected"], seconds),
                    rc == 0 and report["final_state"] == "serving")
        assert rc == 0, out[-4000:]
        assert report["final_state"] == "serving" and report["selected"] == "known-good", report
        assert report["fallback_used"] is True
        for name, _scenario, reasons in FAULTS:
            entry = by_name[name]
            assert entry["outcome"] == "failed", entry
            assert entry["reason"] in reasons, (name, entry["reason"], entry["evidence"])
            assert entry["evidence"], entry
        # the screen's one request killed that server: classified by the screen's own await, no full trial
        first = by_name["dies-on-first-request"]
        assert first["screen"]["outcome"] == "failed" and first["screen"]["reason"] == "crashed", first
        assert "probe request" not in first["screen"]["evidence"], first   # the crash's own line, not the HTTP error
        assert stale_gone, "the stale GPU holder survived"
        assert all(alive.values()), alive
        # nothing lost: the record has every failed candidate, the report is on disk
        record = ssh(host, "cat %s/record.json" % STATE).stdout
        for name, _scenario, _reasons in FAULTS:
            assert '"name": "%s"' % name in record or '"name":"%s"' % name in record, name
        # only the serving unit (and the protected decoys) hold GPUs
        main, procs = serving_pids(host)
        assert main > 0
        assert gpu_pids(host) - procs == {decoys["it-decoy-named"], decoys["it-decoy-pid"]}
    finally:
        for unit in ("it-stale-holder", "it-decoy-sleep", "it-decoy-named", "it-decoy-pid"):
            ssh(host, "systemctl kill -s KILL %s; systemctl stop %s" % (unit, unit), check=False)


def _interrupt(sig, results):
    """Start a deploy whose candidate loads slowly; send sig to ansible-playbook during the trial."""
    vars_file = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8")  # pylint: disable=consider-using-with
    data = dict(BASE_VARS, sglang_candidates=[{"name": "slow", "env": {"LAB_SCENARIO": "slow"}, "force": True}],
                sglang_env=dict(BASE_VARS["sglang_env"], IT_SCENARIO_RUN="interrupt-%s" % sig),
                sglang_report_dir=tempfile.mkdtemp(prefix="llmserve-it-"))
    vars_file.write(json.dumps(data))
    vars_file.close()
    proc = subprocess.Popen(PLAYBOOK + ["-e", "@" + vars_file.name, "--limit", "gpu01"], cwd=CHECKOUT,  # pylint: disable=consider-using-with
                            env=playbook_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        started = wait_for(lambda: ssh("gpu01", "grep -q LAB_SCENARIO=.slow. /etc/llmserve/sglang.env && "
                                                "systemctl is-active -q sglang.service", check=False).returncode == 0, 90)
        time.sleep(1.0)
        proc.send_signal(sig)
        out, _err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        os.unlink(vars_file.name)
    results.add("fault", "controller %s mid-trial" % signal.Signals(sig).name,
                "trial running when signalled: %s; ansible-playbook rc=%s" % (started, proc.returncode), started)
    assert started, out[-3000:]
    return proc.returncode


def test_controller_interrupted_mid_trial(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    _interrupt(signal.SIGINT, results)
    _interrupt(signal.SIGTERM, results)
    rc, out, reports = deploy({}, limit="gpu01")
    report = reports.get("gpu01", {})
    main, procs = serving_pids("gpu01")
    holders = gpu_pids("gpu01")
    env = ssh("gpu01", "cat /etc/llmserve/sglang.env").stdout
    marker = ssh("gpu01", "test -e %s/trial-in-progress" % STATE, check=False).returncode == 0
    lock = ssh("gpu01", "test -e %s/deploy.lock" % STATE, check=False).returncode == 0
    ok = (rc == 0 and report.get("final_state") == "serving" and holders and holders <= procs
          and "LAB_SCENARIO" not in env and not marker and not lock)
    results.add("fault", "next run after the interruptions",
                "rc=%s %s; GPU holders all in sglang.service: %s; stale lock taken over" % (
                    rc, report.get("final_state"), holders <= procs), ok)
    assert rc == 0, out[-4000:]
    assert report["final_state"] == "serving"
    assert main > 0 and holders and holders <= procs, (main, procs, holders)
    assert "LAB_SCENARIO" not in env
    assert not marker and not lock
