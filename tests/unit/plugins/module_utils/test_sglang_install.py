# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_install as si

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, 'cases', 'sglang_install.yml')) as _f:
    CASES = yaml.safe_load(_f)


def _ids(key):
    return [c.get('name') or str(i) for i, c in enumerate(CASES[key])]


@pytest.mark.parametrize('case', CASES['validate'], ids=_ids('validate'))
def test_validate(case):
    params = dict({'extras': [], 'index_url': '', 'installer': 'auto', 'min_free_gb': 30, 'min_driver': ''},
                  **case['params'])
    got = si.validate(params)
    assert len(got) == len(case['errors']), got
    for error, text in zip(got, case['errors']):
        assert text in error, (error, text)
    assert 'secret' not in ' '.join(got)


@pytest.mark.parametrize('case', CASES['requirement'], ids=_ids('requirement'))
def test_requirement(case):
    assert si.requirement(case['version'], case['extras']) == case['want']


@pytest.mark.parametrize('case', CASES['argv'], ids=_ids('argv'))
def test_argv_and_env(case):
    argv = si.installer_argv(case['installer'], case['python'], case['spec'], case.get('index_url', ''),
                             case.get('extra_args'), dry_run=case.get('dry_run', False), report=case.get('report'),
                             isolated=case.get('isolated', False), uv='/usr/bin/uv')
    assert argv == case['want']
    env = si.installer_env(case['installer'], case.get('index_url', ''), case.get('isolated', False))
    assert env == case['env']
    # a credential never reaches the argv (the host's process list)
    assert not any('tok3n' in a for a in argv)


@pytest.mark.parametrize('case', CASES['compare'], ids=_ids('compare'))
def test_compare(case):
    assert list(si.compare(case['state'], case['version'], case.get('extras'))) == case['want']


@pytest.mark.parametrize('case', CASES['driver'], ids=_ids('driver'))
def test_driver(case):
    assert si.wheel_cuda(case['sglang']) == case['cuda']
    need = si.min_driver(case['sglang'], case.get('override', ''))
    assert need == str(case['need'])
    assert si.driver_ok(case['have'], need) is case['ok']


@pytest.mark.parametrize('case', CASES['python'], ids=_ids('python'))
def test_python(case):
    assert si.python_ok(case['version']) is case['ok']


@pytest.mark.parametrize('case', CASES['error_message'], ids=_ids('error_message'))
def test_error_message(case):
    got = si.error_message(1, case.get('stdout', ''), case.get('stderr', ''), case.get('spec', 'sglang==9.9.9'),
                           case.get('index_url', ''), dry_run=case.get('dry_run', True),
                           unreachable=case.get('unreachable', ''))
    for text in case['want']:
        assert text in got, (got, text)
    assert 'pw@' not in got


def test_needs_probe():
    none = 'ERROR: Could not find a version that satisfies the requirement sglang==1 (from versions: none)'
    assert si.needs_probe('', none, 'http://10.77.0.1:1/simple/')
    assert not si.needs_probe('', none, '/srv/wheels')  # a folder: nothing to ask
    assert not si.needs_probe('', none.replace('none', '0.5.23'), 'http://10.77.0.1:1/simple/')
    assert not si.needs_probe('WARNING: Retrying ... Connection refused', none, 'https://idx/simple')
    assert si.probe_url('https://idx/simple') == si.probe_url('https://idx/simple/') == 'https://idx/simple/sglang/'


@pytest.mark.parametrize('case', CASES['dry_run'], ids=_ids('dry_run'))
def test_parse_dry_run(case):
    assert si.parse_dry_run(case['installer'], case.get('report', ''), case.get('stdout', '')) == case['want']


def test_url_password():
    assert si.url_password('https://bot:tok3n@pypi.example/simple') == 'tok3n'
    assert si.url_password('https://pypi.example/simple') == ''
    assert si.redact_url('https://bot:tok3n@pypi.example/simple') == 'https://bot:********@pypi.example/simple'


def _dist(root, name, version, requires=(), extras=()):
    info = os.path.join(str(root), '%s-%s.dist-info' % (name.replace('-', '_'), version))
    os.makedirs(info)
    lines = ['Metadata-Version: 2.1', 'Name: %s' % name, 'Version: %s' % version]
    lines += ['Provides-Extra: %s' % e for e in extras]
    lines += ['Requires-Dist: %s' % r for r in requires]
    with open(os.path.join(info, 'METADATA'), 'w') as handle:
        handle.write('\n'.join(lines) + '\n')


def _run_inspect(root, extras, kernel):
    env = dict(os.environ, PYTHONPATH=str(root))
    cp = subprocess.run(si.inspect_argv(sys.executable, extras, kernel), capture_output=True, text=True, env=env,
                        check=False)
    assert cp.returncode == 0, cp.stderr
    return si.parse_inspect(cp.stdout)


def test_inspect_snippet_reads_version_extras_and_kernel(tmp_path):
    _dist(tmp_path, 'sglang', '0.5.24',
          requires=['fakekernel==0.3.1', 'fakedep>=2; extra == "tracing"', 'sglang[tracing]; extra == "all"',
                    'otherdep; extra == "dev"'],
          extras=['tracing', 'all', 'dev'])
    _dist(tmp_path, 'fakekernel', '0.3.1')
    _dist(tmp_path, 'fakedep', '1.0')  # too old for the tracing extra
    (tmp_path / 'fakekernel.py').write_text('raise ImportError("libcuda.so.1: cannot open shared object file")\n')
    state = _run_inspect(tmp_path, ['all', 'dev', 'nosuch'], 'fakekernel')
    assert state['installed'] and state['version'] == '0.5.24'
    assert state['missing']['all'] == ['fakedep>=2']  # through sglang[tracing]
    assert state['missing']['dev'] == ['otherdep']
    assert state['unknown_extras'] == ['nosuch']
    assert 'libcuda.so.1' in state['kernel_error']
    needed, why = si.compare(state, '0.5.24', ['all'])
    assert needed and 'fakedep>=2' in why
    (tmp_path / 'fakekernel.py').write_text('VERSION = 1\n')
    _dist(tmp_path, 'otherdep', '3')
    state = _run_inspect(tmp_path, ['dev'], 'fakekernel')
    assert state['kernel_error'] is None and state['missing'] == {'dev': []}
    assert si.compare(state, '0.5.24', ['dev']) == (False, 'sglang 0.5.24 is installed with dev')


def test_inspect_snippet_without_sglang(tmp_path):
    state = _run_inspect(tmp_path, [], '')
    assert state['installed'] is False and state['python'].startswith('%d.' % sys.version_info[0])
