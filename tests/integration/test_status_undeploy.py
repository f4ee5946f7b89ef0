# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/status.yml says what each host serves; playbooks/undeploy.yml takes the service away, keeping the
record and backups unless asked to purge; both idempotent, check mode changes nothing."""

from __future__ import absolute_import, division, print_function

import json
import re

from conftest import ENV_FILE, STATE, UNIT, deploy, play as _play, snapshot, ssh


def _recap(out, host):
    found = re.search(r"^%s\s*: ok=(\d+)\s+changed=(\d+)" % host, out, re.M)
    return (int(found.group(1)), int(found.group(2))) if found else (None, None)


def _custom_stats(out):
    text = out.split("CUSTOM STATS:", 1)[1] if "CUSTOM STATS:" in out else ""
    start = text.find("{")
    return json.loads(text[start:text.rfind("}") + 1]) if start >= 0 else {}


def test_status_then_undeploy(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    rc, out = _play("playbooks/status.yml")
    assert rc == 0, out[-3000:]
    assert _recap(out, "gpu01")[1] == 0 and _recap(out, "ct129")[1] == 0, out[-1500:]
    stats = _custom_stats(out).get("sglang_status", {})
    gpu01 = stats.get("gpu01", {})
    ok = (gpu01.get("summary") == "serving" and gpu01.get("selected") == "known-good"
          and gpu01.get("gpu_memory_mib", 0) > 0 and stats.get("ct129", {}).get("summary") == "serving")
    results.add("status", "status.yml on the lab",
                "gpu01 %s with %s, %s MiB in %d service process(es), health %s; ct129 %s; changed=0" % (
                    gpu01.get("summary"), gpu01.get("selected"), gpu01.get("gpu_memory_mib"),
                    len([p for p in gpu01.get("gpu_processes", []) if p.get("service")]),
                    gpu01.get("health", {}).get("status"), stats.get("ct129", {}).get("summary")), ok)
    assert ok, json.dumps(stats)[:3000]
    assert "--moe-runner-backend" in gpu01["backends"] and gpu01["unit"]["UnitFileState"] == "enabled"
    assert "CUDA_HOME" in gpu01["env_names"]

    before = snapshot("gpu01")
    rc, out = _play("playbooks/undeploy.yml", args=["--check"], limit="gpu01")
    assert rc == 0 and snapshot("gpu01") == before, out[-3000:]

    rc, out = _play("playbooks/undeploy.yml", limit="gpu01")
    assert rc == 0, out[-3000:]
    gone = ssh("gpu01", "test ! -e %s && test ! -e %s" % (UNIT, ENV_FILE), check=False).returncode == 0
    state = ssh("gpu01", "systemctl is-active sglang.service", check=False).stdout.strip()
    kept = ssh("gpu01", "test -s %s/record.json && ls %s/backups" % (STATE, STATE), check=False)
    gpus = ssh("gpu01", "nvidia-smi --query-compute-apps=pid --format=csv,noheader").stdout.split()
    rc2, out2 = _play("playbooks/undeploy.yml", limit="gpu01")
    rc3, out3 = _play("playbooks/status.yml", limit="gpu01")
    after = _custom_stats(out3).get("sglang_status", {}).get("gpu01", {})
    ok = (gone and state in ("inactive", "unknown") and kept.returncode == 0 and not gpus and rc2 == 0
          and _recap(out2, "gpu01")[1] == 0 and after.get("summary") == "not deployed"
          and after.get("selected") == "known-good")
    results.add("status", "undeploy.yml gpu01",
                "unit and env gone: %s, service %s, record and %d backups kept, GPU processes left %d; "
                "again: changed=%s; status then: %s (record: %s)" % (
                    gone, state, len(kept.stdout.split()), len(gpus), _recap(out2, "gpu01")[1],
                    after.get("summary"), after.get("selected")), ok)
    assert gone and state in ("inactive", "unknown"), (gone, state)
    assert kept.returncode == 0 and any(n.startswith("sglang.service.") for n in kept.stdout.split()), kept.stdout
    assert not gpus, gpus
    assert rc2 == 0 and _recap(out2, "gpu01")[1] == 0, out2[-2000:]
    assert after.get("summary") == "not deployed" and after.get("selected") == "known-good", after

    rc, out = _play("playbooks/undeploy.yml", {"sglang_undeploy_purge": True}, limit="gpu01")
    assert rc == 0, out[-2000:]
    assert ssh("gpu01", "test ! -e %s" % STATE, check=False).returncode == 0
    rc, out = _play("playbooks/undeploy.yml", {"sglang_undeploy_purge": "maybe"}, limit="gpu01")
    assert rc != 0 and "sglang_undeploy_purge must be true or false" in out, out[-2000:]

    # and back: the next tests find the baseline serving
    rc, out, reports = deploy(limit="gpu01")
    assert rc == 0 and reports["gpu01"]["final_state"] == "serving", out[-3000:]
