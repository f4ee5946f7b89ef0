# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Install SGLang on the lab (playbooks/install.yml and the deploy with sglang_install: true) from a real package
index: pypiserver on the controller, bound to the lab bridge's address, serving tiny wheels (tests/lab/wheels.py: a
stand-in ``sglang`` 0.5.23 and 0.5.24 and its kernel package, NOT the real SGLang) into a throwaway venv on gpu01
(not the venv the lab's services run from).

Shows: a first install (the venv made, the version imports, the kernel loads, the flag table reads), a second run
that changes nothing, check mode that changes nothing, an upgrade, an extra added, a version the index does not have
and an index that cannot be reached (each a clear error, the venv still imports what it had), a driver too old, and
the deploy stopping at the install before anything else when the install fails.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import re
import subprocess
import sys
import tempfile

import pytest

from conftest import CHECKOUT, INVENTORY, SNAPSHOT, playbook_env, ssh

sys.path.insert(0, os.path.join(CHECKOUT, "tests", "lab"))
import wheels  # noqa: E402  pylint: disable=wrong-import-position
from labsession import BRIDGE, bridge_server, free_bridge_port  # noqa: E402  pylint: disable=wrong-import-position

HOST = "gpu01"
VENV = "/root/llmserve-install-test"
PYTHON = VENV + "/bin/python3"
PYPI_SERVER = os.path.join(CHECKOUT, ".venv", "bin", "pypi-server")
ANSIBLE_PLAYBOOK = os.path.join(CHECKOUT, ".venv", "bin", "ansible-playbook")


@pytest.fixture(scope="module")
def index(lab_up):  # pylint: disable=unused-argument,redefined-outer-name
    """pypiserver on BRIDGE:PORT serving the test wheels; -> its simple URL. The throwaway venv is removed after."""
    folder = tempfile.mkdtemp(prefix="llmserve-it-wheels-")
    wheels.build_all(folder, ("0.5.23", "0.5.24"))

    def argv(port):
        return [PYPI_SERVER, "run", "-i", BRIDGE, "-p", str(port), "-a", ".", "-P", ".", "--disable-fallback", folder]

    with bridge_server(argv, os.path.join(folder, "pypiserver.log"), timeout=20) as port:
        ssh(HOST, "rm -rf %s" % VENV)
        try:
            yield "http://%s:%d/simple/" % (BRIDGE, port)
        finally:
            ssh(HOST, "rm -rf %s" % VENV, check=False)


def run(url, version, extra=None, args=(), playbook="playbooks/install.yml"):
    """ansible-playbook PLAYBOOK --limit gpu01 into the throwaway venv; -> (rc, output)."""
    data = {"sglang_python": PYTHON, "sglang_version": version, "sglang_pip_index_url": url,
            "sglang_pip_isolated": True, "sglang_install_min_free_gb": 0.05}
    data.update(extra or {})
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as handle:
        json.dump(data, handle)
    cmd = [ANSIBLE_PLAYBOOK, playbook, "-i", INVENTORY, "--limit", HOST, "-e", "@" + handle.name]
    cp = subprocess.run(cmd + list(args), cwd=CHECKOUT, capture_output=True, text=True, timeout=120,
                        env=playbook_env(), check=False)
    os.unlink(handle.name)
    # one line: the callback folds long messages
    return cp.returncode, " ".join((cp.stdout + cp.stderr).split())


def changed(out):
    match = re.search(r"%s\s*:\s*ok=\d+\s+changed=(\d+)" % HOST, out)
    assert match, out[-3000:]
    return int(match.group(1))


def installed():
    """What the throwaway venv imports: 'sglang-version kernel-version', or the error."""
    cp = ssh(HOST, "%s -c 'import sglang, sgl_kernel; print(sglang.__version__, sgl_kernel.__version__)'" % PYTHON,
             check=False)
    return cp.stdout.strip() if cp.returncode == 0 else "ERROR " + cp.stderr.strip()[-200:]


def test_install_upgrade_and_failures(index, results):  # pylint: disable=redefined-outer-name
    url = index
    # first install: the venv is made, 0.5.23 and its kernel package go in, the flag table reads
    rc, out = run(url, "0.5.23")
    assert rc == 0, out[-3000:]
    assert changed(out) == 1 and "sglang 0.5.23 in %s" % PYTHON in out, out[-3000:]
    assert "no venv yet" in out, out[-3000:]
    assert installed() == "0.5.23 0.4.10"
    results.add("install", "first install (pypiserver on the lab bridge)", "venv made, 0.5.23 + kernel, flag table read")

    # second run: nothing to do
    rc, out = run(url, "0.5.23")
    assert rc == 0 and changed(out) == 0, out[-3000:]
    assert "(sglang 0.5.23 is installed; pip, Python 3." in out, out[-3000:]
    results.add("install", "second run, same version", "changed=0")

    # check mode: says it would install 0.5.24, changes nothing
    listing = "ls -l --time-style=+%%s.%%N %s/lib/python3*/site-packages | md5sum" % VENV
    before = ssh(HOST, listing).stdout
    rc, out = run(url, "0.5.24", args=["--check"])
    assert rc == 0 and changed(out) == 1, out[-3000:]
    assert "sglang 0.5.23 is installed, 0.5.24 is wanted" in out, out[-3000:]
    assert installed() == "0.5.23 0.4.10"
    assert ssh(HOST, listing).stdout == before
    results.add("install", "check mode, 0.5.24 wanted", "changed reported, venv untouched")

    # upgrade, then an extra that is not there yet
    rc, out = run(url, "0.5.24")
    assert rc == 0 and changed(out) == 1, out[-3000:]
    assert installed() == "0.5.24 0.4.10"
    rc, out = run(url, "0.5.24", {"sglang_extras": ["tracing"]})
    assert rc == 0 and changed(out) == 1 and "without extra tracing (llmlab-tracing>=1.0)" in out, out[-3000:]
    assert ssh(HOST, "%s -c 'import llmlab_tracing'" % PYTHON, check=False).returncode == 0
    rc, out = run(url, "0.5.24", {"sglang_extras": ["tracing"]})
    assert rc == 0 and changed(out) == 0, out[-3000:]
    results.add("install", "upgrade to 0.5.24, then extra tracing", "changed, imports 0.5.24; again: changed=0")

    # a version the index does not have: a clear error, the venv as it was
    rc, out = run(url, "0.5.99")
    assert rc != 0
    assert "sglang==0.5.99 is not on %s" % url in out and "the venv is as it was" in out, out[-3000:]
    assert "from versions: 0.5.23, 0.5.24" in out, out[-3000:]
    assert installed() == "0.5.24 0.4.10"
    results.add("install", "a version the index does not have", "failed: sglang==0.5.99 is not on the index; venv keeps 0.5.24")

    # an index that cannot be reached (nothing listens on that port): a clear error, the venv as it was
    dead = "http://%s:%d/simple/" % (BRIDGE, free_bridge_port())
    rc, out = run(dead, "0.5.23", {"sglang_pip_extra_args": ["--retries", "0", "--timeout", "5"]})
    assert rc != 0
    assert "the package index %s cannot be reached" % dead in out and "the venv is as it was" in out, out[-3000:]
    assert installed() == "0.5.24 0.4.10"
    results.add("install", "an index that cannot be reached", "failed: cannot be reached; venv keeps 0.5.24")

    # a driver older than the wheels' CUDA needs: stops before the dry run
    rc, out = run(url, "0.5.23", {"sglang_install_min_driver": "999.1"})
    assert rc != 0 and "the NVIDIA driver 580.159.04 is too old for SGLang 0.5.23" in out, out[-3000:]
    assert installed() == "0.5.24 0.4.10"
    results.add("install", "driver older than needed", "failed before any change")

    # an air-gapped host: a wheelhouse folder on the host (the checkout is mounted read-only at the same path there)
    ssh(HOST, "rm -rf /root/wheelhouse && python3 %s/tests/lab/wheels.py /root/wheelhouse --sglang 0.5.23" % CHECKOUT)
    rc, out = run("/root/wheelhouse", "0.5.23")
    assert rc == 0 and changed(out) == 1, out[-3000:]
    assert installed() == "0.5.23 0.4.10"
    ssh(HOST, "rm -rf /root/wheelhouse")
    results.add("install", "from a wheelhouse folder on the host", "changed, imports 0.5.23")

    # an index URL with a password: used, and never shown, even with -v and in an error
    secret = "s3cret-Tok"
    with_password = url.replace("http://", "http://bot:%s@" % secret)
    rc, out = run(with_password, "0.5.24", args=["-v"])
    assert rc == 0 and changed(out) == 1, out[-3000:]
    assert installed() == "0.5.24 0.4.10"
    rc, out = run(with_password, "0.5.97", args=["-v"])
    assert rc != 0 and "sglang==0.5.97 is not on http://bot:********@%s" % url[len("http://"):] in out, out[-3000:]
    assert secret not in out
    results.add("install", "index URL with a password, -v", "installs; the password is in no output, masked in the error")

    # uv (sglang_installer: uv) from the same index: the version changes, a second run changes nothing
    uv = {"sglang_installer": "uv", "sglang_uv": os.path.join(CHECKOUT, ".venv", "bin", "uv")}
    rc, out = run(url, "0.5.23", uv)
    assert rc == 0 and changed(out) == 1, out[-3000:]
    assert "package(s); uv, Python 3." in out, out[-3000:]
    assert installed() == "0.5.23 0.4.10"
    rc, out = run(url, "0.5.23", uv)
    assert rc == 0 and changed(out) == 0 and "is installed; uv, Python 3." in out, out[-3000:]
    rc, out = run(url, "0.5.99", uv)
    assert rc != 0 and "the venv is as it was" in out, out[-3000:]
    assert installed() == "0.5.23 0.4.10"
    results.add("install", "with uv (sglang_installer: uv)", "0.5.24 -> 0.5.23; again: changed=0; 0.5.99: clear error, venv kept")


def test_deploy_installs_first_and_stops_there_on_failure(index, results):  # pylint: disable=redefined-outer-name
    """The deploy with sglang_install: true runs the install before the preflight; a failed install stops it with
    nothing else changed (the service, unit and record as they were)."""
    url = index
    before = ssh(HOST, SNAPSHOT, check=False).stdout  # with or without a deployed service
    rc, out = run(url, "0.5.98", {"sglang_install": True}, playbook="playbooks/deploy.yml")
    assert rc != 0
    assert "sglang==0.5.98 is not on %s" % url in out, out[-3000:]
    assert "PLAY [Install SGLang" in out and "PLAY [Preflight" not in out, out[-3000:]
    assert ssh(HOST, SNAPSHOT, check=False).stdout == before
    results.add("install", "deploy with sglang_install: true, a bad version", "stops at the install, nothing changed")
