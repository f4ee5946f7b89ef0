# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import status

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, 'cases', 'status.yml')) as _f:
    CASES = yaml.safe_load(_f)
SECRETS = ['hf_secret_abcdef', 'sk-secret-123456']


@pytest.mark.parametrize('case', CASES['summarize'], ids=[c['name'] for c in CASES['summarize']])
def test_summarize(case):
    got = status.summarize(case['show'], CASES.get(case['unit']) if case['unit'] else None,
                           CASES.get(case['env']) if case['env'] else None, case['record'], case['apps'],
                           case['cgroup_pids'], case['reply'], ['hf_secret_abcdef'])
    want = dict(case['want'])
    assert got['health']['status'] == want.pop('health', got['health']['status'])
    services = want.pop('services', None)
    if services is not None:
        assert [a['service'] for a in got['gpu_processes']] == services
    for key, value in want.items():
        assert got[key] == value, key
    # never a secret, neither the known one nor the key of the record's server_args line
    assert not [s for s in SECRETS if s in repr(got)]


def test_unit_argv_keeps_the_placeholder_and_masks_a_literal_key():
    argv = status.unit_argv(CASES['unit_serving'])
    assert argv[:3] == ['/root/ml-env/bin/python3', '-m', 'sglang.launch_server']
    assert argv[argv.index('--api-key') + 1] == '${SGLANG_API_KEY}'
    literal = CASES['unit_serving'].replace('${SGLANG_API_KEY}', 'sk-literal-999')
    assert 'sk-literal-999' not in status.unit_argv(literal)
