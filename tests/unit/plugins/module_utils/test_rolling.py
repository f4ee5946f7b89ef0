# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import rolling

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, 'cases', 'rolling.yml')) as _f:
    CASES = yaml.safe_load(_f)
ROUTER_DEFAULTS = os.path.join(HERE, '..', '..', '..', '..', 'roles', 'router', 'defaults', 'main.yml')
ABC = {'batches': [['a'], ['b'], ['c']], 'batch': 1, 'routers': {}}


def _ids(group):
    return [c['name'] for c in CASES[group]]


@pytest.mark.parametrize('case', CASES['parse_batch'], ids=_ids('parse_batch'))
def test_parse_batch(case):
    count, error = rolling.parse_batch(case['value'], case['units'])
    if 'error' in case:
        assert count is None and case['error'] in error, error
        assert 'sglang_rolling_batch' in error
    else:
        assert (count, error) == (case['want'], None)


@pytest.mark.parametrize('case', CASES['plan'], ids=_ids('plan'))
def test_plan(case):
    facts = case['facts']
    out = rolling.plan(case['hosts'], lambda h: dict(facts.get(h) or {}), case['groups'], case['settings'])
    if 'errors' in case:
        assert len(out['errors']) == len(case['errors']), out['errors']
        for part, error in zip(case['errors'], out['errors']):
            assert part in error
        return
    for key, value in case['want'].items():
        assert out[key] == value, key
    assert out['order'] == [h for b in out['batches'] for h in b]
    assert sorted(out['order']) == sorted(case['hosts'])


def test_batch_routers_take_out_and_put_back():
    facts = {'gpu01': {'ansible_host': '10.0.0.1'}, 'gpu02': {'ansible_host': '10.0.0.2'}, 'rt01': {}}
    groups = {'sglang_servers': ['gpu01', 'gpu02'], 'sglang_routers': ['rt01']}
    the_plan = rolling.plan(['gpu01', 'gpu02'], lambda h: facts[h], groups,
                            {'batch': 1, 'drain_timeout': 60, 'request_timeout': 60})
    (item,) = rolling.batch_routers(the_plan, ['gpu02'])
    assert item['urls'] == ['http://10.0.0.2:30000'] and item['ids'] == ['gpu02']
    assert [w['id'] for w in json.loads(item['without'])['workers']] == ['gpu01']
    assert [w['id'] for w in json.loads(item['with'])['workers']] == ['gpu01', 'gpu02']
    assert rolling.batch_routers(the_plan, ['elsewhere']) == []
    assert rolling.url_of(the_plan, 'gpu02') == 'http://10.0.0.2:30000' and rolling.url_of(the_plan, 'x') == ''
    assert rolling.batch_of(the_plan, 'gpu02') == 2 and rolling.batch_of(the_plan, 'x') == 0


@pytest.mark.parametrize('case', CASES['router_view'], ids=_ids('router_view'))
def test_router_view(case):
    assert rolling.router_view(case['answer'], case['urls']) == case['want']


def test_back_in_every_router_that_took_it():
    ready = {'workers': [{'url': 'u', 'is_healthy': True, 'status': 'ready'}]}
    draining = {'workers': [{'url': 'u', 'is_healthy': True, 'status': 'draining'}]}
    assert rolling.back_in([{'item': {'back_urls': ['u']}, 'json': ready}], 'u') is True
    assert rolling.back_in([{'item': {'back_urls': ['u']}, 'json': ready},
                            {'item': {'back_urls': ['u']}, 'json': draining}], 'u') is False
    assert rolling.back_in([{'item': {'back_urls': []}, 'json': ready}], 'u') is False  # it stayed out
    assert rolling.back_in([], 'u') is False


@pytest.mark.parametrize('case', CASES['stop'], ids=_ids('stop'))
def test_stopped_by(case):
    assert rolling.stopped_by(ABC, case['states'], case['host'], case.get('details')) == case['want']


@pytest.mark.parametrize('case', CASES['summary'], ids=_ids('summary'))
def test_summary(case):
    out = rolling.summary(ABC, case['states'], case.get('details'))
    assert out['stopped_at'] == case['want']['stopped_at']
    assert out['left_as_they_were'] == case['want']['left_as_they_were']
    assert [b['outcome'] for b in out['batches']] == case['want']['outcomes']
    for batch in out['batches']:
        for host in batch['hosts']:
            assert host['final_state'] == case['states'].get(host['host'], 'not_reached')


def test_router_defaults_agree_with_the_router_role():
    with open(ROUTER_DEFAULTS) as handle:
        defaults = yaml.safe_load(handle)
    for name, value in rolling.ROUTER_DEFAULTS.items():
        assert defaults[name] == value, name
