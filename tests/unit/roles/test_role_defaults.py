# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role's defaults (defaults/main.yml, the values the role uses) against its meta/argument_specs.yml (the
documented ones), and the defaults that playbooks and roles give a contract variable where they read it.

A role's own variables (named ``<role>_*``) are role defaults: top-level keys of defaults/main.yml. The public
contract's variables (``sglang_*``) that a role takes as inputs cannot be role defaults (ansible-lint's var-naming
wants the role's name as their prefix): their defaults are the keys of the dict ``_<role>_defaults`` in
defaults/main.yml, and the role reads each as ``sglang_X | default(_<role>_defaults.sglang_X)``.

Either way, each option of the argument spec that documents a default has that same default (same value and type)
in defaults/main.yml, each default there is a documented option, and the role gives none of them a second default.
A default that is a template (taken from another variable at run time, such as gpu_cleanup_service_name from
sglang_service_name) has no ``default`` in the argument spec, whose type it could not pass (antsibull-docs checks
it): the option's description names the documented variables it is taken from.

Role defaults are seen only in the play that runs the role, so a play without it (status, undeploy, benchmark) or a
role that also runs alone (gpu_cleanup) gives a contract variable its default where it reads it: each of those must
agree with the argument spec."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import warnings

import pytest
import yaml
from jinja2 import Environment, TemplateSyntaxError, nodes

from ansible_collections.llmserve.sglang.plugins.module_utils import redact

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..')
ROLES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, 'roles', '*')) if os.path.isdir(p))
ENV = Environment()
# argument spec type -> the Python types its default may have (a bool is of type bool only)
TYPES = {'str': (str,), 'path': (str,), 'int': (int,), 'float': (int, float), 'bool': (bool,), 'list': (list,),
         'dict': (dict,)}
# the argument of secret_values (plugins/filter/redact.py) that each contract variable is passed as
SECRET_ARGS = {'sglang_api_key': 'api_key', 'sglang_env': 'env', 'sglang_candidates': 'candidates',
               'sglang_known_good': 'known_good'}


def _load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def role_files(role):
    """-> (defaults/main.yml as a dict or None when there is none, the main entry point's options)."""
    defaults = os.path.join(ROOT, 'roles', role, 'defaults', 'main.yml')
    spec = _load(os.path.join(ROOT, 'roles', role, 'meta', 'argument_specs.yml'))
    return (_load(defaults) or {}) if os.path.exists(defaults) else None, spec['argument_specs']['main']['options']


def spec_defaults():
    """Contract variable -> role -> its documented default, from every role that declares it."""
    found = {}
    for role in ROLES:
        for name, option in role_files(role)[1].items():
            if 'default' in option:
                found.setdefault(name, {})[role] = option['default']
    return found


SPEC_DEFAULTS = spec_defaults()
DOCUMENTED = sorted(set(n for role in ROLES for n in role_files(role)[1]))


def role_defaults(role, defaults):
    """Variable -> default, as the role gives them: its own variables and the contract's (``_<role>_defaults``)."""
    defaults = defaults or {}
    found = dict((k, v) for k, v in defaults.items() if not k.startswith('_'))
    found.update(defaults.get('_%s_defaults' % role) or {})
    return found


def of_type(value, type_name):
    if type_name == 'raw':
        return True
    return type_name == 'bool' if isinstance(value, bool) else isinstance(value, TYPES[type_name])


def canonical(value):
    """Equal only for the same value of the same type (true is not 1, 30 is not 30.0 nor '30')."""
    return json.dumps(value, sort_keys=True)


def templated_errors(name, option, value, documented):
    """A templated default: no ``default`` in the spec, and the description names each documented variable in it."""
    if 'default' in option:
        return ['%s: its default is a template, the argument spec documents it in the description only' % name]
    sources = sorted(set(n.name for n in ENV.parse(value).find_all(nodes.Name)) & set(documented))
    text = ' '.join(option.get('description') if isinstance(option.get('description'), list)
                    else [option.get('description') or ''])
    return ['%s: the description does not name %s, which its default is taken from' % (name, source)
            for source in sources if 'C(%s)' % source not in text]


def default_errors(name, option, defaults, documented=()):
    """Why defaults/main.yml (``defaults``: variable -> default) and the argument spec (``option``, None for a
    variable it does not declare) disagree on one variable; [] when they agree. ``documented``: the variables
    that some argument spec declares."""
    if option is None:
        return ['%s is in defaults/main.yml but not declared in meta/argument_specs.yml' % name]
    in_defaults, in_spec = name in defaults, 'default' in option
    if option.get('required'):
        return ['%s is required: it takes no default' % name] if in_defaults or in_spec else []
    if in_defaults and isinstance(defaults[name], str) and '{{' in defaults[name]:
        return templated_errors(name, option, defaults[name], documented)
    if in_defaults != in_spec:
        where = 'defaults/main.yml' if in_defaults else 'meta/argument_specs.yml'
        return ['%s has a default in %s only' % (name, where)]
    if not in_defaults:
        return []
    value, type_name, errors = defaults[name], option.get('type', 'str'), []
    if canonical(value) != canonical(option['default']):
        errors.append('%s: defaults/main.yml has %r, meta/argument_specs.yml %r' % (name, value, option['default']))
    if not of_type(value, type_name):
        errors.append('%s: default %r is not of type %s' % (name, value, type_name))
    elif option.get('elements') and [i for i in value if not of_type(i, option['elements'])]:
        errors.append('%s: default %r has items that are not %s' % (name, value, option['elements']))
    if 'choices' in option and value not in option['choices']:
        errors.append('%s: default %r is not one of %s' % (name, value, option['choices']))
    return errors


def role_cases():
    cases = []
    for role in ROLES:
        defaults, options = role_files(role)
        cases.extend((role, name) for name in sorted(set(role_defaults(role, defaults)) | set(options)))
    return cases


@pytest.mark.parametrize('role', ROLES)
def test_every_role_has_defaults_and_an_argument_spec(role):
    defaults, options = role_files(role)
    assert defaults is not None, 'roles/%s has no defaults/main.yml' % role
    assert options, 'roles/%s/meta/argument_specs.yml declares no option' % role
    internal = [k for k in defaults if k.startswith('_')]
    assert not set(internal) & set(options), 'an internal (_) variable is documented'
    assert set(internal) <= set(['_%s_defaults' % role]), internal


@pytest.mark.parametrize('role, name', role_cases())
def test_role_default_is_the_documented_one(role, name):
    defaults, options = role_files(role)
    errors = default_errors(name, options.get(name), role_defaults(role, defaults), DOCUMENTED)
    assert errors == [], 'roles/%s' % role


@pytest.mark.parametrize('defaults, option, error', [
    ({}, {'type': 'int'}, None),
    ({'x': 1}, {'type': 'int', 'default': 1}, None),
    ({'x': 30}, {'type': 'float', 'default': 30}, None),
    ({'x': '{{ y | default(0) }}'}, {'type': 'int', 'description': 'From C(y).'}, None),
    ({'x': '{{ y | default(0) }}'}, {'type': 'int', 'description': ['From', 'C(y).']}, None),
    ({'x': '{{ z | default(0) }}'}, {'type': 'int'}, None),  # z: no documented variable
    ({'x': '{{ y | default(0) }}'}, {'type': 'int', 'description': 'Else 0.'}, 'does not name y'),
    ({'x': '{{ y }}'}, {'type': 'str', 'default': '{{ y }}'}, 'its default is a template'),
    ({'x': [1, 2]}, {'type': 'list', 'elements': 'int', 'default': [1, 2]}, None),
    ({'x': 1}, {'type': 'int'}, 'has a default in defaults/main.yml only'),
    ({}, {'type': 'int', 'default': 1}, 'has a default in meta/argument_specs.yml only'),
    ({'x': 2}, {'type': 'int', 'default': 1}, 'defaults/main.yml has 2, meta/argument_specs.yml 1'),
    ({'x': True}, {'type': 'raw', 'default': 1}, 'defaults/main.yml has True, meta/argument_specs.yml 1'),
    ({'x': '1'}, {'type': 'int', 'default': '1'}, "default '1' is not of type int"),
    ({'x': True}, {'type': 'int', 'default': True}, 'default True is not of type int'),
    ({'x': ['a']}, {'type': 'list', 'elements': 'int', 'default': ['a']}, 'has items that are not int'),
    ({'x': 'z'}, {'type': 'str', 'choices': ['a'], 'default': 'z'}, 'is not one of'),
    ({'x': 'a'}, {'type': 'str', 'required': True}, 'x is required: it takes no default'),
    ({'x': 'a'}, None, 'not declared in meta/argument_specs.yml'),
])
def test_default_errors_finds_each_disagreement(defaults, option, error):
    errors = default_errors('x', option, defaults, ['x', 'y'])
    if error is None:
        assert errors == []
    else:
        assert len(errors) == 1 and error in errors[0], errors


@pytest.mark.parametrize('name', sorted(n for n, by_role in SPEC_DEFAULTS.items() if len(by_role) > 1))
def test_a_variable_of_several_roles_has_one_default(name):
    assert len(set(canonical(v) for v in SPEC_DEFAULTS[name].values())) == 1, SPEC_DEFAULTS[name]


def jinja_trees(data):
    """The Jinja syntax trees of every string in ``data`` (YAML loaded): a template, or a bare expression (``when``,
    ``that``); a string that is neither (a task name) is left out."""
    if isinstance(data, dict):
        return [t for value in data.values() for t in jinja_trees(value)]
    if isinstance(data, list):
        return [t for value in data for t in jinja_trees(value)]
    if not isinstance(data, str):
        return []
    with warnings.catch_warnings():  # Jinja's own notes on a backslash in a string (a regular expression)
        warnings.simplefilter('ignore', DeprecationWarning)
        try:
            return [ENV.parse(data if '{{' in data or '{%' in data else '{{ %s }}' % data)]
        except TemplateSyntaxError:
            return []


def file_trees(path):
    with open(path) as handle:
        return jinja_trees(yaml.safe_load(handle)) if path.endswith('.yml') else [ENV.parse(handle.read())]


def role_paths(role, dirs=('defaults', 'vars', 'tasks', 'handlers', 'templates')):
    return sorted(p for d in dirs for p in glob.glob(os.path.join(ROOT, 'roles', role, d, '*')))


def defaults_in(tree):
    """(variable[.key], the default filter's first argument node, inside a secret_values call) of every
    ``VAR | default(...)`` in a Jinja syntax tree."""
    found, inside = [], set()
    for call in tree.find_all(nodes.Filter):
        if call.name.endswith('secret_values'):
            inside.update(id(n) for a in [call.node] + list(call.args) for n in [a] + list(a.find_all(nodes.Filter)))
    for node in tree.find_all(nodes.Filter):
        target, keys = node.node, []
        while isinstance(target, nodes.Getattr):
            keys.insert(0, target.attr)
            target = target.node
        if node.name == 'default' and isinstance(target, nodes.Name) and node.args:
            found.append(('.'.join([target.name] + keys), node.args[0], id(node) in inside))
    return found


def restated_defaults(tree):
    """(variable[.key], default, inside a secret_values call) of every ``VAR | default(CONSTANT)``; ``omit`` and
    defaults that are not constants (another variable) are left out."""
    found = []
    for name, arg, secret in defaults_in(tree):
        try:
            found.append((name, arg.as_const(), secret))
        except nodes.Impossible:
            pass
    return found


@pytest.mark.parametrize('role', ROLES)
def test_a_role_gives_its_variables_no_second_default(role):
    """Its own variables have none (defaults/main.yml gives them theirs); a contract variable it holds the default
    of has exactly ``default(_<role>_defaults.NAME)``."""
    defaults = role_files(role)[0] or {}
    held, holder = set(defaults.get('_%s_defaults' % role) or {}), '_%s_defaults' % role
    wrong = []
    for path in role_paths(role, ('vars', 'tasks', 'handlers', 'templates')):
        for tree in file_trees(path):
            for name, arg, _secret in defaults_in(tree):
                base = name.split('.')[0]
                points = (isinstance(arg, nodes.Getattr) and isinstance(arg.node, nodes.Name)
                          and arg.node.name == holder and arg.attr == name)
                if base in defaults and not base.startswith('_') or base in held and not points:
                    wrong.append('%s: %s' % (os.path.relpath(path, ROOT), name))
    assert wrong == [], 'defaults/main.yml gives them their default'


def restated_cases():
    paths = sorted(glob.glob(os.path.join(ROOT, 'playbooks', '*.yml'))) + [p for r in ROLES for p in role_paths(r)]
    cases = []
    for path in paths:
        for tree in file_trees(path):
            for name, value, secret in restated_defaults(tree):
                if name.split('.')[0] in SPEC_DEFAULTS:
                    cases.append(pytest.param(name, value, secret, id='%s:%s' % (os.path.relpath(path, ROOT), name)))
    return cases


def documented(name):
    value = list(SPEC_DEFAULTS[name.split('.')[0]].values())[0]
    for key in name.split('.')[1:]:
        value = value[key]
    return value


@pytest.mark.parametrize('name, value, secret', restated_cases())
def test_a_default_given_where_a_variable_is_read_is_the_documented_one(name, value, secret):
    if secret:  # only the secrets in it count: it must hide what the documented default would
        arg = SECRET_ARGS.get(name)
        assert arg, '%s: a default inside secret_values for a variable secret_values does not take' % name
        assert (redact.deploy_secret_values(**{arg: value})
                == redact.deploy_secret_values(**{arg: documented(name)})), (name, value)
    else:
        assert canonical(value) == canonical(documented(name)), (name, value, documented(name))


@pytest.mark.parametrize('text, found', [
    ("a: '{{ sglang_port | default(30000) }}'", [('sglang_port', 30000, False)]),
    ("a: '{{ sglang_benchmark.num_prompts | default(64) }}'", [('sglang_benchmark.num_prompts', 64, False)]),
    ("a: '{{ sglang_api_key | default(omit, true) }}'", []),
    ("a: '{{ sglang_port | default(_preflight_defaults.sglang_port) }}'", []),
    ("a: \"{{ x | default('') | llmserve.sglang.secret_values(sglang_env | default({})) }}\"",
     [('x', '', True), ('sglang_env', {}, True)]),
    ("when: [a | default(1) | bool, 'b | default([]) | length > 0']", [('a', 1, False), ('b', [], False)]),
    ("msg: '{% for c in x | default([2]) %}{{ c }}{% endfor %}'", [('x', [2], False)]),
    ("name: Stop the unit (bounded)", []),
])
def test_restated_defaults_are_found(text, found):
    assert sorted(f for t in jinja_trees(yaml.safe_load(text)) for f in restated_defaults(t)) == sorted(found)
