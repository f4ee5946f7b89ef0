# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rolling changes behind the router: three servers (gpu01, ct129 and gpu02, which this file adds to the inventory)
behind smg on rt01; playbooks/rolling.yml rolls a change of the candidate list through them one at a time while a
constant load goes through the router (the collection's load generator, tests/lab/fleetload.py): no request fails
and never fewer than two servers are in the router's traffic. A batch that does not end serving stops the rollout and
leaves the later hosts as they were; bad settings stop before any host is changed; gpu02, taken out of the inventory
again, is gone from the router's list when router.yml ends."""

from __future__ import absolute_import, division, print_function

import json
import os
import tempfile
import time

import pytest

from conftest import IPS, STATE, UNIT, deploy, install_behaviour, play as _play, ssh, wait_for
from fleetload import FleetLoad
from routerlab import KEY, ROUTER_PORT, ROUTER_VARS, model, router

SERVERS = ("gpu01", "ct129", "gpu02")
URLS = dict((h, "http://%s:30000" % IPS[h]) for h in SERVERS)
REPORT = tempfile.mkdtemp(prefix="llmserve-it-rolling-")  # the rolling change's report, read by Prometheus's test
ROUTER_TARGETS = os.path.join(REPORT, "file_sd", "routers")
CHANGE = [{"name": "cutlass-tuned", "moe_runner_backend": "flashinfer_cutlass", "fp4_gemm_backend": "flashinfer_cudnn",
           "extra_args": ["--max-running-requests", "64"]}]


@pytest.fixture(scope="module")
def fleet(lab):  # pylint: disable=redefined-outer-name,unused-argument
    """gpu02 in sglang_servers (an inventory file given with a second -i), deployed like the baseline; the router
    in front of the three."""
    path = os.path.join(tempfile.mkdtemp(prefix="llmserve-it-fleet-"), "fleet.yml")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"all": {"children": {"sglang_servers": {"hosts": {"gpu02": {"ansible_host": IPS["gpu02"]}}}}}},
                  handle)
    install_behaviour(hosts=("gpu02",))
    rc, out, _reports = deploy(limit="gpu02", args=("-i", path))
    assert rc == 0, out[-3000:]
    rc, out = _play("playbooks/router.yml", dict(ROUTER_VARS, router_targets_dir=ROUTER_TARGETS), args=("-i", path))
    assert rc == 0, out[-3000:]
    yield path


def _roll(fleet_inv, extra, report_dir):
    """ansible-playbook playbooks/rolling.yml (the suite's baseline variables, the router's, ``extra``); -> (rc,
    output, rollout.json or None)."""
    values = dict(ROUTER_VARS, sglang_report_dir=report_dir)
    values.update(extra)
    rc, out = _play("playbooks/rolling.yml", values, args=("-i", fleet_inv))
    path = os.path.join(report_dir, "rollout.json")
    rollout = None
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            rollout = json.load(handle)
    return rc, out, rollout


def _units():
    return dict((h, ssh(h, "stat -c %Y " + UNIT).stdout.strip()) for h in SERVERS)


def test_bad_settings_stop_before_any_change(fleet, results):  # pylint: disable=redefined-outer-name
    before = _units()
    rc, out, _rollout = _roll(fleet, {"sglang_candidates": CHANGE, "sglang_rolling_batch": 0,
                                      "sglang_drain_timeout": 10, "sglang_request_timeout": 60},
                              tempfile.mkdtemp(prefix="llmserve-it-"))
    named = "sglang_rolling_batch is 0" in out and "sglang_drain_timeout (10 s) is below sglang_request_timeout" in out
    rc2, out2, _rollout = _roll(fleet, {"sglang_candidates": CHANGE, "router_port": 30099},
                                tempfile.mkdtemp(prefix="llmserve-it-"))
    named2 = "the router rt01 does not answer" in out2 and "router_port" in out2
    unchanged = _units() == before
    results.add("rolling", "bad settings: batch 0 with a drain below the longest request; a router that does not answer",
                "rc %d, %s; rc %d, %s; units %s" % (rc, "both named" if named else "NOT named", rc2,
                                                    "named" if named2 else "NOT named",
                                                    "unchanged" if unchanged else "CHANGED"),
                rc != 0 and named and rc2 != 0 and named2 and unchanged)
    assert rc != 0 and named, out[-3000:]
    assert rc2 != 0 and named2, out2[-3000:]
    assert unchanged


def test_rolling_change_under_load(fleet, results):  # pylint: disable=redefined-outer-name
    report_dir = REPORT
    served = model()
    assert served, router("/workers")
    t0 = time.time()
    with FleetLoad(IPS["rt01"], ROUTER_PORT, KEY, URLS.values(), served) as load:
        time.sleep(3)
        rc, out, rollout = _roll(fleet, {"sglang_candidates": CHANGE, "sglang_rolling_batch": 1}, report_dir)
        time.sleep(3)
    wall = time.time() - t0
    figures = load.figures()
    failed, fewest = figures["failed"], figures["fewest_serving"]
    batches = [(b["batch"], [h["host"] for h in b["hosts"]], b["outcome"]) for b in (rollout or {}).get("batches", [])]
    selected = {}
    for host in SERVERS:
        with open(os.path.join(report_dir, host + ".json"), encoding="utf-8") as handle:
            selected[host] = json.load(handle)["selected"]
    ok = (rc == 0 and not failed and fewest == len(SERVERS) - 1 and len(batches) == 3
          and all(b[2] == "served" for b in batches) and set(selected.values()) == {"cutlass-tuned"})
    results.add("rolling", "rolling.yml, batch 1, a candidate change through 3 servers under a constant load via smg",
                "rc %d; %d requests, %d failed; fewest serving %s of %d; batches %s; selected %s; %.0f s" % (
                    rc, figures["requests"], failed, fewest, len(SERVERS), batches, sorted(set(selected.values())), wall),
                ok)
    assert rc == 0, out[-4000:]
    assert figures["requests"] > 0 and not failed, figures
    assert fewest == len(SERVERS) - 1, load.ready
    assert [b[1] for b in batches] == [["gpu01"], ["ct129"], ["gpu02"]], batches  # the inventory's order
    assert all(b[2] == "served" for b in batches), rollout
    assert set(selected.values()) == {"cutlass-tuned"}, selected
    assert "## Rollout" in open(os.path.join(report_dir, "report.md"), encoding="utf-8").read()


def test_a_batch_that_does_not_serve_stops_the_rollout(fleet, results):  # pylint: disable=redefined-outer-name
    """The first batch's host crashes with every candidate and the known-good one (LAB_SCENARIO crash_load on gpu01
    only): its previous unit is put back, the rollout stops, the other hosts keep their units."""
    report_dir = tempfile.mkdtemp(prefix="llmserve-it-")
    first = router("/workers")
    before = _units()
    crash = "{{ {'LAB_SCENARIO': 'crash_load'} if inventory_hostname == 'gpu01' else {} }}"
    change = [dict(CHANGE[0], name="cutlass-64", extra_args=["--max-running-requests", "32"], env=crash)]
    known_good = {"name": "known-good", "moe_runner_backend": "flashinfer_cutlass",
                  "fp4_gemm_backend": "flashinfer_cudnn", "env": crash}
    rc, out, rollout = _roll(fleet, {"sglang_candidates": change, "sglang_known_good": known_good}, report_dir)
    after = _units()
    outcomes = [(b["batch"], b["outcome"]) for b in (rollout or {}).get("batches", [])]
    first_batch = (rollout or {}).get("batches", [{}])[0].get("hosts", [{}])[0]
    left = (rollout or {}).get("left_as_they_were")
    untouched = all(after[h] == before[h] for h in SERVERS if h != first_batch.get("host"))
    locks = [h for h in SERVERS if ssh(h, "test -e %s/deploy.lock" % STATE, check=False).returncode == 0]
    back = router("/workers")[1]
    in_router = sorted(w["url"] for w in back.get("workers", []) if w.get("is_healthy"))
    ok = (rc != 0 and outcomes and outcomes[0][1] == "stopped" and all(o == "not_reached" for _b, o in outcomes[1:])
          and untouched and len(left or []) == 2 and "the rollout stopped after batch 1" in out
          and in_router == sorted(URLS.values()) and not locks)
    results.add("rolling", "the first batch's host crashes with every configuration (its previous unit put back)",
                "rc %d; batches %s; %s %s; left as they were %s (units %s); back in the router: %d of 3; "
                "deploy locks left: %s" % (rc, outcomes, first_batch.get("host"), first_batch.get("final_state"), left,
                                           "unchanged" if untouched else "CHANGED", len(in_router), locks or "none"), ok)
    assert rc != 0, out[-3000:]
    assert outcomes and outcomes[0][1] == "stopped", rollout
    assert all(o == "not_reached" for _b, o in outcomes[1:]), rollout
    assert first_batch.get("host") == "gpu01" and first_batch.get("final_state") == "rolled_back", rollout
    assert untouched, (before, after)
    assert len(left or []) == 2 and "the rollout stopped after batch 1" in out, out[-2000:]
    assert in_router == sorted(URLS.values()), (first, back)
    assert not locks, locks


def _targets():
    out = ssh("pve01", "curl -s http://127.0.0.1:9090/api/v1/targets", check=False).stdout
    try:
        active = json.loads(out)["data"]["activeTargets"]
    except (ValueError, KeyError):
        return {}
    return dict(("%s/%s" % (t["labels"]["job"], t["labels"].get("sglang_host") or t["labels"].get("smg_router")),
                 t["health"]) for t in active if t["labels"]["job"] in ("sglang", "smg"))


def test_prometheus_sees_the_fleet(fleet, results):  # pylint: disable=redefined-outer-name,unused-argument
    """playbooks/prometheus.yml with the rolling change's targets: the three servers and the router, all up."""
    rc, out = _play("playbooks/prometheus.yml", {"prometheus_targets_src": os.path.join(REPORT, "file_sd"),
                                                 "prometheus_scrape_interval": "1s"})
    want = sorted(["sglang/%s" % h for h in SERVERS] + ["smg/rt01"])
    try:
        up = wait_for(lambda: sorted(k for k, v in _targets().items() if v == "up") == want, 30)
        query = ssh("pve01", "curl -s 'http://127.0.0.1:9090/api/v1/query?query=smg_worker_health'", check=False).stdout
    finally:
        # the role copies targets and removes none: the targets of this file's fleet go, for the worker's next files
        ssh("pve01", "rm -f /etc/prometheus/file_sd/sglang/gpu02.json /etc/prometheus/file_sd/sglang/routers/rt01.json")
    workers = sorted(r["metric"].get("worker") for r in json.loads(query or "{}").get("data", {}).get("result", []))
    results.add("rolling", "prometheus.yml with the rolling change's file_sd (servers) and the router play's (routers/)",
                "rc %d; targets %s; smg_worker_health of %d workers" % (rc, _targets(), len(workers)),
                rc == 0 and up and workers == sorted(URLS.values()))
    assert rc == 0, out[-3000:]
    assert up, _targets()
    assert workers == sorted(URLS.values()), query[:2000]


def test_a_host_gone_from_the_inventory_leaves_the_router(fleet, results):  # pylint: disable=redefined-outer-name,unused-argument
    """router.yml without this file's inventory (gpu02 no longer a member): when the play ends the router lists
    gpu01 and ct129 alone, gpu02 drained and dropped rather than still in its list."""
    assert sorted(w["url"] for w in router("/workers")[1].get("workers", [])) == sorted(URLS.values())
    rc, out = _play("playbooks/router.yml", ROUTER_VARS)
    listed = router("/workers")[1].get("workers", [])
    urls = sorted(w["url"] for w in listed)
    healthy = all(w.get("is_healthy") for w in listed)
    want = sorted(URLS[h] for h in ("gpu01", "ct129"))
    results.add("rolling", "router.yml again without gpu02 in the inventory",
                "rc %d; listed when the play ends: %s (%s)" % (rc, urls, "all healthy" if healthy else "NOT all healthy"),
                rc == 0 and urls == want and healthy)
    assert rc == 0, out[-3000:]
    assert urls == want and healthy, listed
