# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The configuration a serving group reuses (filter group_reuse, module_utils/cases/serving_group.yml ``reuse``),
against the same decision written in Jinja alone: each member's reuse, then the group's agreement."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest


from ansible_collections.llmserve.sglang.plugins.filter import serving_group
from ansible_collections.llmserve.sglang.tests.unit.plugins.filter.jinja_alone import load_cases, make_templar, trust_as_template

CASES = load_cases('serving_group.yml')['reuse']

GROUPS = {
    'single': {'nnodes': 1, 'head': 'gpu01', 'members': [{'host': 'gpu01', 'rank': 0}]},
    'pair': {'nnodes': 2, 'head': 'gpu01', 'members': [{'host': 'gpu01', 'rank': 0}, {'host': 'gpu02', 'rank': 1}]},
}

# a member's reuse, as one task decided it in Jinja: the recorded configuration when its check ran and found nothing
# but a daemon-reload
MEMBER = ("{{ (preflight_plan_result.reuse.recorded if preflight_reuse_check is not skipped"
          " and preflight_reuse_check.actions | difference(['daemon-reload']) | length == 0 else '')"
          " if preflight_reuse_check is defined and preflight_plan_result.reuse.recorded else '' }}")
# the group's agreement, as a second task decided it: the one value every member chose, else ''
GROUP = "{{ (choices | unique | list | first) if choices | unique | list | length == 1 else '' }}"


def jinja_alone(hostvars, group):
    choices = []
    for member in group['members']:
        facts = hostvars.get(member['host']) or {}
        choices.append(make_templar(facts).template(trust_as_template(MEMBER)))
    return make_templar({'choices': choices}).template(trust_as_template(GROUP))


@pytest.mark.parametrize('case', CASES, ids=[c['name'] for c in CASES])
def test_group_reuse(case):
    group = GROUPS[case['group']]
    got = serving_group.group_reuse(case['hostvars'], group)
    assert got == case['want']
    assert got == jinja_alone(case['hostvars'], group)
