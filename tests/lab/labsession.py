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
import os
import subprocess

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
