# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real-server gate's other deploys (see test_real_server.py, and test_real_download.py): the collection against
the real SGLang 0.5.23.

- a two-node group (gpu01 rank 0, ct129 rank 1) becomes ready and serves; its rank-1 crash is blamed on rank 1
- a load that logs nothing for longer than ``sglang_hang_timeout`` but works is not a hang
- SGLang 0.5.23's own argument checks on gpu01's SM120 (run by the plugin on the arguments as given, before it maps
  them to the CPU): ``megamoe`` MoE, ``cutedsl_mla`` attention and NGRAM with ``trtllm_mha`` are refused -> crashed,
  SGLang's own message as evidence, named by its failure signature; then the known-good serves

Run as root: ``make realserver`` (part of ``make test``).
"""

from __future__ import absolute_import, division, print_function

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".tmp", "collections"))
# pylint: disable-next=wrong-import-position
from realserver import RESULTS, by_name, deploy_falls_back, evidence_text, journal_line, playbook, show, ssh  # noqa: E402
# pylint: disable-next=wrong-import-position
from ansible_collections.llmserve.sglang.plugins.module_utils._systemd import parse_show  # noqa: E402
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_log  # noqa: E402


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


# SGLang 0.5.23's own argument checks, run on the arguments as given with the arch of gpu01's GPUs (SM120), as a
# server there runs them at start-up (ServerArgs.resolve_once; the lab's GPU plugin maps to the CPU only after
# them): three combinations 0.5.23 refuses on SM120, each with the message its source builds, then the known-good.
# candidate -> (the wheel's file:line that raises, SGLang's exception line, the failure signature that names it)
REFUSED = {
    "megamoe-sm120": (
        "sglang/srt/arg_groups/mega_moe_hook.py:43 (--moe-runner-backend megamoe is an alias of --moe-a2a-backend "
        "megamoe, mega_moe_hook.py:271)",
        "ValueError: --moe-a2a-backend megamoe needs a CUDA SM90 GPU (block-FP8 experts) or an SM100-class GPU "
        "(MXFP4 / NVFP4 experts); it runs DeepGEMM kernels over CUDA symmetric memory. On ROCm, set "
        "SGLANG_AMD_USE_FLYDSL_MEGA_MOE=1 to select aiter MegaMoEv2 instead.",
        "sglang_megamoe_needs_sm90_or_sm100"),
    "cutedsl-mla-sm120": (
        "sglang/srt/arg_groups/overrides.py:1245",
        "ValueError: CuteDSL MLA backend is only supported on Blackwell GPUs (SM100). Please use a different backend.",
        "sglang_cutedsl_mla_sm100_only"),
    # NGRAM's draft tree: speculative_eagle_topk = --speculative-ngram-max-bfs-breadth (10); trtllm_mha forces
    # page_size 64 (overrides.py:1184)
    "ngram-trtllm-mha": (
        "sglang/srt/arg_groups/speculative_hook.py:1361",
        "ValueError: speculative_eagle_topk(10) > 1 with page_size(64) > 1 is unstable and produces incorrect results "
        "for paged attention backends. This combination is only supported for the 'flashinfer' backend.",
        "sglang_ngram_topk_paged_backend"),
}
ARGCHECK = {
    "sglang_screen": False,
    "sglang_candidates": [
        # forced: the plan's own arch rules would skip trtllm_mha on SM120 before SGLang sees it
        {"name": "megamoe-sm120", "moe_runner_backend": "megamoe", "fp4_gemm_backend": "flashinfer_cudnn",
         "force": True},
        {"name": "cutedsl-mla-sm120", "attention_backend": "cutedsl_mla", "force": True},
        {"name": "ngram-trtllm-mha", "attention_backend": "trtllm_mha",
         "extra_args": ["--speculative-algorithm", "NGRAM"], "force": True},
    ],
}


def test_sglang_argument_checks_refuse_then_known_good_serves(lab):  # pylint: disable=unused-argument,redefined-outer-name
    rep, cands = deploy_falls_back(ARGCHECK)
    for name, (source, message, signature) in REFUSED.items():
        cand = cands[name]
        assert (cand["outcome"], cand["reason"]) == ("failed", "crashed"), cand
        assert message in evidence_text(cand), (source, cand)
        assert (cand.get("diagnosis") or {}).get("id") == signature, cand.get("diagnosis")
        real = journal_line("gpu01", message)
        show("refused: %s" % name, "gpu01", cand, real)
        assert real.strip() == message, "SGLang's own line (%s) is not in the real server's journal" % source
    good = cands["known-good"]
    assert (good["outcome"], good["reason"]) == ("ready", None), good
    show("after the refused: known-good", "gpu01", good,
         journal_line("gpu01", "The server is fired up and ready to roll!"))
    answer = ssh("gpu01", "curl -s -m 30 -H 'Content-Type: application/json' -d '{\"text\": \"The capital city of "
                          "France is\", \"sampling_params\": {\"max_new_tokens\": 12, \"temperature\": 0}}' "
                          "http://127.0.0.1:30000/generate")
    assert "Paris" in json.loads(answer)["text"], answer
