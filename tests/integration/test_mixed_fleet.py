# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mixed fleets and change: each host tries its own plan in its own order; the serving configuration is kept only
when nothing better is planned; check mode shows what would happen and changes nothing."""

from __future__ import absolute_import, division, print_function

import os
import tempfile

from conftest import BASE_VARS, deploy, install_behaviour, lab_inventory, snapshot

HOSTS = ("gpu01", "ct129")
# healthy candidates (explicit backends that serve on SM120 whatever the behaviour table; they differ only by an
# env value, so each has its own record key) and one that crashes
BACKENDS = {"moe_runner_backend": "flashinfer_cutlass", "fp4_gemm_backend": "flashinfer_cudnn"}
CAND = {
    "x": dict(BACKENDS, name="mix-x", env={"IT_MIX": "x"}),
    "y": dict(BACKENDS, name="mix-y", env={"IT_MIX": "y"}),
    "z": dict(BACKENDS, name="mix-z", env={"IT_MIX": "z", "LAB_SCENARIO": "crash_load"}),
    "w": dict(BACKENDS, name="mix-w", env={"IT_MIX": "w"}),
    "y2": dict(BACKENDS, name="mix-y", env={"IT_MIX": "y2"}),  # the same name as y, another configuration
}


def _common(tag):
    # a base of its own per test: neither the baseline's serving configuration nor another test's record counts
    return {"sglang_env": dict(BASE_VARS["sglang_env"], IT_SCENARIO_RUN="mixed-" + tag), "sglang_screen": False}


def _plans(plans, forced=()):
    """{host: ['x', 'y']} -> host_vars with those candidates in that order."""
    out = {}
    for host, names in plans.items():
        cands = []
        for n in names:
            c = dict(CAND[n], env=dict(CAND[n]["env"]))
            if n in forced:
                c["force"] = True
            cands.append(c)
        out[host] = {"sglang_candidates": cands}
    return out


def _run(tag, plans, results, label, forced=(), args=()):
    install_behaviour()  # a container restarted by an earlier test starts from a fresh root
    report_dir = tempfile.mkdtemp(prefix="llmserve-it-")
    rc, out, reports = deploy(_common(tag), inventory=lab_inventory(_plans(plans, forced)), drop=("sglang_candidates",),
                              args=args, timeout=600, report_dir=report_dir)
    assert rc == 0, out[-4000:]
    with open(os.path.join(report_dir, "report.md"), encoding="utf-8") as handle:
        reports["_md"] = handle.read()
    rows = {}
    for host in HOSTS:
        rep = reports[host]
        rows[host] = {c["name"]: (c["outcome"], c["reason"]) for c in rep["candidates"]}
        results.add("mixed fleet", "%s: %s %s" % (label, host, "/".join(plans[host])),
                    "%s with %s; %s" % (rep["final_state"], rep["selected"],
                                        ", ".join("%s=%s/%s" % (n, o, r) for n, (o, r) in rows[host].items())))
    return reports, rows, out


def _first_healthy(names):
    return [CAND[n]["name"] for n in names if n != "z"][0]


def _assert_own_order(reports, rows, plans):
    """Each host served its own first healthy candidate; those before it failed, those after it were not tried."""
    for host, names in plans.items():
        want = _first_healthy(names)
        assert reports[host]["selected"] == want, (host, rows[host])
        position = names.index([n for n in names if CAND[n]["name"] == want][0])
        for n in names[:position]:
            assert rows[host][CAND[n]["name"]] == ("failed", "crashed"), (host, rows[host])
        for n in names[position + 1:]:
            assert rows[host][CAND[n]["name"]] == ("skipped", "not_needed"), (host, rows[host])


def test_each_host_follows_its_own_order(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    """Plans that differ in length and order on two hosts in one run: each host tries its own candidates in its own
    order and serves its own first healthy one; those after it are not tried. (The reuse test below runs more
    mixed plans.)"""
    plans = {"gpu01": ["x", "y"], "ct129": ["z", "y", "x"]}
    reports, rows, _out = _run("order", plans, results, "own order", forced=("z",))
    _assert_own_order(reports, rows, plans)
    assert reports["gpu01"]["fallback_used"] is False and reports["ct129"]["fallback_used"] is False


def test_reuse_only_when_nothing_better_is_planned(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    """Serving y; the same plan again keeps it (reused, nothing tried); candidates put ahead of it on one host are
    tried there in that host's order while the other host keeps its own; one that failed here is then skipped and
    what serves is kept."""
    plans = {"gpu01": ["y"], "ct129": ["y"]}
    reports, _rows, _out = _run("reuse", plans, results, "serve y")
    assert all(reports[h]["selected"] == "mix-y" for h in HOSTS), reports
    # the same again: kept without a trial
    reports, rows, _out = _run("reuse", plans, results, "same plan")
    for host in HOSTS:
        entry = [c for c in reports[host]["candidates"] if c["name"] == "mix-y"][0]
        assert entry["outcome"] == "ready" and entry.get("reused") is True, entry
        assert reports[host]["fallback_used"] is False
        assert rows[host]["known-good"] == ("skipped", "not_needed")
    # z (new, crashes) and x (new) ahead of y on gpu01 only: both tried there, in order, x serves; ct129 keeps y
    plans = {"gpu01": ["z", "x", "y"], "ct129": ["y"]}
    reports, rows, _out = _run("reuse", plans, results, "z and x ahead on gpu01")
    _assert_own_order(reports, rows, {"gpu01": plans["gpu01"]})
    assert not [c for c in reports["gpu01"]["candidates"] if c.get("reused")], rows["gpu01"]
    assert [c for c in reports["ct129"]["candidates"] if c["name"] == "mix-y"][0].get("reused") is True
    # z again, not forced: skipped as known_bad, x kept without a trial
    reports, rows, _out = _run("reuse", {"gpu01": ["z", "x"], "ct129": ["y"]}, results, "z known bad")
    assert rows["gpu01"]["mix-z"][1] == "known_bad", rows["gpu01"]
    assert [c for c in reports["gpu01"]["candidates"] if c["name"] == "mix-x"][0].get("reused") is True


def test_check_mode_tells_the_truth(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    """Serving y (x behind it, never tried). A --check --diff run after each change (a candidate added, removed,
    moved up, changed; two changes per run, one per host) says which candidates a run would try, in order, shows the
    first one's diff, writes its report marked check mode and changes nothing on the hosts."""
    reports, _rows, _out = _run("check", {"gpu01": ["y", "x"], "ct129": ["y", "x"]}, results, "check mode: serve")
    assert reports["gpu01"]["selected"] == "mix-y" and reports["ct129"]["selected"] == "mix-y", reports
    before = {h: snapshot(h) for h in HOSTS}
    for changes in ({"gpu01": ("added", ["w", "y", "x"]), "ct129": ("removed", [])},
                    {"gpu01": ("moved up", ["x", "y"]), "ct129": ("changed", ["y2", "x"])}):
        plans = dict((h, plan) for h, (_change, plan) in changes.items())
        label = ", ".join("%s %s" % (h, change) for h, (change, _plan) in changes.items())
        reports, _rows, out = _run("check", plans, results, "check mode (%s)" % label, args=["--check", "--diff"])
        for host, (change, plan) in changes.items():
            rep = reports[host]
            assert rep["final_state"] == "check_mode" and rep["check_mode"] is True, (change, rep)
            tried = sorted((c["would_try"], c["name"]) for c in rep["candidates"] if c.get("would_try"))
            assert [n for _pos, n in tried] == [CAND[n]["name"] for n in plan] + ["known-good"], (change, host, tried)
            assert [pos for pos, _n in tried] == list(range(1, len(plan) + 2)), (change, tried)
            assert rep["selected"] is None and rep["fallback_used"] is False
            # the first candidate's env file diff (its IT_MIX), or the known-good's (no IT_MIX at all)
            if plan:
                assert '+IT_MIX="%s"' % CAND[plan[0]]["env"]["IT_MIX"] in out, (change, out[-3000:])
            else:
                assert '-IT_MIX="y"' in out, (change, out[-3000:])
        assert "Check mode: nothing was changed" in reports["_md"] and "would be tried first" in reports["_md"]
        assert "check mode: nothing was changed" in out
        after = {h: snapshot(h) for h in HOSTS}
        assert after == before, (label, before, after)
