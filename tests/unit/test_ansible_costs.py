# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How make bench adds up the task workers' records (tests/bench/ansible_costs.py), on the cases of
test_ansible_costs.yml."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
import ansible_costs  # noqa: E402  pylint: disable=wrong-import-position

CASES = yaml.safe_load(open(os.path.join(HERE, "test_ansible_costs.yml"), encoding="utf-8"))


def approx(value):
    return dict((k, v if isinstance(v, str) else pytest.approx(v)) for k, v in value.items())


@pytest.mark.parametrize("case", CASES["summary"], ids=[c["name"] for c in CASES["summary"]])
def test_summary(case, tmp_path):
    path = tmp_path / "workers.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in case["records"]), encoding="utf-8")
    roles, tasks = ansible_costs.summary(str(path))
    assert roles == dict((k, approx(v)) for k, v in case["roles"].items())
    assert tasks == [((role, task), approx(value)) for role, task, value in case["tasks"]]
