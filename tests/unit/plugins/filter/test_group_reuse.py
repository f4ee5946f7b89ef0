# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The configuration a serving group reuses (filter group_reuse, module_utils/cases/serving_group.yml ``reuse``),
against the same decision written in Jinja alone: each member's reuse, then the group's agreement."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.llmserve.sglang.plugins.filter import serving_group

try:  # ansible-core >= 2.19 templates trusted strings only
    from ansible.template import trust_as_template
except ImportError:  # pragma: no cover - older ansible-core
    def trust_as_template(text):
        return text

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'module_utils')
with open(os.path.join(HERE, 'cases', 'serving_group.yml'), encoding='utf-8') as _f:
    CASES = yaml.safe_load(_f)['reuse']

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
        choices.append(Templar(loader=DataLoader(), variables=facts).template(trust_as_template(MEMBER)))
    return Templar(loader=DataLoader(), variables={'choices': choices}).template(trust_as_template(GROUP))


@pytest.mark.parametrize('case', CASES, ids=[c['name'] for c in CASES])
def test_group_reuse(case):
    group = GROUPS[case['group']]
    got = serving_group.group_reuse(case['hostvars'], group)
    assert got == case['want']
    assert got == jinja_alone(case['hostvars'], group)
