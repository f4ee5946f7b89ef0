# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/deploy.yml through ansible-runner (AWX's executor), with a private data directory laid out as AWX lays it.

project/ (the checkout), inventory/hosts (the lab inventory as one file), env/extravars (what the survey sends),
env/ssh_key (the Machine credential), env/envvars. Root and the lab: the module holds /var/tmp/llmserve-lab.lock
from start to end, brings the lab up and takes it down again.
"""

from __future__ import absolute_import, division, print_function

import glob
import json
import os
import secrets
import shutil
import subprocess
import sys

import ansible_runner  # the gate fails, not skips, without it (requirements-dev.txt; make setup)
import pytest
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lab"))
from labsession import lab_session, slot_inventory, slot_ips  # noqa: E402  pylint: disable=wrong-import-position

# this process's copy of the lab's hosts (slot 0 unless tests/ci/run_gates.py runs the gate on another slot)
IPS = slot_ips({"gpu01": "10.77.0.11", "ct129": "10.77.0.13"})

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(os.path.dirname(HERE))
KEY = "/var/tmp/llmserve-lab/ssh/id_ed25519"
SSH = ["ssh", "-i", KEY, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
       "-o", "BatchMode=yes", "-o", "ConnectTimeout=5"]
UNIT = "/etc/systemd/system/sglang.service"
API_KEY = "awx-survey-secret-" + secrets.token_hex(12)


def ssh(ip, cmd):
    cp = subprocess.run(SSH + ["root@" + ip, cmd], capture_output=True, text=True, timeout=60, check=False)
    assert cp.returncode == 0, "%s: %s -> %s %s" % (ip, cmd, cp.stdout, cp.stderr)
    return cp.stdout


def lab_inventory():
    """inventories/lab as one file, as AWX holds it: hosts + group variables, no key path (env/ssh_key carries it)."""
    with open(os.path.join(slot_inventory(), "hosts.yml"), encoding="utf-8") as handle:
        inv = yaml.safe_load(handle)
    group_vars = {}
    for path in glob.glob(os.path.join(CHECKOUT, "inventories", "lab", "group_vars", "*.yml")):
        with open(path, encoding="utf-8") as handle:
            group_vars[os.path.basename(path)[:-4]] = yaml.safe_load(handle) or {}
    group_vars["all"].pop("ansible_ssh_private_key_file", None)
    inv["all"].setdefault("vars", {}).update(group_vars.pop("all"))
    for group, data in group_vars.items():
        inv["all"]["children"][group].setdefault("vars", {}).update(data)
    return inv


def survey_answers(report_dir, **override):
    """What the survey of extensions/awx/deploy_survey.json sends for the lab (plus the template's report dir)."""
    answers = {
        "sglang_model_path": "/models/Qwen3.5-397B-A17B-NVFP4",
        "sglang_served_model_name": "qwen3.5-397b",
        "sglang_service_name": "sglang",
        "sglang_tp_size": 0,
        "sglang_quantization": "modelopt_fp4",
        "sglang_port": 30000,
        "sglang_api_key": API_KEY,
        "sglang_selection": "first_ready",
        "sglang_ready_timeout": 300,
        "sglang_hang_timeout": 30,
        "sglang_tool_call_parser": "qwen3_coder",
        "sglang_reasoning_parser": "qwen3",
        "sglang_report_dir": report_dir,
    }
    answers.update(override)
    return answers


def private_data_dir(base, extravars):
    """AWX's layout of a job's private data directory."""
    for sub in ("inventory", "env"):
        os.makedirs(os.path.join(base, sub))
    os.symlink(CHECKOUT, os.path.join(base, "project"))
    with open(os.path.join(base, "inventory", "hosts"), "w", encoding="utf-8") as handle:
        yaml.safe_dump(lab_inventory(), handle, default_flow_style=False)
    with open(os.path.join(base, "env", "extravars"), "w", encoding="utf-8") as handle:
        json.dump(extravars, handle)
    shutil.copyfile(KEY, os.path.join(base, "env", "ssh_key"))
    os.chmod(os.path.join(base, "env", "ssh_key"), 0o600)
    with open(os.path.join(base, "env", "envvars"), "w", encoding="utf-8") as handle:
        yaml.safe_dump({"ANSIBLE_COLLECTIONS_PATH": os.path.join(CHECKOUT, ".tmp", "collections"),
                        "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1",
                        # ansible-playbook of this interpreter's venv (an EE has it on PATH)
                        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}, handle)
    return base


def launch(base, extravars):
    private_data_dir(base, extravars)
    return ansible_runner.run(private_data_dir=base, playbook="playbooks/deploy.yml", quiet=True, timeout=600)


def all_text_under(path):
    """Every regular file under path, as text (errors replaced)."""
    out = []
    for root, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            if os.path.isfile(full) and not os.path.islink(full):
                with open(full, "rb") as handle:
                    out.append((full, handle.read().decode("utf-8", "replace")))
    return out


@pytest.fixture(scope="module")
def lab():
    if os.geteuid() != 0:
        pytest.skip("the lab needs root")
    subprocess.run(["make", "-C", CHECKOUT, "links"], check=True, capture_output=True)
    with lab_session():
        yield


@pytest.fixture(scope="module")
def good_run(lab, tmp_path_factory):  # pylint: disable=redefined-outer-name,unused-argument
    base = str(tmp_path_factory.mktemp("awx-job") / "pdd")
    report_dir = str(tmp_path_factory.mktemp("reports"))
    run = launch(base, survey_answers(report_dir))
    return run, base, report_dir


def test_deploy_successful(good_run):  # pylint: disable=redefined-outer-name
    run, _base, _reports = good_run
    assert run.status == "successful", run.stdout.read()[-4000:]
    assert run.rc == 0


def test_set_stats_artifacts(good_run):  # pylint: disable=redefined-outer-name
    run, _base, report_dir = good_run
    stats = [e for e in run.events if e.get("event") == "playbook_on_stats"]
    assert len(stats) == 1
    deploy = stats[0]["event_data"]["artifact_data"]["sglang_deploy"]
    assert set(deploy) == {"gpu01", "ct129"}
    ips = IPS
    for host, data in deploy.items():
        assert data["final_state"] == "serving", data
        assert data["selected"], data
        assert ips[host] in data["endpoint"] and "30000" in data["endpoint"], data
        assert data["report"] == os.path.join(report_dir, host + ".json")
        assert os.path.isfile(data["report"])


def test_api_key_in_no_event_and_no_artifact(good_run):  # pylint: disable=redefined-outer-name
    run, base, _reports = good_run
    events = list(run.events)
    assert len(events) > 50
    leaks = [e.get("event") for e in events if API_KEY in json.dumps(e)]
    assert not leaks, "API key in events: %s" % leaks
    files = all_text_under(os.path.join(base, "artifacts"))
    assert any(path.endswith("stdout") for path, _text in files)
    assert not [path for path, text in files if API_KEY in text]
    # ... and it did reach the host, where it belongs (0600 env file)
    assert API_KEY in ssh(IPS["gpu01"], "cat /etc/llmserve/sglang.env")


@pytest.mark.parametrize("bad", [{"sglang_port": 70000}, {"sglang_selection": "bogus"}],
                         ids=["port-70000", "selection-bogus"])
def test_bad_survey_value_fails_before_any_change(good_run, tmp_path_factory, bad):  # pylint: disable=redefined-outer-name
    _good, _base, report_dir = good_run
    before = ssh(IPS["gpu01"], "sha256sum %s; systemctl show -p ActiveState,MainPID sglang.service" % UNIT)
    base = str(tmp_path_factory.mktemp("awx-bad") / "pdd")
    run = launch(base, survey_answers(report_dir, **bad))
    assert run.status == "failed" and run.rc != 0
    events = list(run.events)
    changed = [e["event_data"].get("task") for e in events
               if e.get("event") == "runner_on_ok" and e["event_data"].get("res", {}).get("changed")]
    assert not changed, changed
    failed = [e for e in events if e.get("event") == "runner_on_failed"]
    assert failed and all(e["event_data"]["play"].startswith("Preflight") for e in failed)
    assert list(bad)[0] in json.dumps([e["event_data"].get("res") for e in failed])
    assert not [e for e in events if e.get("event") == "playbook_on_stats" and e["event_data"]["artifact_data"]]
    after = ssh(IPS["gpu01"], "sha256sum %s; systemctl show -p ActiveState,MainPID sglang.service" % UNIT)
    assert before == after
