"""Fixtures for the lab tests. Lab tests need root; the unit tests of the fakes (test_fakes_unit.py) do not."""
import os
import subprocess
import sys

import pytest

LAB = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKOUT = os.path.dirname(os.path.dirname(LAB))
FAKES = os.path.join(LAB, "fakes")
LABCTL = [sys.executable if sys.executable.startswith("/usr/bin/") else "/usr/bin/python3", os.path.join(LAB, "labctl.py")]
KEY = "/var/tmp/llmserve-lab/ssh/id_ed25519"
IPS = {"gpu01": "10.77.0.11", "pve01": "10.77.0.12", "ct129": "10.77.0.13", "ct130": "10.77.0.14", "gpu02": "10.77.0.15"}
SSH_OPTS = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
            "-o", "BatchMode=yes", "-o", "ConnectTimeout=5"]
sys.path.insert(0, FAKES)
sys.path.insert(0, LAB)
from labsession import lab_session  # noqa: E402  pylint: disable=wrong-import-position


def ssh(host, cmd, check=True, timeout=60):
    cp = subprocess.run(["ssh", "-i", KEY, *SSH_OPTS, f"root@{IPS[host]}", cmd], capture_output=True, text=True,
                        timeout=timeout, check=False)
    if check and cp.returncode != 0:
        raise AssertionError(f"{host}: {cmd!r} -> {cp.returncode}\n{cp.stdout}\n{cp.stderr}")
    return cp


@pytest.fixture(scope="session")
def lab():
    if os.geteuid() != 0:
        pytest.skip("the lab needs root")
    # the lab lock waits while another test session or tool uses the lab; test_zz_down (last) tears the lab down and
    # checks for leftovers, and the session takes it down anyway
    with lab_session(labctl=LABCTL, up_timeout=180, down_timeout=120) as up_output:
        yield {"up_output": up_output}
