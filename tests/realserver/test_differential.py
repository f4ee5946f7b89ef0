# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fake SGLang is no kinder than the real 0.5.23: the same scenarios on both, on the same lab host, compared on
what the collection reads.

gpu01 of a ``--real-sglang`` lab has both: the fake (``/root/ml-env/bin/python3``, the fast suite's server) and the
real SGLang 0.5.23 (``tests/realserver/vars.yml``). ``diff_probe.py`` plays each scenario on the host with one of
them, in a transient unit with the collection's unit settings and the argv it renders, and records:

- the whole journal, line by line (``journal_kinds.py``: each line reduced to its kind, times, numbers, addresses
  and paths normalised): a kind of line one side prints and the other never does is a difference unless
  ``journal_kinds.ALLOWED_LINES`` gives the reason;
- the journal as the collection reads it (``sglang_log.classify_line``: milestones, the ready line, fatal
  markers with their reason and a dead child's exit code, exception lines), in order;
- how the main process ended and the unit's result (systemd's own lines), and which processes systemd still had
  to kill when it ended (a fake that leaves its children behind would hide a clean-up bug);
- the processes of the unit while serving, as ``comm<-parent comm``;
- the status codes of /health, /health_generate, /model_info, /server_info, /v1/models (every 0.25 s) while
  starting (in the order they first appear), once serving, and the last ones after the fault or the stop;
- the stop's duration (SIGTERM while idle, or with a request in flight, and that request's answer) and how long
  the main process lingers after its scheduler is killed.

A difference fails the test unless ALLOWED (or ALLOWED_LINES, for the journal's lines) gives it a reason.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(CHECKOUT, "tests", "lab"))
sys.path.insert(0, os.path.join(CHECKOUT, ".tmp", "collections"))
from labctl import load_config  # noqa: E402  pylint: disable=wrong-import-position
from labsession import lab_host, lab_session, slot_ips  # noqa: E402  pylint: disable=wrong-import-position
from conftest import emit  # noqa: E402  pylint: disable=wrong-import-position
from journal_kinds import journal_differences, line_kind  # noqa: E402  pylint: disable=wrong-import-position
# pylint: disable-next=wrong-import-position
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_log  # noqa: E402

LABCTL = ["/usr/bin/python3", os.path.join(CHECKOUT, "tests", "lab", "labctl.py")]
IMPLS = {"fake": "/root/ml-env/bin/python3", "real": "/var/lib/llmserve-lab/sglang-0.5.23/bin/python3"}
MODEL = "/var/lib/llmserve-lab/models/tiny-qwen2-chat"
SCENARIOS = ("serve_stop", "sched_killed_serving", "killed_at_start", "crash_first_forward", "crash_after_requests",
             "sigterm_in_flight", "hang_at_load", "hang_serving_stop",
             "rank1_crash_at_load")
# a two-node group: diff_probe.py runs on each node at once, rank 0 on gpu01 (where the dist-init address points)
GROUP_SCENARIOS = {"rank1_crash_at_load": (("gpu01", 0), ("ct129", 1))}
DIST_INIT_PORT = 20000

# What may differ, and why. Log tokens the fake logs and the real server on the lab does not (dropped from the
# fake's sequence before the comparison), and (scenario, aspect) pairs whose difference is explained.
ALLOWED_FAKE_ONLY_TOKENS = {
    "milestone:cuda_graph_begin": "the lab's real server runs on the CPU, where the lab's GPU plugin turns CUDA graphs "
                                  "off; SGLang 0.5.23 on a GPU logs 'Capture target decode CUDA graph begin.' before "
                                  "'Engine startup timings', as the fake does",
    "milestone:cuda_graph": "the same: 'Capture target decode CUDA graph end.'",
}
# Processes systemd may find left at the end on either side, and why.
ALLOWED_LEFT = {
    "python3 by SIGKILL": "multiprocessing's resource tracker: the real main process's kill of its tree races the "
                          "tracker's own exit when its pipe closes (the same scenario on the real server showed it "
                          "left for systemd once and gone before once)",
    "sglang::detoken by SIGKILL": "the detokenizer: a dying main process ends its tree with "
                                  "kill_process_tree(include_parent=True), SIGKILL to each child and then to itself; "
                                  "whether systemd still finds the dying child in the cgroup when the main process is "
                                  "gone is a race (seen on the real side after a scheduler's SIGKILL while serving "
                                  "and after a group's rank 0 failed its load barrier, not in other runs of both)",
}
# Threads systemd names among the tasks it kills (ZMQ's I/O and reaper threads, torch's c10d store and gloo loops;
# "n/a": a task already gone when systemd read its name): the real server's processes have them, the fake's none.
THREADS = re.compile(r"^(ZMQbg/|pt_|gloo_tcp_loop |n/a )")
ALLOWED = {
    ("hang_at_load", "left for systemd"):
        "a stop during the launch ends only the main process (no SIGTERM handler yet); its children die of "
        "PR_SET_PDEATHSIG (utils/common.py:3432) while systemd sends SIGKILL to what is left of the unit, so which "
        "processes and threads systemd still finds is a race on both sides (the real scheduler, holding torch and "
        "about 30 threads, exits slower than the fake's)",
    ("rank1_crash_at_load", "left for systemd"):
        "rank 0's main process ends its tree after the load barrier's ValueError with "
        "kill_process_tree(include_parent=True), SIGKILL to each child and then to itself; whether systemd still "
        "finds the dying scheduler in the cgroup when the main process is gone is a race (the real side left "
        "'sglang::schedul' for systemd in one run of a fresh clone's gate, nothing in the runs before)",
}
RESULTS = []


def tokens(lines):
    """The journal as the collection reads it: one token per line that says something, repeats collapsed."""
    out = []
    for line in lines:
        cls = sglang_log.classify_line(sglang_log.strip_prefix(line))
        if cls["kind"] in ("other", "traceback"):
            continue
        if cls["kind"] == "exception":
            tok = "exception:" + sglang_log.strip_prefix(line).strip().split(":")[0]
        else:
            tok = "%s:%s" % (cls["kind"], cls["name"] or cls["reason"])
            if cls.get("child"):
                tok += "/exit %s" % cls["child"].get("exit_code")
        if not out or out[-1] != tok:
            out.append(tok)
    return out


def ending(manager):
    """systemd's lines -> (how the main process ended, the unit's result, the processes it still had to kill)."""
    main, result, killed = "", "", []
    for line in manager:
        found = re.search(r"Main process exited, code=(\w+), status=(\S+)", line)
        if found:
            main = "%s %s" % found.groups()
        found = re.search(r"Failed with result '([\w-]+)'", line)
        if found:
            result = found.group(1)
        if "Deactivated successfully" in line:
            result = result or "success"
        found = re.search(r"Killing process \d+ \((.*)\) with signal (\w+)", line)
        if found:
            killed.append("%s by %s" % found.groups())
    return main or "(exited cleanly, not logged)", result, sorted(killed)


def codes(timeline):
    """phase -> endpoint -> codes. While starting: the codes in the order they first appear (a health 200 is left
    out: it comes with the ready line). Serving: the one answer to each endpoint at the ready line. After the fault
    or the stop: the last answer (what a client is left with; which endpoint still got a 200 in the second before
    SGLang's watchdog noticed is luck of the sampling). 'timeout' (no answer within the probe's limit, which
    depends on how busy the 2 cores are) is left out."""
    out = {}
    for _t, phase, seen, _shape, state in timeline:
        if phase == "serving" and not state:
            continue        # the health thread's answers while the probe acts on the ready server
        for endpoint, code in seen.items():
            if code == "timeout" or (phase == "starting" and code == "200" and endpoint.startswith("/health")):
                continue    # a health 200 comes with the ready line: whether a sample lands before it is luck
            lst = out.setdefault(phase, {}).setdefault(endpoint, [])
            if phase in ("after_fault", "stopped"):
                lst[:] = [code]
            elif code not in lst:
                lst.append(code)
    return out


def common_endpoints(fake, real, phases=("after_fault", "stopped")):
    """After the fault or the stop, an endpoint that only timed out on one side (left out by ``codes``) has no answer
    to compare: it is left out on the other side too. Which endpoints answered before the process ended, and which
    hung until then, depends on how busy the 2 cores were (a real server's health endpoints wait on the scheduler)."""
    for phase in phases:
        one, other = fake.get(phase), real.get(phase)
        if one is None or other is None:
            continue
        for endpoint in set(one) ^ set(other):
            one.pop(endpoint, None)
            other.pop(endpoint, None)


def free_hosts():
    """The scenarios start on hosts that serve nothing: under pytest-xdist this file's slot may have run another
    file's deploys before (whose server would hold a host's one GPU and make the fake's start fail for lack of
    memory)."""
    for host in ("gpu01", "ct129"):
        cp = subprocess.run(LABCTL + ["ssh", lab_host(host), "--",
                                      "systemctl stop sglang.service; systemctl reset-failed sglang.service; "
                                      "nvidia-smi --query-compute-apps=pid --format=csv,noheader"],
                            capture_output=True, text=True, timeout=300, check=False)
        assert cp.stdout.strip() == "", "%s still has GPU processes: %s %s" % (host, cp.stdout, cp.stderr)


def host_address(name):
    """The address of lab host ``name``'s copy in this slot (tests/lab/lab.yml)."""
    return slot_ips({name: load_config(None)["hosts"][name]["ip"]})[name]


def observe(impl, scenario):
    """-> {host: what diff_probe.py saw there}: gpu01 alone, or every node of a two-node group, played at once."""
    nodes = GROUP_SCENARIOS.get(scenario, (("gpu01", None),))
    running = {}
    for host, rank in nodes:
        cmd = "/usr/bin/python3 %s/diff_probe.py --python %s --model %s --scenario %s" % (
            HERE, IMPLS[impl], MODEL, scenario)
        if rank is not None:
            cmd += " --node-rank %d --dist-init-addr %s:%d" % (rank, host_address(nodes[0][0]), DIST_INIT_PORT)
        running[host] = subprocess.Popen(LABCTL + ["ssh", lab_host(host), "--", cmd],  # pylint: disable=consider-using-with
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = {}
    for host, proc in running.items():
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, out[-2000:] + err[-2000:]
        seen[host] = json.loads(out.strip().splitlines()[-1])
        if os.environ.get("LLMSERVE_DIFF_KEEP"):
            # what each side printed, kept for reading (LLMSERVE_DIFF_KEEP=DIR)
            with open(os.path.join(os.environ["LLMSERVE_DIFF_KEEP"], "%s-%s-%s.json" % (scenario, host, impl)), "w",
                      encoding="utf-8") as handle:
                json.dump(seen[host], handle, indent=1)
    return seen


def summary(obs):
    main, result, killed = ending(obs["props"]["manager"])
    out = {"log": tokens(obs["journal"]), "main process": main, "unit result": result, "left for systemd": killed,
           "tree while serving": obs["serving_shape"], "status codes": codes(obs["timeline"])}
    out["left for systemd"] = [p for p in killed if p not in ALLOWED_LEFT and not THREADS.match(p)]
    if obs.get("stop_after_answer") is not None:
        # a request in flight: SGLang's sigterm watchdog looks every 5 s whether requests remain
        # (managers/tokenizer_manager.py:3508-3543), so the stop ends within one tick after the last answer, however
        # long the decode took (the real server's CPU decode of 256 tokens takes 2 to 10 s on the loaded lab, the
        # fake's 1.7 s), plus the shutdown that follows the tick, as for an idle stop (the bound below)
        out["stop (SIGTERM)"] = ("within 8 s of the last answer" if obs["stop_after_answer"] <= 8
                                 else "%.1f s after the last answer" % obs["stop_after_answer"])
    elif obs["stop_s"] is not None and obs["scenario"] == "hang_serving_stop":
        # the sigterm watchdog's next 5-s tick, SGL_FORCE_SHUTDOWN, 15 s for the hung scheduler to obey the
        # ShutdownReq (managers/tokenizer_manager.py:456), then uvicorn waits for the check still running
        out["stop (SIGTERM)"] = ("15 to 30 s: the hung scheduler's wait" if 15 <= obs["stop_s"] <= 30
                                 else "%.0f s" % obs["stop_s"])
    elif obs["stop_s"] is not None:
        # SGLang notices SIGTERM at its sigterm watchdog's next 5-s tick, drains, shuts down: 2.7 s and 6 s seen on
        # the real server idle; the collection's bound is TimeoutStopSec=30
        out["stop (SIGTERM)"] = "within 8 s" if obs["stop_s"] <= 8 else "%.0f s" % obs["stop_s"]
    if obs.get("in_flight") is not None:
        out["request in flight at the stop"] = obs["in_flight"]
    if obs.get("metrics") is not None:
        # GET /metrics after a plain and a streamed /generate: each family's type and label names
        out["/metrics families"] = obs["metrics"]
    if obs["fault_at"] is not None:
        linger = obs["ended_at"] - obs["fault_at"]
        # SGLang: the watchdog's 1-s tick, SIGQUIT, 5 s of sleep before the crash diagnostics, then the kill
        out["linger after the scheduler's death"] = "5-9 s" if 5 <= linger <= 9 else "%.1f s" % linger
    return out


@pytest.fixture(scope="module")
def lab():
    if os.geteuid() != 0:
        pytest.skip("the lab needs root")
    with lab_session(["--real-sglang", "--gpu-count", "1"]):
        free_hosts()
        yield
    emit("fake vs real SGLang 0.5.23 (same host, same argv, same unit settings)", RESULTS)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_fake_reads_like_the_real(lab, scenario):  # pylint: disable=redefined-outer-name,unused-argument
    seen = dict((impl, observe(impl, scenario)) for impl in ("fake", "real"))
    if scenario == "serve_stop":
        assert_reads_every_milestone(seen["real"]["gpu01"]["journal"])
    differ = []
    for host in seen["real"]:
        label = scenario if len(seen["real"]) == 1 else "%s (%s)" % (scenario, host)
        differ += compare(scenario, label, seen["fake"][host], seen["real"][host])
    assert not differ, "%s: the fake differs from the real SGLang 0.5.23 in what the collection reads:\n%s" % (
        scenario, "\n".join(differ))


def assert_reads_every_milestone(journal):
    """The real 0.5.23 server's own start-up lines are the ones the collection reads as milestones, in order (not
    only the lines of older releases that sglang_log.MILESTONES also knows): every milestone but the CUDA-graph ones
    (the lab's real server runs on the CPU without CUDA graphs)."""
    seen = []
    for line in journal:
        name = sglang_log.milestone_of(sglang_log.strip_prefix(line))[0]
        if name and name not in seen:
            seen.append(name)
    want = [name for name, dummy in sglang_log.MILESTONES if name not in ("cuda_graph_begin", "cuda_graph")]
    assert seen == want, "milestones read from the real journal: %s, expected %s" % (seen, want)
    assert any(sglang_log.strip_prefix(line).startswith("Init parallel begin.") for line in journal), journal


def compare(scenario, label, seen_fake, seen_real):
    """One host's observations of the two servers -> the differences no reason allows; the rows for the summary."""
    fake, real = summary(seen_fake), summary(seen_real)
    fake["log"] = [tok for tok in fake["log"] if tok not in ALLOWED_FAKE_ONLY_TOKENS]
    common_endpoints(fake["status codes"], real["status codes"])
    differ = []
    for aspect in real:
        if fake.get(aspect) != real[aspect] and (scenario, aspect) not in ALLOWED:
            differ.append("%s:\n    fake: %s\n    real: %s" % (aspect, fake.get(aspect), real[aspect]))
    unexplained, explained = journal_differences(scenario, seen_fake["journal"], seen_real["journal"])
    if unexplained:
        differ.append("journal lines (journal_kinds.ALLOWED_LINES gives no reason):\n" + "\n".join(
            "    only %s: %s" % (side, kind[:300]) for side, kind in unexplained))
    RESULTS.append("%-22s   journal: %d kinds of line on both, %d only on one side with a reason in ALLOWED_LINES" % (
        "", len(set(filter(None, map(line_kind, seen_fake["journal"])))
                & set(filter(None, map(line_kind, seen_real["journal"])))), len(explained)))
    RESULTS.append("%-22s %s" % (label, "same on both" if not differ else "DIFFERENT: " + "; ".join(
        d.split(":", 1)[0] for d in differ)))
    RESULTS.append("%-22s   real: %s; %s; log %s" % ("", real["main process"], real["unit result"],
                                                     " > ".join(t.split(":", 1)[1] for t in real["log"])))
    return ["%s: %s" % (label, d) for d in differ] if label != scenario else differ
