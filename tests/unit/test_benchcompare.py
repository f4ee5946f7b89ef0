# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The comparison of the collection's load test with bench_serving (tests/realserver/benchcompare.py), on the cases
of test_benchcompare.yml."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "realserver"))
import benchcompare  # noqa: E402  pylint: disable=wrong-import-position

CASES = yaml.safe_load(open(os.path.join(HERE, "test_benchcompare.yml"), encoding="utf-8"))


@pytest.mark.parametrize("case", CASES["medians"], ids=[c["name"] for c in CASES["medians"]])
def test_medians(case):
    got = benchcompare.medians(case["runs"])
    assert set(got) == set(case["want"])
    for key, want in case["want"].items():
        assert got[key] == (None if want is None else pytest.approx(want))


@pytest.mark.parametrize("case", CASES["spread"], ids=[c["name"] for c in CASES["spread"]])
def test_spread(case):
    got = benchcompare.spread(case["runs"])
    assert set(got) == set(case["want"])
    for key, want in case["want"].items():
        assert got[key] == (None if want is None else pytest.approx(want, abs=1e-3))


@pytest.mark.parametrize("case", CASES["compare"], ids=[c["name"] for c in CASES["compare"]])
def test_compare(case):
    got = benchcompare.compare(case["ours"], case["theirs"])
    for key, want in case["want"].items():
        rel = got[key][2]
        assert rel == (None if want is None else pytest.approx(want, abs=1e-4))
    assert "median_ttft_ms" in benchcompare.row(case["ours"], case["theirs"])


@pytest.mark.parametrize("case", CASES["paired"], ids=[c["name"] for c in CASES["paired"]])
def test_paired(case):
    got = benchcompare.paired(case["ours"], case["theirs"])
    assert set(got) == set(case["want"])
    for key, want in case["want"].items():
        if want is None:
            assert got[key] is None
        else:
            assert list(got[key][:3]) == pytest.approx(want[:3], abs=1e-4)
            assert got[key][3] == want[3]
