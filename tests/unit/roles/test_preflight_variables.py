# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight role's public variables: meta/argument_specs.yml (the contract) against vars/main.yml (where each
sglang_* is resolved with its default) and against what sglang_launch accepts."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml
from jinja2 import Environment, nodes

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.llmserve.sglang.plugins.module_utils import systemd_unit

try:  # ansible-core >= 2.19 templates trusted strings only
    from ansible.template import trust_as_template
except ImportError:  # pragma: no cover - older ansible-core
    def trust_as_template(text):
        return text

ROLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'roles', 'preflight')
with open(os.path.join(ROLE, 'meta', 'argument_specs.yml')) as _handle:
    SPEC = yaml.safe_load(_handle)['argument_specs']['main']['options']
with open(os.path.join(ROLE, 'vars', 'main.yml')) as _handle:
    VARS = yaml.safe_load(_handle)


def defaults_in_vars():
    """sglang_* -> the defaults vars/main.yml gives it: ``X | default(D)``, and ``BASE | combine(X | default({}))``
    (BASE is then the default)."""
    found = {}
    env = Environment()
    for value in VARS.values():
        if not isinstance(value, str):
            continue
        filters = list(env.parse(value).find_all(nodes.Filter))
        combined = [f for f in filters if f.name == 'combine' and f.args and isinstance(f.args[0], nodes.Filter)]
        for node in combined:
            found.setdefault(node.args[0].node.name, []).append(node.node.as_const())
        for node in filters:
            if (node.name == 'default' and isinstance(node.node, nodes.Name) and node.node.name.startswith('sglang_')
                    and not [c for c in combined if c.args[0] is node]):
                found.setdefault(node.node.name, []).append(node.args[0].as_const() if node.args else None)
    return found


DEFAULTS = defaults_in_vars()


@pytest.mark.parametrize('name', sorted(SPEC))
def test_vars_default_is_the_spec_default(name):
    opt = SPEC[name]
    if opt.get('required'):
        assert name not in DEFAULTS, '%s is required: vars/main.yml gives it no default' % name
        return
    assert name in DEFAULTS, '%s is declared but vars/main.yml does not resolve it' % name
    for got in DEFAULTS[name]:
        assert got == opt.get('default'), '%s: vars/main.yml default %r, argument_specs default %r' % (
            name, got, opt.get('default'))


def test_every_resolved_variable_is_declared():
    assert set(DEFAULTS) - set(SPEC) == set()


def test_restart_choices_are_what_sglang_launch_accepts():
    assert tuple(SPEC['sglang_restart']['choices']) == systemd_unit.RESTART_CHOICES
    assert SPEC['sglang_restart']['default'] == 'on-failure'
    assert SPEC['sglang_restart_sec'] == dict(SPEC['sglang_restart_sec'], type='int', default=10)
    # a bad value reaches sglang_launch's own check under the variable's name (the known-good validation's rescue)
    assert VARS['preflight_option_vars']['restart'] == 'sglang_restart'
    assert VARS['preflight_option_vars']['restart_sec'] == 'sglang_restart_sec'


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
    templar = Templar(loader=DataLoader(), variables=given)
    assert templar.template(trust_as_template(VARS['preflight_restart'])) == restart
    assert int(templar.template(trust_as_template(VARS['preflight_restart_sec']))) == restart_sec
