# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Two services on one host, each on its own GPUs (sglang_gpus), port and service name: bad input stops before any
change; a service never ends another service's processes; the second deploy does not disturb the first, one after
the other and at the same time; check mode changes nothing."""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import tempfile

from conftest import BASE_VARS, CHECKOUT, INVENTORY, PLAYBOOK, deploy, playbook_env, snapshot, ssh
from ansible_collections.llmserve.sglang.plugins.module_utils._systemd import parse_show

SVC_A = {"sglang_service_name": "sglang-a", "sglang_port": 30011, "sglang_gpus": [0, 1, 2, 3]}
SVC_B = {"sglang_service_name": "sglang-b", "sglang_port": 30012, "sglang_gpus": "4,5,6,7"}


def _unit(name):
    """{MainPID, InvocationID, ActiveState} of a unit on gpu01."""
    out = ssh("gpu01", "systemctl show -p MainPID,InvocationID,ActiveState %s.service" % name).stdout
    return parse_show(out)


def _gpus_of(name):
    """The GPU indices nvidia-smi lists for the processes of a unit's cgroup."""
    script = (
        "cg=/sys/fs/cgroup$(systemctl show -p ControlGroup --value {svc}.service); "
        "pids=$(cat $cg/cgroup.procs 2>/dev/null); "
        "nvidia-smi --query-gpu=index,uuid --format=csv,noheader > /tmp/gpus.csv; "
        "nvidia-smi --query-compute-apps=pid,gpu_uuid --format=csv,noheader | while IFS=', ' read pid uuid; do "
        "for p in $pids; do [ \"$p\" = \"$pid\" ] && grep \"$uuid\" /tmp/gpus.csv | cut -d, -f1; done; done; true"
    ).format(svc=name)
    return sorted(set(int(x) for x in ssh("gpu01", script).stdout.split()))


def _answers(port):
    code = ("import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:%d/health', timeout=10).status)"
            % port)
    return ssh("gpu01", "python3 -c \"%s\"" % code, check=False).stdout.strip() == "200"


def _play(playbook, extra):
    handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8")  # pylint: disable=consider-using-with
    json.dump(dict(BASE_VARS, **extra), handle)
    handle.close()
    cmd = [PLAYBOOK[0], playbook, "-i", INVENTORY, "-e", "@" + handle.name, "--limit", "gpu01"]
    cp = subprocess.run(cmd, cwd=CHECKOUT, capture_output=True, text=True, timeout=300, env=playbook_env(), check=False)
    os.unlink(handle.name)
    return cp.returncode, cp.stdout + cp.stderr


def _popen(extra):
    data = dict(BASE_VARS, sglang_report_dir=tempfile.mkdtemp(prefix="llmserve-it-"))
    data.update(extra)
    handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8")  # pylint: disable=consider-using-with
    json.dump(data, handle)
    handle.close()
    proc = subprocess.Popen(PLAYBOOK + ["-e", "@" + handle.name, "--limit", "gpu01"], cwd=CHECKOUT,  # pylint: disable=consider-using-with
                            env=playbook_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, handle.name


def _serving(reports):
    return bool(reports) and all(r.get("final_state") == "serving" for r in reports.values())


def test_two_services_on_one_host(lab, results):  # pylint: disable=unused-argument,redefined-outer-name,too-many-statements
    # bad input: stops in preflight, names the variable and the fix, nothing changes
    before = snapshot("gpu01")
    # (mixed forms, duplicates and a disagreeing CUDA_VISIBLE_DEVICES are the same preflight step: unit cases in
    # tests/unit/plugins/module_utils/cases/gpu_subset.yml)
    rc, out, _reports = deploy(dict(SVC_A, sglang_gpus=[0, 9]), limit="gpu01")
    assert rc != 0 and "sglang_gpus: this host has no GPU 9" in out and "nothing was changed" in out, out[-3000:]
    rc, out, _reports = deploy(dict(SVC_A, sglang_tp_size=8), limit="gpu01")
    assert rc != 0 and "sglang_tp_size=8 but gpu01 has 4 GPU(s) for this service" in out, out[-3000:]
    assert ssh("gpu01", "test -e /etc/systemd/system/sglang-a.service", check=False).returncode != 0
    assert snapshot("gpu01") == before
    results.add("gpu subset", "bad sglang_gpus / tp size",
                "unknown GPU, tp over the subset: each stops in preflight naming the variable; baseline "
                "untouched")

    # the baseline service holds all 8 GPUs: service A on GPUs 0-3 must not end its processes
    base = _unit("sglang")
    rc, out, _reports = deploy(SVC_A, limit="gpu01")
    blocked = rc != 0 and "runs in sglang.service, another service" in out and _unit("sglang") == base
    results.add("gpu subset", "another service on the subset's GPUs",
                "rc=%s; clean-up names sglang.service's processes and signals none; baseline MainPID %s unchanged"
                % (rc, base.get("MainPID")), blocked)
    assert blocked, out[-4000:]

    rc, out = _play("playbooks/undeploy.yml", {})
    assert rc == 0, out[-3000:]

    # one after the other
    rc, out, reports = deploy(SVC_A, limit="gpu01")
    assert rc == 0 and _serving(reports), out[-4000:]
    env_a = ssh("gpu01", "cat /etc/llmserve/sglang-a.env").stdout
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3" in env_a.replace('"', "").replace("'", ""), env_a
    assert "--tp-size 4" in ssh("gpu01", "systemctl cat sglang-a.service").stdout
    assert _gpus_of("sglang-a") == [0, 1, 2, 3]
    a_before = _unit("sglang-a")

    rc, out, _reports = deploy(SVC_B, limit="gpu01", args=["--check"])
    assert rc == 0, out[-4000:]
    assert ssh("gpu01", "test -e /etc/systemd/system/sglang-b.service", check=False).returncode != 0
    assert _unit("sglang-a") == a_before

    rc, out, reports = deploy(SVC_B, limit="gpu01")
    assert rc == 0 and _serving(reports), out[-4000:]
    a_after, b_unit = _unit("sglang-a"), _unit("sglang-b")
    ok = (a_after == a_before and _gpus_of("sglang-b") == [4, 5, 6, 7] and _gpus_of("sglang-a") == [0, 1, 2, 3]
          and _answers(30011) and _answers(30012))
    results.add("gpu subset", "two services one after the other",
                "sglang-a on GPUs 0-3 (MainPID %s, same InvocationID after sglang-b's deploy), sglang-b on GPUs 4-7; "
                "both answer /health" % a_after.get("MainPID"), ok)
    assert ok, (a_before, a_after, b_unit, _gpus_of("sglang-a"), _gpus_of("sglang-b"))

    # a rerun of A changes neither service
    rc, out, reports = deploy(SVC_A, limit="gpu01")
    assert rc == 0 and _serving(reports), out[-4000:]
    assert _unit("sglang-a") == a_before and _unit("sglang-b") == b_unit

    # at the same time: both taken away, then deployed by two runs at once
    for svc in (SVC_A, SVC_B):
        rc, out = _play("playbooks/undeploy.yml", svc)
        assert rc == 0, out[-3000:]
    runs = [_popen(SVC_A), _popen(SVC_B)]
    outs = []
    for proc, path in runs:
        out, _err = proc.communicate(timeout=500)
        os.unlink(path)
        outs.append((proc.returncode, out))
    ok = (all(rc == 0 for rc, _out in outs) and _gpus_of("sglang-a") == [0, 1, 2, 3]
          and _gpus_of("sglang-b") == [4, 5, 6, 7] and _answers(30011) and _answers(30012))
    results.add("gpu subset", "two services deployed at the same time",
                "rcs=%s; each on its own GPUs, both answer" % [rc for rc, _out in outs], ok)
    assert ok, [out[-3000:] for _rc, out in outs]

    # leave the lab as the suite expects it: the baseline service on every GPU
    for svc in (SVC_A, SVC_B):
        rc, out = _play("playbooks/undeploy.yml", dict(svc, sglang_undeploy_purge=True))
        assert rc == 0, out[-3000:]
    rc, out, reports = deploy(limit="gpu01")
    assert rc == 0 and _serving(reports), out[-4000:]
