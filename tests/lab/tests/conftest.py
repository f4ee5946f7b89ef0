"""Fixtures for the lab tests. Lab tests need root; the unit tests of the fakes (test_fakes_unit.py) do not."""
import fcntl
import os
import subprocess
import sys

import pytest

LAB = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKOUT = os.path.dirname(os.path.dirname(LAB))
FAKES = os.path.join(LAB, "fakes")
LABCTL = [sys.executable if sys.executable.startswith("/usr/bin/") else "/usr/bin/python3", os.path.join(LAB, "labctl.py")]
KEY = "/var/tmp/llmserve-lab/ssh/id_ed25519"
LOCK = "/var/tmp/llmserve-lab.lock"  # one lab at a time on a machine: held from up to down
IPS = {"gpu01": "10.77.0.11", "pve01": "10.77.0.12", "ct129": "10.77.0.13", "ct130": "10.77.0.14"}
SSH_OPTS = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
            "-o", "BatchMode=yes", "-o", "ConnectTimeout=5"]
sys.path.insert(0, FAKES)


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
    with open(LOCK, "a+", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # waits while another test session or tool uses the lab
        try:
            cp = subprocess.run([*LABCTL, "up"], capture_output=True, text=True, timeout=180, check=False)
            assert cp.returncode == 0, cp.stdout + cp.stderr
            yield {"up_output": cp.stdout}
        finally:
            # test_zz_down (last) tears the lab down and checks for leftovers; make sure it is down anyway
            subprocess.run([*LABCTL, "down"], capture_output=True, text=True, timeout=120, check=False)
