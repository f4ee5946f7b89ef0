# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import redact

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, 'cases', 'redact.yml')) as _f:
    CASES = yaml.safe_load(_f)


@pytest.mark.parametrize('case', CASES['redact_text'], ids=[c['name'] for c in CASES['redact_text']])
def test_redact_text(case):
    assert redact.redact_text(case['text'], case.get('values', [])) == case['want']


@pytest.mark.parametrize('case', CASES['secret_values'], ids=[c['name'] for c in CASES['secret_values']])
def test_secret_values(case):
    got = redact.deploy_secret_values(case['api_key'], case.get('env'), case.get('candidates'), case.get('known_good'))
    assert got == case['want']


def test_redact_walks_nested_results_and_argv():
    key = 'sk-nested-2468'
    result = {'holders': [{'pid': 7, 'cmdline': 'python3 -m sglang.launch_server --api-key %s' % key}],
              'evidence': ['ok', "server_args={'api_key': '%s'}" % key], 'seconds': 1.5, 'ok': True}
    got = redact.redact(result, [key])
    assert key not in repr(got)
    assert got['seconds'] == 1.5 and got['ok'] is True and got['holders'][0]['pid'] == 7
    assert redact.redact_argv(['--api-key', key, '--port', '1'], []) == ['--api-key', redact.MASK, '--port', '1']


class _Module(object):
    def __init__(self, values):
        self.params = {'redact_values': values}
        self.out = []

    def exit_json(self, **kwargs):
        self.out.append(('exit', kwargs))

    def fail_json(self, msg, **kwargs):
        self.out.append(('fail', dict(kwargs, msg=msg)))

    def warn(self, msg):
        self.out.append(('warn', msg))


def test_guard_redacts_every_way_out():
    module = _Module(['hf_secret_token', 'x'])
    redact.guard(module)
    module.warn('token hf_secret_token in the env')
    module.fail_json('failed: --api-key abc12345', holders=['hf_secret_token'])
    module.exit_json(lines=['HF_TOKEN=hf_secret_token'])
    assert 'hf_secret_token' not in repr(module.out) and 'abc12345' not in repr(module.out)
    assert [kind for kind, _v in module.out] == ['warn', 'fail', 'exit']
