# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab for one test session: the lab lock held from start to end, the lab up, and down again at the end.

The one definition of the lab lock (``LOCK``; the Makefile reads it from here) and of taking it (``lab_lock``) and of
bringing the lab up under it (``lab_session``). Used by the tests that need the lab (tests/awx, tests/compat,
tests/realserver, the suite's and the lab tests' conftest, which deploy more inside their session) and by
tests/bench. Stdlib only: also imported by scripts run with the system's python3.
"""

from __future__ import absolute_import, division, print_function

import contextlib
import fcntl
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

CHECKOUT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LABCTL = ["/usr/bin/python3", os.path.join(CHECKOUT, "tests", "lab", "labctl.py")]
# One lab per machine: whatever brings it up, uses it or takes it down holds this flock from start to end.
LOCK = "/var/tmp/llmserve-lab.lock"
BRIDGE = "10.77.0.1"  # the controller's address on the lab bridge llmlab0 (the lab's hosts reach it)
# set to 1 by whoever brought up a lab of slots and holds it for its children: their lab_session uses it as it is
PROVIDED = "LLMSERVE_LAB_PROVIDED"


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from labctl import slot_ip, slot_name  # noqa: E402  pylint: disable=wrong-import-position


def slot():
    """This process's lab slot (``labctl.py up --slots N``): ``LLMSERVE_LAB_SLOT``, else pytest-xdist's worker number
    (``gwK`` -> K), else 0. Slot K holds a copy of every lab host: ``gpu01`` there is ``gpu01sK`` at 10.77.0.(11 + 40K)."""
    if os.environ.get("LLMSERVE_LAB_SLOT"):
        return int(os.environ["LLMSERVE_LAB_SLOT"])
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") else 0


def slot_ips(ips, k=None):
    """``{name: address}`` of the lab's hosts -> the same names with the addresses of their copies in slot ``k``."""
    k = slot() if k is None else k
    return dict((name, slot_ip(ip, k)) for name, ip in ips.items())


def lab_host(name, k=None):
    """The lab's own name of host ``name``'s copy in slot ``k`` (for labctl.py ssh/exec)."""
    return slot_name(name, slot() if k is None else k)


_SLOT_INVENTORIES = {}   # slot -> its inventory, written once per process


def slot_inventory(k=None):
    """inventories/lab for slot ``k``: the inventory itself for slot 0, else a copy (same host names) whose every
    ``ansible_host`` is the address of that host's copy in the slot; -> its directory."""
    k = slot() if k is None else k
    src = os.path.join(CHECKOUT, "inventories", "lab")
    if k == 0:
        return src
    if k in _SLOT_INVENTORIES:
        return _SLOT_INVENTORIES[k]
    dest = os.path.join(tempfile.mkdtemp(prefix="llmserve-lab-slot%d-" % k), "lab")
    shutil.copytree(src, dest)
    path = os.path.join(dest, "hosts.yml")
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    text = re.sub(r"(ansible_host:\s*)(\d+\.\d+\.\d+\.\d+)", lambda m: m.group(1) + slot_ip(m.group(2), k), text)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    _SLOT_INVENTORIES[k] = dest
    return dest


def free_bridge_port():
    """A TCP port nothing listens on at BRIDGE now."""
    sock = socket.socket()
    sock.bind((BRIDGE, 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


@contextlib.contextmanager
def bridge_server(make_argv, log_path, cwd=None, timeout=30):
    """A server on the lab bridge for the lab's hosts (a package index, a model hub mirror): ``make_argv(port)`` ->
    its argv; started with its output in ``log_path``, waited for until it listens; -> the port. Ended (SIGTERM to
    the process it started) at the end."""
    port = free_bridge_port()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(make_argv(port), cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.time() + timeout
            while True:
                try:
                    socket.create_connection((BRIDGE, port), timeout=1).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.time() > deadline:
                        with open(log_path, encoding="utf-8") as handle:
                            raise AssertionError("%s did not listen on %s:%d: %s" % (
                                make_argv(port)[0], BRIDGE, port, handle.read()[-3000:]))
                    time.sleep(0.2)
            yield port
        finally:
            proc.terminate()
            proc.wait(timeout=20)


@contextlib.contextmanager
def lab_lock():
    """Hold the lab lock (an exclusive flock on LOCK; waits while another session or tool holds it) until the end."""
    with open(LOCK, "a+", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def lab_lock_inherited():
    """True when this process runs under a holder of the lab lock: an inherited file descriptor is LOCK (run under
    ``flock LOCK ...``), or the environment says so (``LLMSERVE_LAB_LOCK_HELD=1``, set by tests/bench/run.py).
    Taking the lock again would then wait for ever."""
    try:
        for fd in os.listdir("/proc/self/fd"):
            try:
                if os.readlink("/proc/self/fd/" + fd) == LOCK:
                    return True
            except OSError:
                continue
    except OSError:
        pass
    return os.environ.get("LLMSERVE_LAB_LOCK_HELD") == "1"


@contextlib.contextmanager
def lab_session(up_args=(), labctl=None, up_timeout=240, down_timeout=240):
    """Hold the lab lock, bring the lab up (asserting it came up), yield the output of ``labctl.py up``, then take the
    lab down (also when it did not come up) and let the lock go.

    ``up_args``: more arguments for ``labctl.py up`` (``["--real-sglang", "--gpu-count", "1"]``); ``labctl``: the argv
    that runs labctl.py (default LABCTL)."""
    if os.environ.get(PROVIDED) == "1":
        # a parent brought the lab up with a slot for each of its children and holds it (and the lock):
        # tests/ci/run_gates.py for gates run at once, xdist_lab_configure for pytest-xdist's workers
        yield ""
        return
    labctl = list(labctl or LABCTL)
    with lab_lock():
        try:
            cp = subprocess.run(labctl + ["up"] + list(up_args), capture_output=True, text=True, timeout=up_timeout,
                                check=False)
            assert cp.returncode == 0, cp.stdout + cp.stderr
            yield cp.stdout
        finally:
            subprocess.run(labctl + ["down"], capture_output=True, text=True, timeout=down_timeout, check=False)


def xdist_workers(config):
    """pytest-xdist's worker count for a run (0: no workers, the tests run in the one pytest process)."""
    return int(getattr(config.option, "numprocesses", 0) or 0)


def is_xdist_worker(config):
    return hasattr(config, "workerinput")


def xdist_lab_configure(config, up_args=()):
    """From a conftest's ``pytest_configure``: under pytest-xdist, the run's controller holds the lab lock and brings up
    a lab of one slot per worker (``labctl.py up --slots N`` + ``up_args``) until ``xdist_lab_unconfigure``; the
    workers it starts inherit PROVIDED, so that their lab sessions use their slot of it. Nothing without workers, in a
    worker, or without root."""
    if is_xdist_worker(config) or xdist_workers(config) == 0 or os.geteuid() != 0:
        return
    stack = contextlib.ExitStack()
    stack.enter_context(lab_session(list(up_args) + ["--slots", str(xdist_workers(config))]))
    os.environ[PROVIDED] = "1"
    config.llmserve_lab = stack


def xdist_lab_unconfigure(config):
    stack = getattr(config, "llmserve_lab", None)
    if stack is not None:
        config.llmserve_lab = None
        os.environ.pop(PROVIDED, None)
        stack.close()


def long_files_first(config, items, first):
    """From ``pytest_collection_modifyitems`` under pytest-xdist: the test files named in ``first`` (longest first)
    before the others, each file's tests in their order. pytest-xdist's ``--dist loadfile`` then hands the files out
    by their number of tests, most first (its default ``--loadscope-reorder``), so this order decides only among
    files with as many tests."""
    if xdist_workers(config) or is_xdist_worker(config):
        rank = dict((name, i) for i, name in enumerate(first))
        items.sort(key=lambda item: rank.get(os.path.basename(str(item.fspath)), len(rank)))


LAST_REPORT_DIR = [None]   # run_playbook's last report folder (its file_sd/ has the Prometheus targets)


def run_playbook(name, args=(), bin_dir=None, timeout=600):
    """``ansible-playbook playbooks/NAME.yml -i inventories/lab ARGS`` (this process's slot of it) from ``bin_dir``
    (default: this interpreter's), its reports written to a new folder -> ``(rc, output, {host: report})``."""
    bin_dir = bin_dir or os.path.dirname(os.path.abspath(sys.executable))
    report_dir = tempfile.mkdtemp(prefix="llmserve-%s-" % name)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(CHECKOUT, ".tmp", "collections"),
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
    argv = [os.path.join(bin_dir, "ansible-playbook"), "playbooks/%s.yml" % name, "-i", slot_inventory()]
    argv += list(args) + ["-e", "sglang_report_dir=" + report_dir]
    cp = subprocess.run(argv, cwd=CHECKOUT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    LAST_REPORT_DIR[0] = report_dir
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
