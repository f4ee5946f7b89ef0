# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os
import socket

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import serving_group as sg

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, 'cases', 'serving_group.yml')) as _f:
    CASES = yaml.safe_load(_f)


def summaries(case):
    out = {}
    for host, fields in case['members'].items():
        summary = copy.deepcopy(CASES['defaults'])
        summary.update(fields)
        summary['host'] = host
        out[host] = summary
    return out


def run(case):
    members = summaries(case)
    groups = dict((h, s['group']) for h, s in members.items() if s.get('group'))
    groups.update(case.get('inventory') or {})
    return sg.check_group(case['me'], members, groups, list(members))


@pytest.mark.parametrize('case', CASES['check'], ids=[c['name'] for c in CASES['check']])
def test_check_group(case):
    errors, group = run(case)
    assert errors == []
    for key, value in case['want'].items():
        assert group[key] == value, key
    assert [m['rank'] for m in group['members']] == list(range(group['nnodes']))


@pytest.mark.parametrize('case', CASES['errors'], ids=[c['name'] for c in CASES['errors']])
def test_check_group_errors(case):
    errors, group = run(case)
    if not case['want']:
        # cases that look wrong but are valid (tp that splits evenly) must pass
        assert errors == [] and group['tp_size'] % group['nnodes'] == 0
        return
    assert group is None
    text = ' | '.join(errors)
    for part in case['want']:
        assert part in text, text


@pytest.mark.parametrize('case', CASES['addr'], ids=[c['addr'] or 'empty' for c in CASES['addr']])
def test_parse_addr(case):
    if 'error' in case:
        with pytest.raises(ValueError) as exc:
            sg.parse_addr(case['addr'])
        assert case['error'] in str(exc.value)
    else:
        assert list(sg.parse_addr(case['addr'])) == case['want']
        assert sg.format_addr(*sg.parse_addr(case['addr'])) == case['addr']


GROUP = {'head': 'gpu01', 'members': [{'host': 'gpu01', 'rank': 0}, {'host': 'gpu02', 'rank': 1}]}


@pytest.mark.parametrize('case', CASES['await'], ids=[c['name'] for c in CASES['await']])
def test_combine_await(case):
    got = sg.combine_await(GROUP, case['results'])
    for key, value in case['want'].items():
        assert got[key] == value, (key, got)
    assert [r['rank'] for r in got['ranks']] == [0, 1]


def test_probe_tells_refused_from_listening():
    listener = socket.socket()
    listener.bind(('127.0.0.1', 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        assert sg.probe('127.0.0.1', port, 1.0) == 'listening'
    finally:
        listener.close()
    assert sg.probe('127.0.0.1', port, 1.0) == 'refused'


def test_local_address():
    assert sg.is_local_address('127.0.0.1')
    assert not sg.is_local_address('192.0.2.77')   # TEST-NET-1, never on a host


def test_resolve_names_the_host():
    with pytest.raises(ValueError) as exc:
        sg.resolve('no-such-host.invalid')
    assert 'no-such-host.invalid does not resolve' in str(exc.value)


@pytest.mark.parametrize('case', CASES['failing'], ids=[c['name'] for c in CASES['failing']])
def test_members_failing(case):
    assert sg.members_failing(GROUP, case['values'], case['check']) == case['want']


def test_members_failing_names_the_checks():
    with pytest.raises(ValueError) as exc:
        sg.members_failing(GROUP, {}, 'broken')
    assert 'failed, not_ready, not_serving' in str(exc.value)


@pytest.mark.parametrize('case', CASES['stop_order'], ids=[c['name'] for c in CASES['stop_order']])
def test_stop_order(case):
    if 'error' in case:
        with pytest.raises(ValueError, match=case['error']):
            sg.stop_order(case['group'], case['rank'])
    else:
        assert sg.stop_order(case['group'], case['rank']) == case['order']


REUSE_GROUPS = {
    'single': {'members': [{'host': 'gpu01', 'rank': 0}]},
    'pair': {'members': [{'host': 'gpu01', 'rank': 0}, {'host': 'gpu02', 'rank': 1}]},
}


@pytest.mark.parametrize('case', CASES['reuse'], ids=[c['name'] for c in CASES['reuse']])
def test_reuse_of_and_agreed_reuse(case):
    group = REUSE_GROUPS[case['group']]
    choices = {}
    for member in group['members']:
        facts = case['hostvars'].get(member['host']) or {}
        recorded = ((facts.get('preflight_plan_result') or {}).get('reuse') or {}).get('recorded')
        choices[member['host']] = sg.reuse_of(recorded, facts.get('preflight_reuse_check'))
    assert sg.agreed_reuse(group, choices) == case['want']
