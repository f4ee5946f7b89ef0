# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the real-server gate's test files share: reaching the lab's hosts (this process's slot of the lab), running a
playbook there with the gate's variables, reading the real server's journal, and the rows each scenario prints."""

from __future__ import absolute_import, division, print_function

import os
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lab"))
# pylint: disable-next=wrong-import-position
from labsession import lab_host, run_playbook  # noqa: E402

CHECKOUT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VARS = os.path.join(CHECKOUT, "tests", "realserver", "vars.yml")
LABCTL = ["/usr/bin/python3", os.path.join(CHECKOUT, "tests", "lab", "labctl.py")]
BIN = os.path.dirname(sys.executable)
RESULTS = []
# What FlashInfer 0.7.2 raises for flashinfer_trtllm MoE on SM120 (csrc/trtllm_batched_gemm_runner.cu:216-218), as
# the lab's behaviour table plays it
INJECTED_TRTLLM = ("The trtllm-gen batched GEMM cubin manifest contains no kernels runnable on sm120; this backend "
                   "currently ships cubins for sm100, sm103 and sm107.")


def ssh(host, command, timeout=60):
    cp = subprocess.run(LABCTL + ["ssh", lab_host(host), "--", command], capture_output=True, text=True, timeout=timeout,
                        check=False)
    return cp.stdout


def playbook(name, extra, limit=None, timeout=1500, args=()):
    fd, varfile = tempfile.mkstemp(suffix=".yml")
    with os.fdopen(fd, "w") as handle:
        yaml.safe_dump(extra, handle)
    argv = ["-e", "@" + VARS, "-e", "@" + varfile] + (["-l", limit] if limit else []) + list(args)
    return run_playbook(name, argv, bin_dir=BIN, timeout=timeout)


def by_name(report):
    return dict((c["name"], c) for c in report["candidates"])


def journal_line(host, needle, unit="sglang.service"):
    """The real server's own last journal line that holds ``needle`` (the collection's evidence), or ''."""
    out = ssh(host, "journalctl -u %s --no-pager -o cat" % unit, timeout=120)
    found = [line for line in out.splitlines() if needle and needle[:80] in line]
    return found[-1] if found else ""


def traceback_before(host, line, unit="sglang.service"):
    """The real server's traceback that ends with ``line``: its journal from the last "Traceback" start before it
    (without the log prefix) up to that line."""
    out = ssh(host, "journalctl -u %s --no-pager -o cat" % unit, timeout=120)
    lines = out.splitlines()
    end = max(i for i, text in enumerate(lines) if text == line)
    start = max(i for i in range(end + 1) if "Traceback (most recent call last):" in lines[i])
    first = lines[start][lines[start].index("Scheduler hit an exception"):] if \
        "Scheduler hit an exception" in lines[start] else lines[start]
    return "\n".join([first] + lines[start + 1:end + 1])


def show(scenario, host, cand, real_line):
    row = "%-28s %-6s collection: %s/%s  evidence: %s\n%-35s real server logged: %s" % (
        scenario, host, cand["outcome"], cand["reason"], (cand.get("evidence") or "")[:150], "",
        (real_line or "(no such line)")[:200])
    RESULTS.append(row)
    print(row)


def evidence_text(cand):
    ev = cand.get("evidence") or ""
    return ev if isinstance(ev, str) else " ".join(ev)


def deploy_falls_back(extra):
    """deploy.yml on gpu01 with ``extra``, which must end serving the known-good configuration as the fallback;
    -> (gpu01's report, its candidates by name)."""
    rc, out, reports = playbook("deploy", extra, limit="gpu01")
    assert rc == 0, out[-4000:]
    rep = reports["gpu01"]
    assert rep["final_state"] == "serving" and rep["selected"] == "known-good", out[-3000:]
    assert rep["fallback_used"] is True
    return rep, by_name(rep)
