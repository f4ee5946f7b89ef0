# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight role's input-error messages (module_utils/_input_errors.py), from cases/_input_errors.yml."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import _input_errors, _launch

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, 'cases', '_input_errors.yml'), encoding='utf-8') as _f:
    CASES = yaml.safe_load(_f)


def ids(cases):
    return [c['name'] for c in cases]


@pytest.mark.parametrize('case', CASES['invalid_input'], ids=ids(CASES['invalid_input']))
def test_invalid_input(case):
    assert _input_errors.invalid_input(*case['args']) == case['want']


@pytest.mark.parametrize('case', CASES['launch_errors'], ids=ids(CASES['launch_errors']))
def test_launch_errors(case):
    assert _input_errors.launch_errors(case['result']) == case['want']


@pytest.mark.parametrize('case', CASES['named_errors'], ids=ids(CASES['named_errors']))
def test_named_errors(case):
    assert _input_errors.named_errors(case['errors'], 'gpu01') == case['want']


@pytest.mark.parametrize('case', CASES['sglang_python_error'], ids=ids(CASES['sglang_python_error']))
def test_sglang_python_error(case):
    assert _input_errors.sglang_python_error(case['sglang'], case['python']) == case['want']


@pytest.mark.parametrize('case', CASES['input_stop'], ids=ids(CASES['input_stop']))
def test_input_stop(case):
    if 'raises' in case:
        with pytest.raises(ValueError, match=case['raises'].replace('(', r'\(').replace(')', r'\)')):
            _input_errors.input_stop(*case['args'], **case['checks'])
        return
    assert _input_errors.input_stop(*case['args'], **case['checks']) == case['want']


@pytest.mark.parametrize('case', CASES['tp_size_error'], ids=ids(CASES['tp_size_error']))
def test_tp_size_error(case):
    assert _input_errors.tp_size_error(*case['args']) == case['want']


@pytest.mark.parametrize('case', CASES['port_in_use'], ids=ids(CASES['port_in_use']))
def test_port_in_use(case):
    out = _input_errors.port_in_use(*case['args'])
    assert [listener['pid'] for listener in out['foreign']] == case['foreign']
    assert out['msg'] == case['msg']


@pytest.mark.parametrize('case', CASES['proxmox_target_error'], ids=ids(CASES['proxmox_target_error']))
def test_proxmox_target_error(case):
    assert _input_errors.proxmox_target_error(*case['args']) == case['want']


@pytest.mark.parametrize('case', CASES['proxmox_node_unreachable'], ids=ids(CASES['proxmox_node_unreachable']))
def test_proxmox_node_unreachable(case):
    assert _input_errors.proxmox_node_unreachable(*case['args']) == case['want']


@pytest.mark.parametrize('case', CASES['container_unusable'], ids=ids(CASES['container_unusable']))
def test_container_unusable(case):
    assert _input_errors.container_unusable(*case['args']) == case['want']


def test_every_option_named_is_an_option_of_sglang_launch():
    options = set(_launch.argument_spec())
    assert sorted(set(_input_errors.OPTION_VARS) - options) == []
    # the variables are the public contract's (sglang_*), each named once for its option
    assert all(v.startswith('sglang_') for v in _input_errors.OPTION_VARS.values())
    assert _input_errors.variable_of('restart_sec') == 'sglang_restart_sec'
    assert _input_errors.variable_of('check_flags') == 'check_flags'


def test_jinja_int_reading():
    # Jinja's int filter, which the role's GPU-count check used: a decimal text is cut, anything else is 0
    assert [_input_errors._as_int(v) for v in (7, '7', '7.9', 7.9, 'x', None, '', True, 'inf')] == \
        [7, 7, 7, 7, 0, 0, 0, 1, 0]
