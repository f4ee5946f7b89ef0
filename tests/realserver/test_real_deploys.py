# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real-server gate's other deploys (see test_real_server.py, and test_real_inputs.py for the inputs' checks): the
collection against the real SGLang 0.5.23.

- a load that logs nothing for longer than ``sglang_hang_timeout`` but works is not a hang
- a two-node group (gpu01 rank 0, ct129 rank 1) becomes ready and serves; its rank-1 crash is blamed on rank 1

Run as root: ``make realserver`` (part of ``make test``).
"""

from __future__ import absolute_import, division, print_function

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".tmp", "collections"))
# pylint: disable-next=wrong-import-position
from realserver import RESULTS, by_name, journal_line, playbook, show, ssh  # noqa: E402
# pylint: disable-next=wrong-import-position
from ansible_collections.llmserve.sglang.plugins.module_utils._systemd import parse_show  # noqa: E402
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_log  # noqa: E402


def test_silent_working_load_is_not_a_hang(lab):  # pylint: disable=unused-argument,redefined-outer-name
    extra = {"sglang_screen": False, "sglang_hang_timeout": 20,
             "sglang_candidates": [{"name": "silent-load", "moe_runner_backend": "flashinfer_cutlass",
                                    "fp4_gemm_backend": "flashinfer_cudnn", "env": {"LAB_SCENARIO": "silent-load"},
                                    "force": True}]}
    # from a host that serves nothing (whatever the tests before left), so that the candidate is tried
    rc, out, _reports = playbook("cleanup", {}, limit="gpu01")
    assert rc == 0, out[-3000:]
    rc, out, reports = playbook("deploy", extra, limit="gpu01")
    assert rc == 0, out[-4000:]
    cand = by_name(reports["gpu01"])["silent-load"]
    assert (cand["outcome"], cand["reason"]) == ("ready", None), cand
    assert reports["gpu01"]["selected"] == "silent-load"
    show("silent 40 s load, hang 20 s", "gpu01", cand, journal_line("gpu01", "Load weight end"))


def test_two_node_group_serves_and_blames_rank1(lab):  # pylint: disable=unused-argument,redefined-outer-name
    # sglang_hang_timeout: a rank idles at init until its peer comes (no log line, no CPU); with another test file's
    # real servers on the same cores, the peer can take longer than the lab's 30 s to get there
    extra = {"sglang_screen": False, "sglang_group": "real-pair", "sglang_ready_timeout": 600, "sglang_hang_timeout": 120,
             "sglang_candidates": [{"name": "crash-rank1", "moe_runner_backend": "flashinfer_cutlass",
                                    "fp4_gemm_backend": "flashinfer_cutlass", "env": {"LAB_SCENARIO": "crash_rank1"},
                                    "force": True}]}
    # the ranks: host vars of the group (0 serves HTTP)
    hostvars = {"gpu01": 0, "ct129": 1}
    extra["sglang_node_rank"] = "{{ %s[inventory_hostname] }}" % json.dumps(hostvars)
    rc, out, reports = playbook("deploy", extra)
    assert rc == 0, out[-5000:]
    head = reports["gpu01"]
    cand = by_name(head)["crash-rank1"]
    assert (cand["outcome"], cand["reason"]) == ("failed", "crashed"), cand
    assert cand.get("rank") == 1 and cand.get("rank_host") == "ct129", cand
    show("group: crash on rank 1", "ct129", cand, journal_line("ct129", "an illegal memory access"))
    good = by_name(head)["known-good"]
    assert (good["outcome"], head["final_state"]) == ("ready", "serving"), head
    show("group: known-good", "gpu01", good, journal_line("gpu01", "The server is fired up and ready to roll!"))
    member = ssh("ct129", "journalctl -u sglang.service --no-pager -o cat | grep -m1 'Dummy health check server'")
    assert "Dummy health check server started in background thread" in member, member
    # the real member's line is what the collection reads as a member's readiness
    assert sglang_log.milestone_of(member.strip().splitlines()[0])[0] == "ready", member
    answer = ssh("gpu01", "curl -s -m 60 -H 'Content-Type: application/json' -d '{\"text\": \"The capital city of "
                          "France is\", \"sampling_params\": {\"max_new_tokens\": 12, \"temperature\": 0}}' "
                          "http://127.0.0.1:30000/generate")
    assert "Paris" in json.loads(answer)["text"], answer
    group_cleanup_ends_every_rank(hostvars)


def group_cleanup_ends_every_rank(ranks):
    """cleanup.yml on a serving group stops rank 0 first: its shutdown broadcast ends rank 1 too (a rank >= 1 waits on
    SIGTERM for that broadcast, so stopping it first would wait out the stop timeout and end in a kill).
    ExecMainCode 1 is CLD_EXITED, 2 CLD_KILLED (then the status is the signal)."""
    extra = {"sglang_group": "real-pair",
             "sglang_node_rank": "{{ %s[inventory_hostname] }}" % json.dumps(ranks)}
    started = time.time()
    rc, out, _reports = playbook("cleanup", extra)
    took = time.time() - started
    assert rc == 0, out[-3000:]
    assert "Stop a serving group's rank 0 first" in out, out[-3000:]
    states = {}
    for host in ranks:
        shown = ssh(host, "systemctl show sglang.service -p ActiveState -p Result -p ExecMainCode -p ExecMainStatus")
        props = parse_show(shown)
        states[host] = props
        # the unit that served ended within its stop: exit 0 or SIGTERM (a clean stop for systemd), never the
        # stop timeout's SIGKILL (Result=timeout) nor a failure
        assert props.get("ActiveState") == "inactive", (host, props)
        assert props.get("Result") == "success", (host, props, out[-3000:])
        assert (props.get("ExecMainCode"), props.get("ExecMainStatus")) in (("1", "0"), ("2", "15")), (host, props)
    waited = ssh("ct129", "journalctl -u sglang.service --no-pager -o cat | grep -c 'waiting for the rank-0 "
                          "ShutdownReq broadcast' || true").strip()
    last = ssh("ct129", "journalctl -u sglang.service --no-pager -o cat -n 4").strip().splitlines()
    RESULTS.append("%-28s %-6s rank 0 stopped first in %.0f s of playbook; gpu01 Result=%s code/status %s/%s, ct129 "
                   "Result=%s code/status %s/%s; rank 1 logged 'waiting for the rank-0 ShutdownReq broadcast' %s "
                   "time(s); its last lines: %s" % (
                       "group clean-up", "both", took, states["gpu01"].get("Result"),
                       states["gpu01"].get("ExecMainCode"), states["gpu01"].get("ExecMainStatus"),
                       states["ct129"].get("Result"), states["ct129"].get("ExecMainCode"),
                       states["ct129"].get("ExecMainStatus"), waited, " | ".join(line[:120] for line in last)))
    print(RESULTS[-1])
