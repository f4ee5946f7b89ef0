# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The comparison of the collection's load test with bench_serving (tests/realserver/benchcompare.py), on the cases
of test_benchcompare.yml."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import os

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = importlib.util.spec_from_file_location("benchcompare", os.path.join(HERE, "..", "realserver", "benchcompare.py"))
BENCH = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(BENCH)
with open(os.path.join(HERE, "test_benchcompare.yml"), encoding="utf-8") as handle:
    CASES = yaml.safe_load(handle)


@pytest.mark.parametrize("case", CASES["medians"], ids=[c["name"] for c in CASES["medians"]])
def test_medians(case):
    got = BENCH.medians(case["runs"])
    assert set(got) == set(case["want"])
    for key, want in case["want"].items():
        assert got[key] == (None if want is None else pytest.approx(want))


@pytest.mark.parametrize("case", CASES["compare"], ids=[c["name"] for c in CASES["compare"]])
def test_compare(case):
    got = BENCH.compare(case["ours"], case["theirs"])
    for key, want in case["want"].items():
        rel = got[key][2]
        assert rel == (None if want is None else pytest.approx(want, abs=1e-4))
    assert "median_ttft_ms" in BENCH.row(case["ours"], case["theirs"])
