# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The line-by-line comparison of the real-server differential (tests/realserver/journal_kinds.py), on the cases of
test_journal_kinds.yml."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import os

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = importlib.util.spec_from_file_location("journal_kinds", os.path.join(HERE, "..", "realserver", "journal_kinds.py"))
KINDS = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(KINDS)
with open(os.path.join(HERE, "test_journal_kinds.yml"), encoding="utf-8") as handle:
    CASES = yaml.safe_load(handle)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_journal_differences(case):
    unexplained, explained = KINDS.journal_differences(case["scenario"], case["fake"], case["real"])
    assert [list(u[:2]) for u in unexplained] == case["unexplained"]
    assert len(explained) == case["explained"], explained
    assert all(len(e) == 3 and e[2] for e in explained)


def test_every_allowed_row_gives_a_side_a_pattern_and_a_reason():
    for side, pattern, only, reason in KINDS.ALLOWED_LINES:
        assert side in ("fake", "real", "either") and pattern and reason.strip()
        assert only is None or all(isinstance(s, str) for s in only)
