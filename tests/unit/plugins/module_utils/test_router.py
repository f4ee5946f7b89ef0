# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import router, systemd_unit

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, 'cases', 'router.yml')) as _f:
    CASES = yaml.safe_load(_f)


@pytest.mark.parametrize('case', CASES['backends'], ids=[c['name'] for c in CASES['backends']])
def test_backends(case):
    out = router.backends('rt01', case['names'], lambda h: CASES['hosts'][h], CASES['servers'])
    if 'errors' in case:
        text = ' | '.join(out['errors'])
        for part in case['errors']:
            assert part in text, text
        return
    assert out['errors'] == []
    assert [{'id': w['id'], 'url': w['url']} for w in out['workers']] == case['workers']


def test_manifest_leaves_out_the_hosts_taken_out():
    workers = [{'id': 'a', 'url': 'http://10.0.0.1:30000'}, {'id': 'b', 'url': 'http://10.0.0.2:30000'}]
    assert json.loads(router.manifest(workers)) == {'version': 1, 'workers': workers}
    assert json.loads(router.manifest(workers, leave=['a'])) == {'version': 1, 'workers': workers[1:]}


def test_unit_keeps_the_keys_in_the_environment_file():
    params = dict(CASES['params'], control_plane_key='s3cret', worker_api_key='k3y')
    unit = router.unit_text('/opt/llmserve/smg/bin/smg', params)
    env = systemd_unit.parse_env_file(router.env_text(params))
    assert env == {'SMG_CONTROL_PLANE_KEYS': 'llmserve:llmserve:admin:s3cret', 'SGLANG_API_KEY': 'k3y'}
    # the argv the router gets: systemd substitutes the keys from the environment file
    argv = systemd_unit.parse_exec_start(systemd_unit.read_unit_value(unit, 'ExecStart'), env=env)
    assert argv[:2] == ['/opt/llmserve/smg/bin/smg', 'launch']
    flags = dict(zip(argv[2::2], argv[3::2]))
    assert flags['--discovery-provider'] == 'file' and flags['--discovery-file'] == '/etc/llmserve/smg/workers.json'
    assert flags['--health-check-interval-secs'] == '5' and flags['--health-failure-threshold'] == '3'
    assert flags['--control-plane-api-keys'] == 'llmserve:llmserve:admin:s3cret' and flags['--api-key'] == 'k3y'
    assert 's3cret' not in unit and 'k3y' not in unit
    assert 'Restart=on-failure' in unit and 'TimeoutStopSec=190' in unit


def test_no_keys_no_key_flags():
    unit = router.unit_text('/opt/llmserve/smg/bin/smg', CASES['params'])
    assert '--control-plane-api-keys' not in unit and '--api-key' not in unit
    assert systemd_unit.parse_env_file(router.env_text(CASES['params'])) == {}


@pytest.mark.parametrize('listen, address, want', [
    ('0.0.0.0', '10.77.0.10', '10.77.0.10:29000'),
    ('192.0.2.7', '10.77.0.10', '192.0.2.7:29000'),
    ('::', 'fd00::10', '[fd00::10]:29000'),
])
def test_file_sd(listen, address, want):
    params = dict(CASES['params'], prometheus_host=listen, prometheus_port=29000)
    assert json.loads(router.file_sd('rt01', address, params)) == [{'targets': [want], 'labels': {'smg_router': 'rt01'}}]


def test_out_of_service_within():
    assert router.out_of_service_within(CASES['params']) == 20


@pytest.mark.parametrize('case', CASES['resolve'], ids=[c['name'] for c in CASES['resolve']])
def test_resolve(case):
    assert router.resolve(case['names'], CASES['groups']) == case['want']


LISTING_MEMBERS = [{'id': 'a', 'url': 'http://10.0.0.1:30000'}, {'id': 'b', 'url': 'http://10.0.0.2:30000'}]


@pytest.mark.parametrize('case', CASES['listing'], ids=[c['name'] for c in CASES['listing']])
def test_listing(case):
    assert router.listing(case['body'], LISTING_MEMBERS, case.get('allow_extra', False)) == case['want']
