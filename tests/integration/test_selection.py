# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_selection: fastest serves the candidate with the best benchmark figure, wherever it is in the plan."""

from __future__ import absolute_import, division, print_function

from conftest import BASE_VARS, deploy

# the fast one first: a choice of "the last ready candidate" would pick the slow one
CANDIDATES = [
    {"name": "known-good", "moe_runner_backend": "flashinfer_cutlass", "fp4_gemm_backend": "flashinfer_cudnn"},
    {"name": "slower", "moe_runner_backend": "flashinfer_cutlass", "fp4_gemm_backend": "flashinfer_cutlass",
     "env": {"LAB_SCENARIO": "first-try"}},
]
BENCHMARK = {"concurrency": [1], "num_prompts": 4, "input_len": 16, "output_len": 32, "metric": "output_throughput"}


def figure(candidate):
    """Output tokens/s at the candidate's top concurrency level (None when it was not benchmarked)."""
    levels = (candidate.get("benchmark") or {}).get("concurrency") or {}
    return levels[max(levels, key=int)].get("output_throughput") if levels else None


def test_fastest_serves_the_best_figure_not_the_last(lab, results):  # pylint: disable=unused-argument,redefined-outer-name
    env = dict(BASE_VARS["sglang_env"], IT_SCENARIO_RUN="fastest-first")
    # no screen: both candidates serve, and the choice is made on the full trials' figures
    rc, out, reports = deploy({"sglang_env": env, "sglang_candidates": CANDIDATES, "sglang_selection": "fastest",
                               "sglang_benchmark": BENCHMARK, "sglang_screen": False}, limit="gpu01")
    assert rc == 0, out[-3000:]
    rep = reports["gpu01"]
    figures = {c["name"]: figure(c) for c in rep["candidates"] if c["outcome"] == "ready"}
    best = max(figures, key=lambda name: figures[name] or 0) if figures else None
    chosen = rep.get("selected")
    ok = (rep["final_state"] == "serving" and len(figures) == 2 and None not in figures.values()
          and chosen == best == "known-good")
    results.add("selection", "fastest: the best figure first in the plan",
                "%s; figures %s; selected %s" % (rep["final_state"], figures, chosen), ok)
    assert ok, (figures, chosen, rep["final_state"])
