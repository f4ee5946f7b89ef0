# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Safety: two deploys at once do not fight; the API key leaks nowhere; previous files are kept, bounded."""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import tempfile
import time

import pytest

from conftest import BASE_VARS, CHECKOUT, ENV_FILE, INVENTORY, PLAYBOOK, STATE, UNIT, deploy, playbook_env, ssh

# a lab host's overlay upper layer, read-only (tests/lab/hostboot.sh)
UPPER = "/run/lab-upper"

KEY = "sk-it-Secret-7f3a9c0e51"
TOKEN = "hf_itTokenQ81zL0c5"
TOKEN2 = "wandb-it-5c1e9a77"


def _popen(extra):
    data = dict(BASE_VARS, sglang_report_dir=tempfile.mkdtemp(prefix="llmserve-it-"))
    data.update(extra)
    handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8")  # pylint: disable=consider-using-with
    json.dump(data, handle)
    handle.close()
    proc = subprocess.Popen(PLAYBOOK + ["-e", "@" + handle.name, "--limit", "gpu01"], cwd=CHECKOUT,  # pylint: disable=consider-using-with
                            env=playbook_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, handle.name


def test_double_launch_does_not_fight(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    """AWX double launch: the same job twice at once on one host. One deploys, the other fails naming the holder."""
    extra = {"sglang_env": dict(BASE_VARS["sglang_env"], IT_DOUBLE_LAUNCH="1")}
    runs = [_popen(extra), _popen(extra)]
    outs = []
    for proc, path in runs:
        out, _err = proc.communicate(timeout=400)
        os.unlink(path)
        outs.append((proc.returncode, out, proc.pid))
    winners = [o for o in outs if o[0] == 0]
    losers = [o for o in outs if o[0] != 0]
    # the loser names the winner's ansible-playbook PID (or, in the microseconds between the winner's mkdir and
    # its owner file, says a run is taking the lock right now)
    named = ("ansible-playbook pid %d " % winners[0][2] in losers[0][1]
             or "a run that is taking the lock right now" in losers[0][1]) if len(winners) == 1 else False
    ok = len(winners) == 1 and len(losers) == 1 and "is being deployed by another run" in losers[0][1] and named
    results.add("safety", "double launch on one host",
                "rcs=%s; the second fails naming the first's ansible-playbook pid" % [o[0] for o in outs], ok)
    assert len(winners) == 1, [o[1][-2000:] for o in outs]
    assert "is being deployed by another run" in losers[0][1], losers[0][1][-3000:]
    assert named, losers[0][1][-3000:]
    assert ssh("gpu01", "test -e %s/deploy.lock" % STATE, check=False).returncode != 0, "lock left behind"
    assert ssh("gpu01", "grep -q IT_DOUBLE_LAUNCH=.1. %s && systemctl is-active -q sglang" % ENV_FILE,
               check=False).returncode == 0


@pytest.mark.parametrize("holder, how", [
    ({"controller": "another-controller", "pid": 4242, "since": 1}, "older than sglang_lock_stale_after"),
    ({"controller": os.uname()[1], "pid": 999999, "since": "NOW"}, "fresh, its ansible-playbook PID gone"),
], ids=["by-age", "by-pid"])
def test_stale_lock_is_taken_over(lab, results, holder, how):  # pylint: disable=unused-argument,redefined-outer-name
    """A lock left by a run that is gone is taken over: one older than the stale age from any controller (by the
    deploy_lock module itself), a fresh one from this controller whose ansible-playbook PID is gone (by the role)."""
    owner = dict(holder, since=int(time.time()) if holder["since"] == "NOW" else holder["since"])
    ssh("gpu01", "mkdir -p %s/deploy.lock && echo '%s' > %s/deploy.lock/owner.json" % (STATE, json.dumps(owner), STATE))
    rc, out, reports = deploy({}, limit="gpu01")
    ok = rc == 0 and reports["gpu01"]["final_state"] == "serving"
    results.add("safety", "stale deploy lock (%s)" % how, "rc=%s; taken over, lock removed at the end" % rc, ok)
    assert ok, out[-3000:]
    assert ssh("gpu01", "test -e %s/deploy.lock" % STATE, check=False).returncode != 0


def _run_playbook(playbook, extra, args=()):
    """ansible-playbook PLAYBOOK -i INVENTORY --limit gpu01 -e @vars; -> (rc, output)."""
    handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8")  # pylint: disable=consider-using-with
    json.dump(dict(BASE_VARS, **extra), handle)
    handle.close()
    cmd = [PLAYBOOK[0], playbook, "-i", INVENTORY, "--limit", "gpu01", "-e", "@" + handle.name] + list(args)
    cp = subprocess.run(cmd, cwd=CHECKOUT, capture_output=True, text=True, timeout=400, env=playbook_env(), check=False)
    os.unlink(handle.name)
    return cp.returncode, cp.stdout + cp.stderr


def test_secrets_leak_nowhere(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    """An API key and a token in sglang_env: deploy, deploy --check --diff, the clean-up, status, all at -vvv. 0 copies in
    the controller's output and reports, and in every host file written meanwhile except the env file and its 0600
    copies (the journal aside: SGLang logs its arguments, see the README)."""
    marker = "/run/it-secret-marker"
    ssh("gpu01", "touch %s" % marker)
    report_dir = tempfile.mkdtemp(prefix="llmserve-it-")
    env = dict(BASE_VARS["sglang_env"], HF_TOKEN=TOKEN, IT_SECRET_RUN="1")
    extra = {"sglang_api_key": KEY, "sglang_env": env}
    rc, out, reports = deploy(extra, limit="gpu01", args=["-vvv"], report_dir=report_dir)
    assert rc == 0, out[-3000:]
    assert reports["gpu01"]["final_state"] == "serving"
    outputs = {"deploy": out}
    # a change (a new candidate ahead) seen in check mode with diffs
    rc, outputs["check --diff"], _reports = deploy(
        dict(extra, sglang_candidates=[{"name": "secret-new", "env": {"IT_NEW": "1", "WANDB_API_KEY": TOKEN2}}]),
        limit="gpu01", args=["-vvv", "--check", "--diff"], report_dir=report_dir)
    assert rc == 0, outputs["check --diff"][-3000:]
    rc, outputs["cleanup --check"] = _run_playbook("playbooks/cleanup.yml", extra, ["-vvv", "--check"])
    assert rc == 0, outputs["cleanup --check"][-3000:]
    rc, outputs["status"] = _run_playbook("playbooks/status.yml", extra, ["-vvv"])
    assert rc == 0 and "health ready" in outputs["status"], outputs["status"][-3000:]
    secrets = (KEY, TOKEN, TOKEN2)
    in_output = dict((name, sum(text.count(s) for s in secrets)) for name, text in outputs.items())
    # every file of the report, the Prometheus targets (file_sd/) included
    written = [os.path.relpath(os.path.join(d, n), report_dir) for d, _dirs, names in os.walk(report_dir) for n in names]
    in_reports = [n for n in written
                  if any(s in open(os.path.join(report_dir, n), encoding="utf-8", errors="replace").read() for s in secrets)]
    assert "file_sd/gpu01.json" in written, written
    unit = ssh("gpu01", "cat %s" % UNIT).stdout
    env_stat = ssh("gpu01", "stat -c '%%a %%U:%%G' %s" % ENV_FILE).stdout.strip()
    env_text = ssh("gpu01", "cat %s" % ENV_FILE).stdout
    # every file written since the deploy began, whatever its mode, but the env file, its 0600 copies and the
    # journal: the host's root is an overlay whose upper layer (read-only at UPPER) holds exactly the files written
    # since the host booted, the tmpfs /run and /tmp aside
    pattern = " ".join("-e '%s'" % s for s in secrets)
    found = [f[len(UPPER):] for f in ssh(
        "gpu01", "find %s -newer %s -type f ! -path '%s/var/log/journal/*' -print0 2>/dev/null "
                 "| xargs -0 -r grep -l -F %s 2>/dev/null || true" % (UPPER, marker, UPPER, pattern),
        timeout=120).stdout.split()]
    found += ssh("gpu01", "find /run /tmp -newer %s -type f ! -path '/run/log/journal/*' ! -path '%s/*' -print0 "
                          "2>/dev/null | xargs -0 -r grep -l -F %s 2>/dev/null || true" % (marker, UPPER, pattern),
                 timeout=60).stdout.split()
    copies = sorted(set(found))
    assert ENV_FILE in copies, "the search did not see the env file the deploy wrote: %s" % copies
    allowed = [f for f in copies if f == ENV_FILE or (f.startswith(STATE + "/") and "env" in os.path.basename(f))]
    modes = dict((f, ssh("gpu01", "stat -c %%a %s" % f).stdout.strip()) for f in allowed)
    leaked = [f for f in copies if f not in allowed]
    cmdline = ssh("gpu01", "tr '\\0' ' ' < /proc/$(systemctl show -p MainPID --value sglang)/cmdline").stdout
    ok = (not any(in_output.values()) and not in_reports and KEY not in unit and "${SGLANG_API_KEY}" in unit
          and env_stat == "600 root:root" and KEY in env_text and TOKEN in env_text and not leaked
          and set(modes.values()) <= {"600"})
    results.add("secrets", "sglang_api_key and an HF_TOKEN, -vvv: deploy, check --diff, clean-up, status",
                "copies in output: %s, reports: %d, unit: %s, env file %s, other host files with them: %d, "
                "0600 copies: %d; visible in /proc/PID/cmdline to root: %s"
                % (in_output, len(in_reports), KEY in unit, env_stat, len(leaked), len(modes), KEY in cmdline), ok)
    for name, text in outputs.items():
        assert not in_output[name], (name, [line for line in text.splitlines() if any(s in line for s in secrets)][:5])
    assert not in_reports, in_reports
    assert KEY not in unit and "${SGLANG_API_KEY}" in unit
    assert env_stat == "600 root:root" and KEY in env_text and TOKEN in env_text
    assert not leaked, leaked
    assert set(modes.values()) <= {"600"}, modes
    # and the server wants it: an unauthenticated request is refused
    code = ssh("gpu01", "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/v1/models || "
                        "/usr/bin/python3 -c \"import urllib.request as u\ntry:\n u.urlopen('http://127.0.0.1:30000/v1/models')\n"
                        "except Exception as e: print(getattr(e, 'code', e))\"", check=False).stdout.strip()
    assert "401" in code, code


def test_previous_files_are_kept_bounded(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    """sglang_launch keeps timestamped backups of the unit and env file, at most backup_keep (5) of each."""
    before = ssh("gpu01", "cat %s" % ENV_FILE).stdout
    for i in range(3):
        rc, out, _reports = deploy({"sglang_env": dict(BASE_VARS["sglang_env"], IT_BACKUP_ROUND=str(i))}, limit="gpu01")
        assert rc == 0, out[-3000:]
    names = ssh("gpu01", "ls %s/backups" % STATE).stdout.split()
    units = [n for n in names if n.startswith("sglang.service.")]
    envs = [n for n in names if n.startswith("sglang.env.")]
    newest_env = ssh("gpu01", "cat %s/backups/%s" % (STATE, sorted(envs)[-1])).stdout if envs else ""
    modes = set(ssh("gpu01", "stat -c %%a %s/backups/*" % STATE).stdout.split())
    ok = 0 < len(units) <= 5 and 0 < len(envs) <= 5 and 'IT_BACKUP_ROUND="1"' in newest_env and modes <= {"600"}
    results.add("safety", "previous unit/env kept as backups",
                "%d unit + %d env backups (keep 5), newest env = the previous one, modes %s" % (
                    len(units), len(envs), sorted(modes)), ok)
    assert 0 < len(units) <= 5 and 0 < len(envs) <= 5, names
    assert 'IT_BACKUP_ROUND="1"' in newest_env, newest_env
    assert modes <= {"600"}, modes
    assert before  # the baseline env file existed
