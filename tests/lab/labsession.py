# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab for one test session: the lab lock held from start to end, the lab up, and down again at the end.

Used by the tests that need the default lab and nothing else set up on it (tests/awx, tests/compat); the suite's
conftest also deploys a baseline inside its session.
"""

from __future__ import absolute_import, division, print_function

import contextlib
import fcntl
import json
import os
import re
import subprocess
import sys
import tempfile

CHECKOUT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LABCTL = ["/usr/bin/python3", os.path.join(CHECKOUT, "tests", "lab", "labctl.py")]
LOCK = "/var/tmp/llmserve-lab.lock"


@contextlib.contextmanager
def lab_session(up_args=()):
    """Hold the lab lock, bring the lab up (asserting it came up), yield, then take it down and let the lock go.

    ``up_args``: more arguments for ``labctl.py up`` (``["--real-sglang", "--gpu-count", "1"]``)."""
    with open(LOCK, "a+", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            cp = subprocess.run(LABCTL + ["up"] + list(up_args), capture_output=True, text=True, timeout=240, check=False)
            assert cp.returncode == 0, cp.stdout + cp.stderr
            yield
        finally:
            subprocess.run(LABCTL + ["down"], capture_output=True, text=True, timeout=240, check=False)


def run_playbook(name, args=(), bin_dir=None, timeout=600):
    """``ansible-playbook playbooks/NAME.yml -i inventories/lab ARGS`` from ``bin_dir`` (default: this interpreter's),
    its reports written to a new folder -> ``(rc, output, {host: report})``."""
    bin_dir = bin_dir or os.path.dirname(os.path.abspath(sys.executable))
    report_dir = tempfile.mkdtemp(prefix="llmserve-%s-" % name)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(CHECKOUT, ".tmp", "collections"),
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
    argv = [os.path.join(bin_dir, "ansible-playbook"), "playbooks/%s.yml" % name, "-i", "inventories/lab"]
    argv += list(args) + ["-e", "sglang_report_dir=" + report_dir]
    cp = subprocess.run(argv, cwd=CHECKOUT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    reports = {}
    for fname in sorted(os.listdir(report_dir)):
        if fname.endswith(".json"):
            with open(os.path.join(report_dir, fname), encoding="utf-8") as handle:
                reports[fname[:-5]] = json.load(handle)
    return cp.returncode, cp.stdout + cp.stderr, reports


def recap(out):
    """PLAY RECAP -> {host: {'ok': n, 'changed': n, 'failed': n, ...}}."""
    hosts = {}
    for host, fields in re.findall(r"^(\S+)\s+:\s+(ok=.*)$", out, re.M):
        hosts[host] = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", fields))
    return hosts
