# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The report role's host report (filter host_report) against the same report written in Jinja alone
(module_utils/cases/report.yml), both rendered with ansible's Templar and the collection's filters."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os

import pytest
import yaml

from ansible.utils.vars import merge_hash

from ansible_collections.llmserve.sglang.plugins.module_utils import report
from ansible_collections.llmserve.sglang.tests.unit.plugins.filter.jinja_alone import ROOT, load_cases, make_templar, trust_as_template

CASES = load_cases('report.yml')
with open(os.path.join(ROOT, 'roles', 'report', 'tasks', 'main.yml'), encoding='utf-8') as _f:
    TASK = [t for t in yaml.safe_load(_f) if t.get('name') == "Put the host's report together"][0]


def facts_of(case):
    facts = copy.deepcopy(CASES['facts'])
    given = copy.deepcopy(case.get('facts') or {})
    if 'hostvars' in given:
        facts['hostvars'] = given.pop('hostvars')
    facts = merge_hash(facts, given)
    return facts


def render(expr, facts):
    return json.loads(json.dumps(make_templar(facts).template(trust_as_template(expr))))


def at(value, path):
    for part in path.split('.'):
        value = value[part] if isinstance(value, dict) else None
    return value


@pytest.mark.parametrize('case', CASES['cases'], ids=[c['name'] for c in CASES['cases']])
def test_the_role_reports_what_jinja_alone_did(case):
    facts = facts_of(case)
    reference = render(CASES['reference'], facts)
    role = render(TASK['ansible.builtin.set_fact']['report_host_report'], facts)
    # the same JSON text: the same keys, the same types (numbers stay numbers, none stays null)
    assert json.dumps(role, sort_keys=True) == json.dumps(reference, sort_keys=True)
    assert sorted(role) == sorted(report.KEYS)
    for path, want in case['expect'].items():
        assert at(role, path) == want, path
