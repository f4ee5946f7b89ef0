# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A container without sshd, reached through its Proxmox node with community.proxmox's proxmox_pct_remote connection
(SSH to the node, then `pct exec 129`): deploy, status, clean-up and a second deploy work through it, with ct129's
sshd masked; the report's endpoint is the container's own address, not the node's."""

from __future__ import absolute_import, division, print_function

import json
import os
import socket
import subprocess
import time

from conftest import BASE_VARS, CHECKOUT, IPS, KEY, PLAYBOOK, deploy, lab_inventory, playbook_env, ssh

PCT = {
    "ansible_connection": "community.proxmox.proxmox_pct_remote",
    "ansible_host": IPS["pve01"],
    "proxmox_vmid": 129,
    "ansible_private_key_file": KEY,
    "ansible_host_key_checking": False,
}


def _in_ct(cmd, check=True):
    """A shell command in ct129 through its node (pct exec), for a container whose sshd is off."""
    return ssh("pve01", "pct exec 129 -- /bin/sh -c %s" % _quote(cmd), check=check)


def _quote(text):
    return "'" + text.replace("'", "'\\''") + "'"


def _port_open(ip, port=22):
    try:
        with socket.create_connection((ip, port), timeout=1):
            return True
    except OSError:
        return False


def _playbook(name, inventory, extra):
    vars_file = os.path.join(os.path.dirname(inventory), "vars-%s.json" % os.path.basename(name))
    with open(vars_file, "w", encoding="utf-8") as handle:
        json.dump(dict(BASE_VARS, **extra), handle)
    cp = subprocess.run([PLAYBOOK[0], name, "-i", inventory, "--limit", "ct129", "-e", "@" + vars_file],
                        cwd=CHECKOUT, capture_output=True, text=True, timeout=400, env=playbook_env(), check=False)
    return cp.returncode, cp.stdout + cp.stderr


def test_container_without_sshd(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    inventory = lab_inventory({"ct129": PCT})
    env = dict(BASE_VARS["sglang_env"], IT_SCENARIO_RUN="pct-remote")
    _in_ct("systemctl mask --now ssh.service ssh.socket >/dev/null 2>&1; systemctl is-active ssh.service || true",
           check=False)
    try:
        assert not _port_open(IPS["ct129"]), "ct129's sshd still answers"
        # journalctl --since counts whole seconds: start the count in the second after the mask, so that a login
        # of an earlier test in the mask's own second is not counted
        time.sleep(1.1)
        since = time.strftime("%Y-%m-%d %H:%M:%S")

        rc, out, reports = deploy({"sglang_env": env}, limit="ct129", inventory=inventory)
        report = reports.get("ct129") or {}
        unit_env = _in_ct("cat /etc/llmserve/sglang.env").stdout
        health = _in_ct("python3 -c \"import urllib.request;print(urllib.request.urlopen("
                        "'http://127.0.0.1:30000/health', timeout=5).status)\"", check=False).stdout.strip()

        rc_status, out_status = _playbook("playbooks/status.yml", inventory, {})
        rc_clean, out_clean = _playbook("playbooks/cleanup.yml", inventory, {})
        holders_after_cleanup = _in_ct("systemctl is-active sglang.service; "
                                       "ls -l /proc/[0-9]*/fd 2>/dev/null | grep -c /dev/nvidia || true",
                                       check=False).stdout.split()
        node_holders = ssh("pve01", "nvidia-smi --query-compute-apps=pid --format=csv,noheader").stdout.split()

        rc2, out2, reports2 = deploy({"sglang_env": env}, limit="ct129", inventory=inventory)
        logins = _in_ct("journalctl --no-pager -q -o cat --since %s _COMM=sshd-session _COMM=sshd 2>/dev/null "
                        "| grep -c 'Accepted publickey' || true" % _quote(since), check=False).stdout.strip()
        still_closed = not _port_open(IPS["ct129"])
    finally:
        _in_ct("systemctl unmask ssh.service ssh.socket >/dev/null 2>&1; systemctl start ssh.service", check=False)

    ok = (rc == 0 and report.get("final_state") == "serving" and rc_status == 0 and rc_clean == 0 and rc2 == 0
          and (reports2.get("ct129") or {}).get("final_state") == "serving" and logins == "0" and still_closed)
    results.add("pct_remote", "ct129 with sshd masked, through pve01 (proxmox_pct_remote): deploy, status, clean-up, "
                "deploy", "deploy rc=%s %s, endpoint %s; status rc=%s; clean-up rc=%s, unit %s, GPU fds left %s, "
                "node's GPU processes %d; deploy again rc=%s %s; ssh logins to ct129: %s, port 22 closed: %s" % (
                    rc, report.get("final_state"), report.get("endpoint"), rc_status, rc_clean,
                    holders_after_cleanup[:1], holders_after_cleanup[1:], len(node_holders), rc2,
                    (reports2.get("ct129") or {}).get("final_state"), logins, still_closed), ok)
    assert rc == 0, out[-4000:]
    assert report["final_state"] == "serving", report
    # the container's own address, though ansible_host is the node's
    assert report["endpoint"] == "http://%s:30000" % IPS["ct129"], report["endpoint"]
    assert 'IT_SCENARIO_RUN="pct-remote"' in unit_env or "IT_SCENARIO_RUN=pct-remote" in unit_env, unit_env
    assert health == "200", health
    assert rc_status == 0 and "serving" in out_status, out_status[-3000:]
    assert rc_clean == 0, out_clean[-3000:]
    assert holders_after_cleanup[:1] != ["active"] and holders_after_cleanup[1:] == ["0"], holders_after_cleanup
    assert node_holders == [], node_holders
    assert rc2 == 0 and reports2["ct129"]["final_state"] == "serving", out2[-4000:]
    assert logins == "0", logins
    assert still_closed


def test_pct_connection_needs_node_and_vmid(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    """A container reached through its node whose clean-up could not reach it stops in preflight, nothing changed."""
    inventory = lab_inventory({"ct129": dict(PCT, proxmox_vmid=130)})
    before = ssh("ct129", "systemctl show -p MainPID,InvocationID sglang.service").stdout
    rc, out, _reports = deploy(limit="ct129", inventory=inventory)
    after = ssh("ct129", "systemctl show -p MainPID,InvocationID sglang.service").stdout
    text = "proxmox_vmid=130 (the connection runs commands in container 130) but sglang_proxmox_vmid=129"
    results.add("bad input", "pct connection to another container than sglang_proxmox_vmid",
                "rc=%s; names both: %s; host unchanged: %s" % (rc, text in out, before == after), rc == 2 and
                text in out and before == after)
    assert rc == 2, out[-3000:]
    assert text in out, out[-3000:]
    assert before == after
