# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_subset

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, 'cases', 'gpu_subset.yml')) as _f:
    CASES = yaml.safe_load(_f)


@pytest.mark.parametrize('case', CASES['resolve'], ids=[c['name'] for c in CASES['resolve']])
def test_resolve(case):
    out = gpu_subset.resolve(case['value'], CASES['host'])
    if 'errors' in case:
        assert out['errors'], out
        text = ' | '.join(out['errors'])
        for part in case['errors']:
            assert part in text, text
        return
    assert out['errors'] == []
    for key, value in case['want'].items():
        assert out[key] == value, key
    assert out['count'] == len(out['indices']) == len(out['uuids'])


@pytest.mark.parametrize('case', CASES['env'], ids=[c['name'] for c in CASES['env']])
def test_env_errors(case):
    subset = gpu_subset.resolve(case['gpus'], CASES['host'])
    errors = gpu_subset.env_errors(case['env'], subset)
    if not case['errors']:
        assert errors == []
        return
    text = ' | '.join(errors)
    for part in case['errors']:
        assert part in text, text


def test_server_env():
    subset = gpu_subset.resolve([2, 3], CASES['host'])
    env = {'CUDA_HOME': '/usr/local/cuda'}
    out = gpu_subset.server_env(env, subset)
    assert out == {'CUDA_HOME': '/usr/local/cuda', 'CUDA_VISIBLE_DEVICES': '2,3', 'CUDA_DEVICE_ORDER': 'PCI_BUS_ID'}
    assert env == {'CUDA_HOME': '/usr/local/cuda'}
    assert gpu_subset.server_env(env, gpu_subset.resolve([], CASES['host'])) == env


@pytest.mark.parametrize('case', CASES['split'], ids=[c['name'] for c in CASES['split']])
def test_split_holders(case):
    kill, spared, blocked = gpu_subset.split_holders(case['holders'], case['gpus'], case.get('own_unit'))
    assert [h['pid'] for h in kill] == case['kill']
    assert [h['pid'] for h in spared] == case['spared']
    assert [h['pid'] for h in blocked] == case['blocked']
    whys = dict((h['pid'], h['why']) for h in spared + blocked)
    for pid, part in (case.get('why') or {}).items():
        assert part in whys[pid], whys[pid]
    if blocked:
        msg = gpu_subset.blocked_message(blocked, case['gpus'])
        for rec in blocked:
            assert 'pid %s' % rec['pid'] in msg
