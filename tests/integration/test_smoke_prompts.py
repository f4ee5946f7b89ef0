# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_smoke_prompts replaces the known-answer prompts: a run passes or fails on the user's own answers."""

from __future__ import absolute_import, division, print_function

from conftest import BASE_VARS, deploy, serving_pids

PROMPT = {"name": "own-product", "prompt": "Question: What is 6 * 7? Answer:", "expect_any": ["42"], "max_tokens": 8}


def test_own_smoke_prompts_decide(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    env = dict(BASE_VARS["sglang_env"], IT_SCENARIO_RUN="own-prompts")
    rc, out, reports = deploy({"sglang_env": env, "sglang_smoke_prompts": [PROMPT]}, limit="gpu01")
    assert rc == 0, out[-3000:]
    rep = reports["gpu01"]
    kg = [c for c in rep["candidates"] if c["name"] == "known-good"][0]
    checks = [c["name"] for c in kg["smoke"]["checks"]]
    ok = rep["final_state"] == "serving" and checks == ["own-product"] and kg["smoke"]["ok"]
    results.add("smoke prompts", "own prompt, right answer", "%s; checks %s" % (rep["final_state"], checks), ok)
    assert ok, kg
    main_before, _procs = serving_pids("gpu01")
    # an answer nobody gives: every candidate fails the smoke test, the unit from before comes back
    wrong = dict(PROMPT, expect_any=["43"])
    rc, out, reports = deploy({"sglang_env": dict(env, IT_SCENARIO_RUN="own-prompts-wrong"),
                               "sglang_smoke_prompts": [wrong]}, limit="gpu01")
    rep = reports["gpu01"]
    kg = [c for c in rep["candidates"] if c["name"] == "known-good"][0]
    main_after, _procs = serving_pids("gpu01")
    ok = (rc != 0 and rep["final_state"] == "rolled_back" and kg["outcome"] == "failed"
          and "43" not in str(kg["smoke"]["checks"][0]["text"]) and main_after > 0)
    results.add("smoke prompts", "own prompt, an answer nobody gives",
                "rc=%s %s; known-good %s/%s; previous unit serving again (pid %s -> %s)" % (
                    rc, rep["final_state"], kg["outcome"], kg["reason"], main_before, main_after), ok)
    assert ok, (rc, rep["final_state"], kg)
