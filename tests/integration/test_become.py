# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A non-root ansible_user with sudo and become: true, the usual inventory: deploy (a GPU host and a container with
its Proxmox node), check mode and status all work through it."""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import tempfile
import time

from conftest import BASE_VARS, CHECKOUT, INVENTORY, PLAYBOOK, deploy, playbook_env, ssh

BECOME = {"ansible_user": "deploy", "ansible_become": True}


def _logins(host, since):
    out = ssh(host, "journalctl --no-pager -q -o cat --since @%d _COMM=sshd-session _COMM=sshd 2>/dev/null | "
                    "grep -c 'Accepted publickey for deploy' || true" % since, check=False).stdout.strip()
    return int(out or 0)


def test_deploy_as_a_sudo_user(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    since = int(time.time()) - 1
    env = dict(BASE_VARS["sglang_env"], IT_SCENARIO_RUN="become")
    rc, out, reports = deploy(dict(BECOME, sglang_env=env))
    assert rc == 0, out[-4000:]
    states = dict((h, r["final_state"]) for h, r in reports.items())
    rc_check, out_check, _reports = deploy(dict(BECOME, sglang_env=env), args=["--check"])
    handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8")  # pylint: disable=consider-using-with
    json.dump(BECOME, handle)
    handle.close()
    cp = subprocess.run([PLAYBOOK[0], "playbooks/status.yml", "-i", INVENTORY, "-e", "@" + handle.name],
                        cwd=CHECKOUT, capture_output=True, text=True, timeout=300, env=playbook_env(), check=False)
    os.unlink(handle.name)
    logins = dict((h, _logins(h, since)) for h in ("gpu01", "ct129", "pve01"))
    ok = (states == {"gpu01": "serving", "ct129": "serving"} and rc_check == 0 and cp.returncode == 0
          and all(logins.values()))
    results.add("become", "ansible_user deploy + become: deploy, --check, status",
                "final states %s; check rc=%s; status rc=%s; ssh logins as deploy %s" % (
                    states, rc_check, cp.returncode, logins), ok)
    assert states == {"gpu01": "serving", "ct129": "serving"}, states
    assert rc_check == 0, out_check[-3000:]
    assert cp.returncode == 0, (cp.stdout + cp.stderr)[-3000:]
    assert all(logins.values()), logins
