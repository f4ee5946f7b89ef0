# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight role's public variables against what sglang_launch accepts, and how vars/main.yml resolves them from
the role defaults and the user's values (defaults/main.yml against meta/argument_specs.yml: test_role_defaults.py)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.llmserve.sglang.plugins.module_utils import _input_errors, systemd_unit

try:  # ansible-core >= 2.19 templates trusted strings only
    from ansible.template import trust_as_template
except ImportError:  # pragma: no cover - older ansible-core
    def trust_as_template(text):
        return text

ROLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'roles', 'preflight')
with open(os.path.join(ROLE, 'meta', 'argument_specs.yml')) as _handle:
    SPEC = yaml.safe_load(_handle)['argument_specs']['main']['options']
with open(os.path.join(ROLE, 'defaults', 'main.yml')) as _handle:
    DEFAULTS = yaml.safe_load(_handle)
with open(os.path.join(ROLE, 'vars', 'main.yml')) as _handle:
    VARS = yaml.safe_load(_handle)


def templar(given):
    """The role's variables as a play sees them: the role defaults, overridden by what the user gives."""
    return Templar(loader=DataLoader(), variables=dict(DEFAULTS, **given))


def test_restart_choices_are_what_sglang_launch_accepts():
    assert tuple(SPEC['sglang_restart']['choices']) == systemd_unit.RESTART_CHOICES
    assert SPEC['sglang_restart']['default'] == 'on-failure'
    assert SPEC['sglang_restart_sec'] == dict(SPEC['sglang_restart_sec'], type='int', default=10)
    # a bad value reaches sglang_launch's own check under the variable's name (the known-good validation's rescue)
    assert _input_errors.variable_of('restart') == 'sglang_restart'
    assert _input_errors.variable_of('restart_sec') == 'sglang_restart_sec'


@pytest.mark.parametrize('value, error', [
    (False, None),  # an unquoted YAML no
    ('no', None),
    ('always', None),
    ('sometimes', 'value of sglang_restart must be one of: no, on-failure'),
    (True, 'value of sglang_restart must be one of'),
])
def test_role_argument_validation_of_sglang_restart(value, error):
    result = ArgumentSpecValidator(SPEC).validate({'sglang_model_path': '/m', 'sglang_restart': value})
    errors = [str(e) for e in result.errors]
    if error is None:
        assert errors == []
    else:
        assert len(errors) == 1 and error in errors[0]


@pytest.mark.parametrize('given, restart, restart_sec', [
    ({}, 'on-failure', 10),
    ({'sglang_restart': False}, 'no', 10),
    ({'sglang_restart': 'no'}, 'no', 10),
    ({'sglang_restart': 'always', 'sglang_restart_sec': 3}, 'always', 3),
])
def test_resolved_restart_policy(given, restart, restart_sec):
    assert templar(given).template(trust_as_template(VARS['preflight_restart'])) == restart
    assert int(templar(given).template(trust_as_template(VARS['preflight_restart_sec']))) == restart_sec


def resolve(name, given):
    """``name`` of vars/main.yml as the role's tasks see it: role vars over the user's values over role defaults."""
    variables = dict(DEFAULTS, sglang_model_path='owner/model', **given)
    variables.update((k, trust_as_template(v) if isinstance(v, str) else v) for k, v in VARS.items())
    templar = Templar(loader=DataLoader(), variables=variables)
    if isinstance(VARS[name], dict):
        return dict((k, templar.template(trust_as_template(v))) for k, v in VARS[name].items())
    return templar.template(trust_as_template(VARS[name]))


@pytest.mark.parametrize('name, given, value', [
    ('preflight_port', {}, 30000),
    ('preflight_port', {'sglang_port': 8000}, 8000),
    ('preflight_env_in', {}, {'CUDA_HOME': '/usr/local/cuda-13.0', 'CUDA_DEVICE_ORDER': 'PCI_BUS_ID'}),
    ('preflight_env_in', {'sglang_env': {'A': '1'}}, {'A': '1'}),  # replaces the default, not merged with it
    ('preflight_known_good', {}, {'name': 'known-good', 'moe_runner_backend': 'flashinfer_cutlass',
                                  'fp4_gemm_backend': 'flashinfer_cudnn'}),
    ('preflight_served_model_name', {}, ''),
    ('preflight_served_model_name', {'sglang_served_model_name': None}, ''),
    ('preflight_served_model_name', {'sglang_model_download': True}, 'owner/model'),
    ('preflight_served_model_name', {'sglang_model_download': True, 'sglang_served_model_name': 'm'}, 'm'),
    ('preflight_benchmark', {}, {'enabled': False, 'concurrency': [1, 64], 'num_prompts': 64, 'input_len': 256,
                                 'output_len': 128}),
    ('preflight_benchmark', {'sglang_benchmark': {'enabled': True, 'num_prompts': 8}},
     {'enabled': True, 'concurrency': [1, 64], 'num_prompts': 8, 'input_len': 256, 'output_len': 128}),
    ('preflight_node_rank', {}, None),  # no default: a member of a serving group must give it
    ('preflight_node_rank', {'sglang_node_rank': 1}, 1),
    ('preflight_service_files', {}, {'unit': '/etc/systemd/system/sglang.service', 'env': '/etc/llmserve/sglang.env'}),
    ('preflight_service_files', {'sglang_service_name': 'sglang-b'},
     {'unit': '/etc/systemd/system/sglang-b.service', 'env': '/etc/llmserve/sglang-b.env'}),
    # the values every module's result masks: the key and each secret-named variable's value, longest first
    ('preflight_secret_values', {}, []),
    ('preflight_secret_values', {'sglang_api_key': 'sk-local-12', 'sglang_env': {'HF_TOKEN': 'hf_abcdefghij', 'A': 'xyzw'},
                                 'sglang_candidates': [{'name': 'c', 'env': {'MY_SECRET': 'candidate-secret'}}],
                                 'sglang_known_good': {'name': 'k', 'env': {'API_KEY': 'kg-key-1'}}},
     ['candidate-secret', 'hf_abcdefghij', 'sk-local-12', 'kg-key-1']),
])
def test_resolved_input(name, given, value):
    assert resolve(name, given) == value
