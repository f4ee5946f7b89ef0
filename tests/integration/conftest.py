# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures of the fault and bad-input suite (root, the lab).

The session holds the lab lock from start to end and brings the lab up once (labsession.lab_session), installs the suite's
behaviour table on the GPU hosts, deploys a baseline once (so a unit, env file, record and service exist) and takes
the lab down at the end.

Side by side (``pytest -n N``, pytest-xdist): the run's controller holds the lock and brings up a lab of N slots
(``labctl.py up --slots N``); each worker is one slot, a copy of every lab host of its own, reached under the same
inventory names (``IPS``, ``INVENTORY``), with its own baseline. A test file runs whole in one worker
(``--dist loadfile``): its tests may rely on what the one before left.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(os.path.dirname(HERE))
KEY = "/var/tmp/llmserve-lab/ssh/id_ed25519"
sys.path.insert(0, os.path.join(CHECKOUT, "tests", "lab"))
# pylint: disable-next=wrong-import-position
from labsession import (lab_session, long_files_first, slot, slot_inventory, slot_ips, xdist_lab_configure,  # noqa: E402
                        xdist_lab_unconfigure)

# this process's copy of the lab's hosts (slot 0 unless pytest-xdist runs it as worker gwK) and the inventory to them
IPS = slot_ips({"gpu01": "10.77.0.11", "pve01": "10.77.0.12", "ct129": "10.77.0.13", "rt01": "10.77.0.10",
                "gpu02": "10.77.0.15"})
INVENTORY = slot_inventory()
SSH_OPTS = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
            "-o", "BatchMode=yes", "-o", "ConnectTimeout=5"]
PLAYBOOK = [os.path.join(CHECKOUT, ".venv", "bin", "ansible-playbook"), "playbooks/deploy.yml", "-i", INVENTORY]
SERVICE = "sglang"
UNIT = "/etc/systemd/system/sglang.service"
ENV_FILE = "/etc/llmserve/sglang.env"
STATE = "/var/lib/llmserve/sglang"
BEHAVIOUR = os.path.join(HERE, "behaviour.yml")

# The suite's baseline: the lab inventory's deployment with only the known-good configuration, a short fake load.
BASE_VARS = {
    "sglang_candidates": [],
    "sglang_env": {"CUDA_HOME": "/usr/local/cuda-13.0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                   "FAKE_SGLANG_LOAD_SECONDS": "0.3"},
    # above SGLang's own 5 s poll: a scheduler SIGKILLed at launch is reported by the idle main process at its next
    # poll (`Rank 0 scheduler died during initialization`), up to 5 s later
    "sglang_hang_timeout": 8,
    "gpu_cleanup_term_grace": 2,
    "gpu_cleanup_stop_timeout": 8,
}


def ssh(host, cmd, check=True, timeout=60):
    """Run a shell command on a lab host; -> CompletedProcess."""
    cp = subprocess.run(["ssh", "-i", KEY] + SSH_OPTS + ["root@%s" % IPS[host], cmd], capture_output=True,
                        text=True, timeout=timeout, check=False)
    if check and cp.returncode != 0:
        raise AssertionError("%s: %r -> %s\n%s\n%s" % (host, cmd, cp.returncode, cp.stdout, cp.stderr))
    return cp


# What "untouched" means: unit, env file (content, mode, owner), the service's state and the record, byte for byte.
SNAPSHOT = ("for f in {unit} {env} {state}/record.json; do echo \"== $f\"; "
            "stat -c '%a %U:%G %s %Y' \"$f\" 2>&1; sha256sum \"$f\" 2>&1 | cut -c1-64; done; "
            "echo '== unit state'; systemctl show -p ActiveState,SubState,MainPID,ExecMainStartTimestamp,"
            "UnitFileState,InvocationID {svc}.service; echo '== state dir'; ls -A {state} 2>&1; "
            "echo '== backups'; ls -A {state}/backups 2>&1").format(
                unit=UNIT, env=ENV_FILE, state=STATE, svc=SERVICE)


def install_behaviour(hosts=("gpu01", "ct129")):
    """The suite's behaviour table on the GPU hosts (a container restarted from a fresh root has the lab's default)."""
    for host in hosts:
        ssh(host, "cp %s /etc/fake-sglang/behaviour.yml" % BEHAVIOUR)


def snapshot(host):
    return ssh(host, SNAPSHOT).stdout


def deploy(extra_vars=None, limit=None, args=(), timeout=400, report_dir=None, inventory=None, drop=()):
    """ansible-playbook playbooks/deploy.yml -i INVENTORY -e @vars.json; -> (rc, output, reports dict).

    ``drop``: baseline variables not to pass (extra vars win over an inventory's host_vars)."""
    data = dict((k, v) for k, v in BASE_VARS.items() if k not in drop)
    data.update(extra_vars or {})
    report_dir = report_dir or tempfile.mkdtemp(prefix="llmserve-it-")
    data.setdefault("sglang_report_dir", report_dir)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as handle:
        json.dump(data, handle)
        vars_file = handle.name
    cmd = list(PLAYBOOK) + ["-e", "@" + vars_file] + list(args)
    if inventory:
        cmd[cmd.index(INVENTORY)] = inventory
    if limit:
        cmd += ["--limit", limit]
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(CHECKOUT, ".tmp", "collections"),
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    cp = subprocess.run(cmd, cwd=CHECKOUT, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    os.unlink(vars_file)
    reports = {}
    for name in os.listdir(report_dir):
        if name.endswith(".json"):
            with open(os.path.join(report_dir, name), encoding="utf-8") as handle:
                reports[name[:-5]] = json.load(handle)
    return cp.returncode, cp.stdout + cp.stderr, reports


def play(playbook, extra=None, args=(), limit=None, timeout=600):
    """``ansible-playbook PLAYBOOK -i INVENTORY -e @vars.json`` (BASE_VARS and ``extra``), custom stats shown and
    results as JSON; -> (rc, output)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as handle:
        json.dump(dict(BASE_VARS, **(extra or {})), handle)
    cmd = [PLAYBOOK[0], playbook, "-i", INVENTORY, "-e", "@" + handle.name] + list(args)
    if limit:
        cmd += ["--limit", limit]
    env = dict(playbook_env(), ANSIBLE_SHOW_CUSTOM_STATS="1", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    cp = subprocess.run(cmd, cwd=CHECKOUT, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    os.unlink(handle.name)
    return cp.returncode, cp.stdout + cp.stderr


def lab_inventory(host_vars):
    """A copy of INVENTORY with ``host_vars`` ({host: {var: value}}) added; -> its directory."""
    import shutil  # pylint: disable=import-outside-toplevel
    path = tempfile.mkdtemp(prefix="llmserve-it-inv-")
    shutil.copytree(INVENTORY, os.path.join(path, "lab"))
    os.makedirs(os.path.join(path, "lab", "host_vars"), exist_ok=True)
    for host, values in host_vars.items():
        with open(os.path.join(path, "lab", "host_vars", host + ".yml"), "w", encoding="utf-8") as handle:
            json.dump(values, handle)  # JSON is YAML
    return os.path.join(path, "lab")


def playbook_env():
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(CHECKOUT, ".tmp", "collections"),
                ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")


def serving_pids(host):
    """MainPID and the PIDs of the sglang unit's cgroup."""
    out = ssh(host, "systemctl show -p MainPID --value %s.service; "
                    "cat /sys/fs/cgroup$(systemctl show -p ControlGroup --value %s.service)/cgroup.procs "
                    "2>/dev/null || true" % (SERVICE, SERVICE)).stdout.split()
    return int(out[0]), set(int(p) for p in out[1:])


def gpu_pids(host):
    """PIDs nvidia-smi lists as compute apps."""
    out = ssh(host, "nvidia-smi --query-compute-apps=pid --format=csv,noheader").stdout
    return set(int(x) for x in out.split())


def wait_for(predicate, timeout, step=0.5):
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return True
        time.sleep(step)
    return False


class Results(object):
    """Rows for the README table: (group, case, expected, observed, ok)."""

    def __init__(self):
        self.rows = []

    def add(self, group, case, observed, ok=True):
        self.rows.append((group, case, observed, ok))


RESULTS = Results()


@pytest.fixture(scope="session")
def results():
    return RESULTS


def pytest_sessionfinish(session, exitstatus):  # pylint: disable=unused-argument
    if RESULTS.rows:
        path = os.environ.get("LLMSERVE_SUITE_RESULTS", "/tmp/llmserve-suite-results.md")
        if slot():
            path += ".slot%d" % slot()
        with open(path, "w", encoding="utf-8") as handle:
            handle.write("| group | case | what happened | ok |\n|---|---|---|---|\n")
            for group, case, observed, ok in RESULTS.rows:
                text = observed.replace("|", "/").replace("\n", " ")
                handle.write("| %s | %s | %s | %s |\n" % (group, case, text, "yes" if ok else "NO"))


# Files that take longest (minutes, one after another), started first when files run side by side, so that no
# worker is left with a long one at the end; the others follow in their usual order. Each file keeps its test order.
LONG_FIRST = ("test_rolling.py", "test_bad_inputs.py", "test_faults.py", "test_mixed_fleet.py", "test_safety.py", "test_gpu_subset.py",
              "test_pct_remote.py")


def pytest_collection_modifyitems(session, config, items):  # pylint: disable=unused-argument
    long_files_first(config, items, LONG_FIRST)


def pytest_configure(config):
    xdist_lab_configure(config)


def pytest_unconfigure(config):
    xdist_lab_unconfigure(config)


@pytest.fixture(scope="session")
def lab_up():
    """The lab, up once for the session under the lab lock (nothing deployed yet); under pytest-xdist this worker's
    slot of the lab the controller brought up."""
    if os.geteuid() != 0:
        pytest.skip("the lab needs root")
    with lab_session():
        yield


@pytest.fixture(scope="session")
def lab(lab_up):  # pylint: disable=redefined-outer-name,unused-argument
    """The lab with the suite's behaviour table and baseline deployed (once for the session)."""
    install_behaviour()
    report_dir = tempfile.mkdtemp(prefix="llmserve-it-baseline-")
    rc, out, reports = deploy(report_dir=report_dir)
    assert rc == 0, out[-4000:]
    assert all(r["final_state"] == "serving" for r in reports.values()), reports
    yield {"baseline": reports, "report_dir": report_dir}


sys.path.insert(0, HERE)
# the checkout as ansible_collections.llmserve.sglang (`make links`): the tests read with the collection's own parsers
sys.path.insert(0, os.path.join(CHECKOUT, ".tmp", "collections"))
