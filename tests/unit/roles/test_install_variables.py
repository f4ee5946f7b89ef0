# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The install role's public variables: vars/main.yml (where each sglang_* is resolved, with its default from
defaults/main.yml) against meta/argument_specs.yml (the contract), against the sglang_install module's options, and
against preflight where both declare a variable. test_role_defaults.py checks defaults/main.yml itself."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os

import pytest
import yaml
from jinja2 import Environment, nodes

ROLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'roles')
MODULE_FILE = os.path.join(ROLES, '..', 'plugins', 'modules', 'sglang_install.py')


def _load(*parts):
    with open(os.path.join(ROLES, *parts)) as handle:
        return yaml.safe_load(handle)


SPEC = _load('install', 'meta', 'argument_specs.yml')['argument_specs']['main']['options']
VARS = _load('install', 'vars', 'main.yml')
DEFAULTS = _load('install', 'defaults', 'main.yml')['_install_defaults']
TASKS = _load('install', 'tasks', 'main.yml')


def _documentation(path):
    """A module's DOCUMENTATION, read from its source (the module is not imported)."""
    with open(path) as handle:
        tree = ast.parse(handle.read())
    return next(node.value.value for node in tree.body
                if isinstance(node, ast.Assign) and getattr(node.targets[0], 'id', None) == 'DOCUMENTATION')


MODULE_OPTIONS = yaml.safe_load(_documentation(MODULE_FILE))['options']


def resolved():
    """internal var -> (sglang_* name, default or the string 'REQUIRED'): ``{{ sglang_X }}`` or
    ``{{ sglang_X | default(_install_defaults.sglang_X) }}``."""
    found = {}
    env = Environment()
    for key, value in VARS.items():
        assert key.startswith('_install_'), key
        tree = env.parse(value)
        names = [n.name for n in tree.find_all(nodes.Name)]
        defaults = [f for f in tree.find_all(nodes.Filter) if f.name == 'default']
        assert names[0].startswith('sglang_') and names[1:] == (['_install_defaults'] if defaults else []), value
        if defaults:
            assert defaults[0].args[0].attr == names[0], value  # the variable's own default
        found[key] = (names[0], DEFAULTS[names[0]] if defaults else 'REQUIRED')
    return found


RESOLVED = resolved()


@pytest.mark.parametrize('name', sorted(SPEC))
def test_every_declared_variable_is_resolved_with_its_default(name):
    got = [d for n, d in RESOLVED.values() if n == name]
    assert len(got) == 1, '%s is declared but vars/main.yml does not resolve it once' % name
    want = 'REQUIRED' if SPEC[name].get('required') else SPEC[name].get('default')
    assert got[0] == want, (name, got[0], want)


def test_every_resolved_variable_is_declared():
    assert set(n for n, _d in RESOLVED.values()) == set(SPEC)


def test_the_task_passes_every_option_the_module_has_with_the_same_default():
    task = TASKS[0]['llmserve.sglang.sglang_install']
    assert set(task) == set(MODULE_OPTIONS)
    for option, value in task.items():
        internal = value.strip('{} ').split('|')[0].strip()
        name, default = RESOLVED[internal]
        if not MODULE_OPTIONS[option].get('required'):
            assert default == MODULE_OPTIONS[option].get('default'), (option, name)


def test_shared_variables_agree_with_preflight():
    preflight = _load('preflight', 'meta', 'argument_specs.yml')['argument_specs']['main']['options']
    for name in set(SPEC) & set(preflight):
        assert SPEC[name]['type'] == preflight[name]['type'] and SPEC[name].get('default') == preflight[name].get(
            'default'), name
