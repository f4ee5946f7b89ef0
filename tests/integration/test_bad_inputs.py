# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bad inputs: each stops the deploy with a message naming the variable and the fix, before any host changes."""

from __future__ import absolute_import, division, print_function

import concurrent.futures
import json
import os
import shlex
import tempfile
import urllib.request

import pytest

from conftest import CHECKOUT, IPS, deploy, install_behaviour, snapshot, ssh, serving_pids, gpu_pids, wait_for

LAB_MODEL = "/models/Qwen3.5-397B-A17B-NVFP4"  # the lab inventory's model folder (tests/lab/labctl.py makes it)
KG = {"name": "known-good", "moe_runner_backend": "flashinfer_cutlass", "fp4_gemm_backend": "flashinfer_cudnn"}

# id, extra vars, strings the error must contain, host (gpu01 unless a container case)
CASES = [
    ("misspelt-moe-backend", {"sglang_candidates": [{"name": "typo", "moe_runner_backend": "flashinfer_cutlas"}]},
     ["sglang_candidates[0].moe_runner_backend", "did you mean 'flashinfer_cutlass'"], "gpu01"),
    ("misspelt-known-good-backend", {"sglang_known_good": dict(KG, moe_runner_backend="flashinfer_cutlas")},
     ["sglang_known_good", "flashinfer_cutlass"], "gpu01"),
    ("unknown-flag-in-extra-args", {"sglang_extra_args": ["--nsa-prefill-backend", "flashmla_sparse"]},
     ["sglang_extra_args", "--nsa-prefill-backend"], "gpu01"),
    ("misspelt-flag-in-extra-args", {"sglang_extra_args": ["--chunked-prefil-size", "8192"]},
     ["sglang_extra_args", "did you mean --chunked-prefill-size"], "gpu01"),
    ("bad-choice-in-extra-args", {"sglang_extra_args": ["--attention-backend", "flashinfo"]},
     ["sglang_extra_args", "flashinfer"], "gpu01"),
    ("tp-size-above-gpu-count", {"sglang_tp_size": 16}, ["sglang_tp_size=16", "at most 8"], "gpu01"),
    ("tp-size-negative", {"sglang_tp_size": -2}, ["sglang_tp_size=-2"], "gpu01"),
    ("model-path-empty", {"sglang_model_path": ""}, ["sglang_model_path", "must not be empty"], "gpu01"),
    ("model-path-null", {"sglang_model_path": None}, ["sglang_model_path", "must not be empty"], "gpu01"),
    ("model-repo-id", {"sglang_model_path": "Qwen/Qwen3-8B"},
     ["sglang_model_path=Qwen/Qwen3-8B is a hub repo id", "sglang_model_download: true", "sglang_model_check: false"],
     "gpu01"),
    ("download-a-folder", {"sglang_model_download": True, "sglang_model_path": "/models/qwen"},
     ["sglang_model_path=/models/qwen: with sglang_model_download: true give a hub repo id"], "gpu01"),
    ("download-without-hf", {"sglang_model_download": True, "sglang_model_path": "Qwen/Qwen3-8B"},
     ["sglang_python=/root/ml-env/bin/python3: there is no hf command beside it", "sglang_model_download: false"],
     "gpu01"),
    ("download-bad-revision-and-cache", {"sglang_model_download": True, "sglang_model_path": "Qwen/Qwen3-8B",
                                         "sglang_model_revision": "main; rm", "sglang_model_cache": "models"},
     ["sglang_model_revision=main; rm", "sglang_model_cache=models: give an absolute folder"], "gpu01"),
    ("model-folder-missing", {"sglang_model_path": "/models/not-there"},
     ["sglang_model_path=/models/not-there: no such folder on the host"], "gpu01"),
    ("served-name-with-colon", {"sglang_served_model_name": "qwen:latest"},
     ["sglang_served_model_name", "qwen-latest"], "gpu01"),
    ("port-zero", {"sglang_port": 0}, ["sglang_port", "1-65535"], "gpu01"),
    ("port-70000", {"sglang_port": 70000}, ["sglang_port", "1-65535"], "gpu01"),
    ("port-not-a-number", {"sglang_port": "abc"}, ["sglang_port", "int"], "gpu01"),
    ("api-key-in-extra-args", {"sglang_extra_args": ["--api-key", "sk-in-extra-args-123"]},
     ["sglang_extra_args", "--api-key", "api_key"], "gpu01"),
    ("env-name-with-dash", {"sglang_env": {"BAD-NAME": "1"}}, ["sglang_env", "BAD-NAME"], "gpu01"),
    ("env-name-leading-digit", {"sglang_env": {"1CUDA": "1"}}, ["sglang_env", "1CUDA"], "gpu01"),
    ("candidate-env-bad-name", {"sglang_candidates": [{"name": "a", "env": {"A B": "1"}}]},
     ["sglang_candidates[0].env", "A B"], "gpu01"),
    ("candidates-not-a-list", {"sglang_candidates": {"name": "a"}}, ["sglang_candidates", "list"], "gpu01"),
    ("candidates-list-of-strings", {"sglang_candidates": ["flashinfer_cutlass"]}, ["sglang_candidates"], "gpu01"),
    ("candidate-duplicate-names", {"sglang_candidates": [{"name": "a"}, {"name": "a", "attention_backend": "triton"}]},
     ["sglang_candidates[1].name", "unique"], "gpu01"),
    ("candidate-unknown-key", {"sglang_candidates": [{"name": "a", "moe_backend": "flashinfer_cutlass"}]},
     ["sglang_candidates[0]", "moe_backend", "allowed keys"], "gpu01"),
    ("candidate-without-name", {"sglang_candidates": [{"moe_runner_backend": "flashinfer_cutlass"}]},
     ["sglang_candidates[0].name", "missing"], "gpu01"),
    ("candidate-name-with-slash", {"sglang_candidates": [{"name": "a/b"}]}, ["sglang_candidates[0].name"], "gpu01"),
    ("candidate-extra-args-string", {"sglang_candidates": [{"name": "a", "extra_args": "--enable-metrics"}]},
     ["sglang_candidates[0].extra_args", "list"], "gpu01"),
    ("candidate-force-not-bool", {"sglang_candidates": [{"name": "a", "force": "yes"}]},
     ["sglang_candidates[0].force", "true or false"], "gpu01"),
    ("smoke-prompt-without-text", {"sglang_smoke_prompts": [{"expect_any": ["Paris"]}]},
     ["sglang_smoke_prompts[0] needs prompt"], "gpu01"),
    ("smoke-prompt-bad-regex", {"sglang_smoke_prompts": [{"prompt": "x", "expect_any": ["re:(Paris"]}]},
     ["sglang_smoke_prompts[0].expect_any", "not a valid regular expression"], "gpu01"),
    ("selection-not-a-choice", {"sglang_selection": "best"}, ["sglang_selection", "first_ready", "fastest"], "gpu01"),
    ("ready-timeout-not-int", {"sglang_ready_timeout": "soon"}, ["sglang_ready_timeout"], "gpu01"),
    ("python-missing", {"sglang_python": "/opt/nowhere/bin/python3"}, ["sglang_python=/opt/nowhere/bin/python3"], "gpu01"),
    ("python-without-sglang", {"sglang_python": "/usr/bin/python3"}, ["sglang_python=/usr/bin/python3", "SGLang"], "gpu01"),
    ("service-name-invalid", {"sglang_service_name": "my service"}, ["sglang_service_name"], "gpu01"),
    ("vmid-does-not-exist", {"sglang_proxmox_vmid": 999}, ["sglang_proxmox_vmid=999", "pct list"], "ct129"),
    ("node-not-in-inventory", {"sglang_proxmox_node": "pve99"}, ["sglang_proxmox_node", "pve99"], "ct129"),
]


# The cases run side by side (none may change a host, so none may get as far as the deploy lock); the hosts are
# snapshotted before and after them all. Where a host changed, each case runs again alone, to name the one that did.
PARALLEL = int(os.environ.get("LLMSERVE_IT_BAD_INPUT_PARALLEL", "4"))


def bad_jobs():
    """Every bad-input deploy of this file: case name -> deploy()'s keyword arguments."""
    jobs = dict((c[0], {"extra_vars": c[1], "limit": c[3]}) for c in CASES)
    for name, gpu01_vars, ct129_vars, limit, _wants in GROUP_CASES:
        jobs[name] = {"extra_vars": {}, "inventory": group_inventory(gpu01_vars, ct129_vars), "limit": limit}
    return jobs


@pytest.fixture(scope="module")
def bad_runs(lab):  # pylint: disable=unused-argument,redefined-outer-name
    hosts = ("gpu01", "ct129")
    before = dict((h, snapshot(h)) for h in hosts)
    with concurrent.futures.ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        runs = dict((name, pool.submit(deploy, **kwargs)) for name, kwargs in bad_jobs().items())
        runs = dict((name, future.result()) for name, future in runs.items())
    after = dict((h, snapshot(h)) for h in hosts)
    return {"runs": runs, "before": before, "after": after}


def bad_run(bad_runs, name, hosts, **kwargs):  # pylint: disable=redefined-outer-name
    """A case's (rc, output, before, after): from the batch, or run again alone where a host changed in the batch."""
    rc, out, _reports = bad_runs["runs"][name]
    before = tuple(bad_runs["before"][h] for h in hosts)
    after = tuple(bad_runs["after"][h] for h in hosts)
    if before != after:
        before = tuple(snapshot(h) for h in hosts)
        rc, out, _reports = deploy(**kwargs)
        after = tuple(snapshot(h) for h in hosts)
    return rc, out, before, after


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(bad_runs, results, case):  # pylint: disable=redefined-outer-name
    name, extra, expect, host = case
    rc, out, before, after = bad_run(bad_runs, name, (host,), extra_vars=extra, limit=host)
    missing = [e for e in expect if e not in out]
    first = [line.strip() for line in out.splitlines() if "msg:" in line or "fatal:" in line or "ERROR" in line][:3]
    results.add("bad input", name, "rc=%s; %s" % (rc, " ".join(first)[:160]), rc != 0 and not missing and before == after)
    assert rc != 0, out[-3000:]
    assert not missing, "error does not name %s:\n%s" % (missing, out[-3000:])
    assert before == after, "host changed:\n--- before\n%s\n--- after\n%s" % (before, after)


def test_port_taken_by_another_process(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    ssh("gpu01", "systemd-run --unit=it-port-squatter /usr/bin/python3 -m http.server --bind 0.0.0.0 31999")
    try:
        assert ssh("gpu01", "for i in $(seq 50); do ss -Hltn 'sport = :31999' | grep -q . && exit 0; sleep 0.1; done; exit 1",
                   check=False).returncode == 0
        before = snapshot("gpu01")
        rc, out, _reports = deploy({"sglang_port": 31999}, limit="gpu01")
        after = snapshot("gpu01")
        ok = rc != 0 and "sglang_port=31999 is already in use" in out and before == after
        results.add("bad input", "port-taken-by-another-process", "rc=%s; names sglang_port and the holder" % rc, ok)
        assert rc != 0 and "sglang_port=31999 is already in use" in out, out[-3000:]
        assert before == after
        assert ssh("gpu01", "systemctl is-active it-port-squatter", check=False).stdout.strip() == "active"
    finally:
        ssh("gpu01", "systemctl stop it-port-squatter", check=False)


def test_nvidia_smi_missing(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    ssh("gpu01", "mv /usr/bin/nvidia-smi /usr/bin/nvidia-smi.it-aside")
    try:
        before = snapshot("gpu01")
        rc, out, _reports = deploy({}, limit="gpu01")
        after = snapshot("gpu01")
    finally:
        ssh("gpu01", "mv /usr/bin/nvidia-smi.it-aside /usr/bin/nvidia-smi")
    ok = rc != 0 and "nvidia-smi" in out and before == after
    results.add("bad input", "nvidia-smi-missing", "rc=%s; names nvidia-smi" % rc, ok)
    assert rc != 0 and "nvidia-smi" in out, out[-3000:]
    assert before == after


def test_proxmox_node_unreachable(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    inv = tempfile.mkdtemp(prefix="llmserve-it-inv-")
    os.symlink(os.path.join(CHECKOUT, "inventories", "lab", "group_vars"), os.path.join(inv, "group_vars"))
    with open(os.path.join(inv, "hosts.yml"), "w", encoding="utf-8") as handle:
        handle.write("all:\n  children:\n    sglang_servers:\n      hosts:\n        ct129:\n"
                     "          ansible_host: %s\n          sglang_proxmox_node: pve01\n"
                     "          sglang_proxmox_vmid: 129\n    proxmox_nodes:\n      hosts:\n"
                     "        pve01:\n          ansible_host: 10.77.0.250\n" % IPS["ct129"])
    before = snapshot("ct129")
    rc, out, _reports = deploy({}, inventory=inv)
    after = snapshot("ct129")
    ok = rc != 0 and "sglang_proxmox_node=pve01 (10.77.0.250) is unreachable" in out and before == after
    results.add("bad input", "proxmox-node-unreachable", "rc=%s; names sglang_proxmox_node" % rc, ok)
    assert ok, out[-3000:]


def test_arch_unsupported_is_skipped_not_started(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    main_before, _procs = serving_pids("gpu01")
    rc, out, reports = deploy({"sglang_candidates": [{"name": "trtllm-moe", "moe_runner_backend": "flashinfer_trtllm"}]},
                              limit="gpu01", args=["-v"])
    with open("/tmp/llmserve-it-arch-unsupported.log", "w", encoding="utf-8") as handle:
        handle.write(out)
    assert "gpu01" in reports, out[-4000:]
    entry = reports["gpu01"]["candidates"][0]
    main_after, _procs = serving_pids("gpu01")
    ok = (rc == 0 and entry["outcome"] == "skipped" and entry["reason"] == "arch_unsupported"
          and main_before == main_after)
    results.add("bad input", "arch-unsupported-without-force",
                "rc=%s; plan: %s/%s; serving PID unchanged: %s" % (
                    rc, entry["outcome"], entry["reason"], main_before == main_after), ok)
    assert rc == 0, out[-3000:]
    assert (entry["outcome"], entry["reason"]) == ("skipped", "arch_unsupported"), entry
    assert "Start trtllm-moe" not in out
    assert main_before == main_after, ("serving PID changed %s -> %s: the serving unit was restarted "
                                       "(see /tmp/llmserve-it-arch-unsupported.log)" % (main_before, main_after))


def test_model_path_with_spaces_quotes_dollar(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    """Not a bad input: it must work, quoted for systemd, and SGLang must receive the exact path."""
    path = "/models/My Model's \"v2\" $HOME ${X} 100% \\ end"
    ssh("gpu01", "mkdir -p %s && cp -a %s/. %s" % (shlex.quote(path), LAB_MODEL, shlex.quote(path)))
    rc, out, reports = deploy({"sglang_model_path": path, "sglang_served_model_name": "quoted"}, limit="gpu01")
    with urllib.request.urlopen("http://%s:30000/get_model_info" % IPS["gpu01"], timeout=10) as reply:
        got = json.loads(reply.read().decode("utf-8"))["model_path"]
    unit = ssh("gpu01", "cat /etc/systemd/system/sglang.service").stdout
    ok = rc == 0 and reports["gpu01"]["final_state"] == "serving" and got == path
    results.add("bad input", "model path with spaces, quotes, $, %, backslash (must work)",
                "rc=%s %s; /get_model_info model_path == the exact path: %s" % (
                    rc, reports.get("gpu01", {}).get("final_state"), got == path), ok)
    assert rc == 0, out[-3000:]
    assert got == path, (got, path, unit)


def test_partial_model_stops_before_any_change(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    """A download cut short: one shard gone, another shorter than the index says. The deploy stops in preflight,
    naming sglang_model_path and the files, and nothing on the host changes."""
    path = "/models/partial"
    ssh("gpu01", "rm -rf %s && cp -a %s %s && rm %s/model-00002-of-00002.safetensors" % (path, LAB_MODEL, path, path))
    before = snapshot("gpu01")
    rc, out, _reports = deploy({"sglang_model_path": path}, limit="gpu01")
    missing = "sglang_model_path=/models/partial is missing model-00002-of-00002.safetensors" in out
    ssh("gpu01", "cp -a %s/model-00002-of-00002.safetensors %s/ && truncate -s 100 %s/model-00001-of-00002.safetensors"
        % (LAB_MODEL, path, path))
    rc2, out2, _reports = deploy({"sglang_model_path": path}, limit="gpu01")
    short = "less than the 8192 the index says" in out2
    after = snapshot("gpu01")
    ok = rc != 0 and rc2 != 0 and missing and short and after == before
    results.add("bad input", "model with a shard missing, then one cut short",
                "rc=%s/%s; names the missing shard: %s; the short download: %s; host unchanged: %s"
                % (rc, rc2, missing, short, after == before), ok)
    assert missing, out[-3000:]
    assert short, out2[-3000:]
    assert after == before


def group_inventory(gpu01_vars, ct129_vars):
    """The lab inventory with gpu01 and ct129 made one serving group (host vars given per member)."""
    inv = tempfile.mkdtemp(prefix="llmserve-it-inv-")
    os.symlink(os.path.join(CHECKOUT, "inventories", "lab", "group_vars"), os.path.join(inv, "group_vars"))
    hosts = {"all": {"children": {
        "sglang_servers": {"hosts": {
            "gpu01": dict({"ansible_host": IPS["gpu01"], "sglang_group": "pair", "sglang_node_rank": 0}, **gpu01_vars),
            "ct129": dict({"ansible_host": IPS["ct129"], "sglang_group": "pair", "sglang_node_rank": 1,
                           "sglang_proxmox_node": "pve01", "sglang_proxmox_vmid": 129}, **ct129_vars)}},
        "proxmox_nodes": {"hosts": {"pve01": {"ansible_host": IPS["pve01"]}}}}}}
    with open(os.path.join(inv, "hosts.yml"), "w", encoding="utf-8") as handle:
        json.dump(hosts, handle)      # JSON is YAML
    return inv


GROUP_CASES = [
    # id, gpu01 vars, ct129 vars, --limit, strings the error must contain
    ("group-member-left-out-by-limit", {}, {}, "gpu01", ["sglang_group 'pair'", "ct129 are not in this run", "--limit"]),
    ("group-two-members-one-rank", {}, {"sglang_node_rank": 0}, None,
     ["sglang_node_rank 0 is given to ct129 and gpu01"]),
    ("group-tp-not-split-over-nodes", {"sglang_tp_size": 7}, {"sglang_tp_size": 7}, None,
     ["sglang_tp_size=7 cannot be split over the 2 nodes", "multiple of 2"]),
    ("group-settings-differ", {}, {"sglang_served_model_name": "other"}, None,
     ["sglang_served_model_name differs", "group_vars"]),
    ("group-dist-init-addr-not-rank0s", {"sglang_dist_init_addr": "10.77.0.250:20000"},
     {"sglang_dist_init_addr": "10.77.0.250:20000"}, None,
     ["dist-init address 10.77.0.250:20000", "not an address of this host, rank 0"]),
]


@pytest.mark.parametrize("case", GROUP_CASES, ids=[c[0] for c in GROUP_CASES])
def test_bad_serving_group(bad_runs, results, case):  # pylint: disable=redefined-outer-name
    """A multi-node group is checked as a whole in preflight: nothing changes on any member."""
    name, gpu01_vars, ct129_vars, limit, wants = case
    rc, out, before, after = bad_run(bad_runs, name, ("gpu01", "ct129"), extra_vars={},
                                     inventory=group_inventory(gpu01_vars, ct129_vars), limit=limit)
    missing = [w for w in wants if w not in out]
    line = next((ln.strip() for ln in out.splitlines() if wants[0] in ln), "")
    ok = rc != 0 and not missing and before == after
    results.add("bad input", name, "rc=%s; %s" % (rc, line[:160]), ok)
    assert rc != 0 and not missing, (missing, out[-3000:])
    assert before == after


def test_group_member_cannot_reach_rank0(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    """ct129 has no route to gpu01 (as behind a firewall that rejects): preflight names the address, nothing changes."""
    ssh("ct129", "ip route add unreachable %s/32" % IPS["gpu01"])
    try:
        before = (snapshot("gpu01"), snapshot("ct129"))
        rc, out, _reports = deploy({}, inventory=group_inventory({}, {}))
        after = (snapshot("gpu01"), snapshot("ct129"))
    finally:
        ssh("ct129", "ip route del unreachable %s/32" % IPS["gpu01"])
    want = "dist-init address %s:20000 cannot be reached from this member" % IPS["gpu01"]
    ok = rc != 0 and want in out and before == after
    results.add("bad input", "group-member-cannot-reach-rank0", "rc=%s; %s" % (rc, want if want in out else "?"), ok)
    assert rc != 0 and want in out, out[-3000:]
    assert before == after


def test_container_stopped(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    """Last of the container cases. A lab container restarts from a fresh root, so the suite's behaviour table and
    baseline go back onto ct129 after it: the files that run after this one in the same worker expect them."""
    before = snapshot("gpu01")
    ssh("pve01", "pct stop 129")
    try:
        rc, out, _reports = deploy({})
        status = ssh("pve01", "pct status 129").stdout.strip()
    finally:
        ssh("pve01", "pct start 129", check=False)
    after = snapshot("gpu01")
    # the container boots again: its sshd answers, and its boot ends, before the baseline goes back
    assert wait_for(lambda: ssh("ct129", "systemctl is-system-running --wait >/dev/null 2>&1; true",
                                check=False).returncode == 0, 120, 1), "ct129 did not come back after pct start"
    install_behaviour(("ct129",))
    rc_back, out_back, back = deploy(limit="ct129")
    assert rc_back == 0 and back["ct129"]["final_state"] == "serving", out_back[-3000:]
    ok = rc != 0 and "container 129 on pve01 is not running" in out and status == "status: stopped" and before == after
    results.add("bad input", "container-stopped", "rc=%s; names the container, says pct start; gpu01 untouched" % rc, ok)
    assert ok, out[-3000:]
    assert gpu_pids("gpu01") == serving_pids("gpu01")[1] & gpu_pids("gpu01")
