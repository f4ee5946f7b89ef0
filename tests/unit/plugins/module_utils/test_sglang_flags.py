# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_flags as sf

HERE = os.path.dirname(os.path.abspath(__file__))
ARGS_PATH = os.path.join(HERE, '..', '..', '..', 'data', 'sglang', 'server-args-0.5.23.json')
with open(ARGS_PATH) as _handle:
    DUMP = json.load(_handle)
TABLE = sf.FlagTable(DUMP['options'], DUMP['sglang_version'])
COMPACT = sf.FlagTable(sf.compact_options(DUMP['options']), DUMP['sglang_version'])
CASES = yaml.safe_load(open(os.path.join(HERE, 'cases', 'sglang_flags.yml')))


def params_of(case):
    params = dict(CASES['base'])
    params.update(case.get('params') or {})
    return params


@pytest.mark.parametrize('case', CASES['validate'], ids=[c['name'] for c in CASES['validate']])
def test_validate(case):
    result = sf.validate(params_of(case), TABLE if case.get('check_flags', True) else None, arch=case.get('arch'),
                         gpu_count=case.get('gpu_count'), force=case.get('force', False),
                         check_flags=case.get('check_flags', True))
    joined = ' || '.join(result['errors'])
    if not case['errors']:
        assert result['errors'] == []
    for want in case['errors']:
        assert want in joined, (want, result['errors'])
    warnings = ' || '.join(result['warnings'])
    for want in case.get('warnings', []):
        assert want in warnings, (want, result['warnings'])
    if 'warnings' in case and not case['warnings']:
        assert result['warnings'] == []
    if 'verdicts' in case:
        assert [f['verdict'] for f in result['arch_findings']] == case['verdicts']
    for error in result['errors']:
        assert ':' in error.split(' ')[0], 'every error starts with the option it is about: %r' % error


@pytest.mark.parametrize('case', CASES['validate'], ids=[c['name'] for c in CASES['validate']])
def test_compact_table_validates_the_same(case):
    kwargs = dict(arch=case.get('arch'), gpu_count=case.get('gpu_count'), force=case.get('force', False),
                  check_flags=case.get('check_flags', True))
    full, compact = sf.validate(params_of(case), TABLE, **kwargs), sf.validate(params_of(case), COMPACT, **kwargs)
    for result in (full, compact):  # the parsed extra args name their option: compare the flags and values
        result['extra_items'] = [(item['flag'], item['option']['dest'], item['values']) for item in result['extra_items']]
    assert compact == full


def test_compact_table_is_small_and_keeps_booleans():
    compact = sf.compact_options(DUMP['options'])
    assert len(json.dumps(compact)) < 0.6 * len(json.dumps([dict(o, help=None) for o in DUMP['options']]))
    by_dest = dict((o['dest'], o) for o in compact)
    assert by_dest['trust_remote_code']['nargs'] == 0  # a boolean flag: nargs 0 is kept, not dropped as empty
    assert 'flashinfer_cutlass' in by_dest['moe_runner_backend']['choices']
    assert all(set(o) <= set(sf.VALIDATION_FIELDS) for o in compact)


def test_load_options_takes_a_list_or_its_json_text():
    compact = sf.compact_options(DUMP['options'])
    assert sf.load_options(compact) == (compact, None)
    assert sf.load_options(json.dumps(compact)) == (compact, None)
    assert sf.load_options(None) == (None, None)


@pytest.mark.parametrize('value, error', [
    ('{"flags": 1', 'nor its JSON text'),
    ('{"flags": ["--x"], "dest": "x"}', 'must be a list of options'),
    ('[{"dest": "x"}]', 'each with flags and dest'),
    (42, 'got int'),
])
def test_load_options_names_what_is_wrong(value, error):
    options, message = sf.load_options(value)
    assert options is None and error in message


@pytest.mark.parametrize('case', CASES['build_argv'], ids=[c['name'] for c in CASES['build_argv']])
def test_build_argv(case):
    argv = sf.build_argv(params_of(case))
    assert sf.display_argv(argv) == case['want']
    assert 's3cret' not in ' '.join(sf.display_argv(argv))


@pytest.mark.parametrize('case', CASES['suggest'], ids=[c['flag'] for c in CASES['suggest']])
def test_suggest(case):
    assert TABLE.suggest_flag(case['flag']) == case['want']


@pytest.mark.parametrize('case', CASES['help'], ids=[c['name'] for c in CASES['help']])
def test_parse_help(case):
    got = [{'flags': o['flags'], 'nargs': o['nargs'], 'choices': o['choices']} for o in sf.parse_help(case['text'])]
    assert got == case['want']


def test_parse_introspection_takes_the_marker_line():
    out = 'WARNING noise\n%s{"installed": true, "version": "0.5.23"}\nmore noise\n' % sf.MARKER
    assert sf.parse_introspection(out) == {'installed': True, 'version': '0.5.23'}
    assert sf.parse_introspection('nothing here') is None


# ---- the snippet and the --help fallback run against a fake SGLang whose parser is built from the dump
@pytest.fixture(scope='module')
def fake_sglang(tmp_path_factory):
    root = tmp_path_factory.mktemp('fake_sglang')
    pkg = root / 'sglang'
    (pkg / 'srt').mkdir(parents=True)
    (pkg / '__init__.py').write_text('__version__ = "0.5.23"\n')
    (pkg / 'srt' / '__init__.py').write_text('')
    (pkg / 'srt' / 'server_args.py').write_text(
        'import json, sys\n'
        'sys.path.insert(0, %r)\n'
        'from sglang_parser import add_options\n'
        'class ServerArgs(object):\n'
        '    @staticmethod\n'
        '    def add_cli_args(parser):\n'
        '        with open(%r) as h:\n'
        '            add_options(parser, json.load(h)["options"])\n' % (HERE, os.path.abspath(ARGS_PATH)))
    (pkg / 'launch_server.py').write_text(
        'import argparse\n'
        'from sglang.srt.server_args import ServerArgs\n'
        'parser = argparse.ArgumentParser()\n'
        'ServerArgs.add_cli_args(parser)\n'
        'parser.parse_args()\n')
    return str(root)


def run_with(path):
    env = dict(os.environ, PYTHONPATH=path)

    def run(argv):
        proc = subprocess.run(argv, check=False, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, universal_newlines=True)
        return proc.returncode, proc.stdout, proc.stderr
    return run


def comparable(option, keys=('flags', 'dest', 'nargs', 'takes_value', 'choices', 'default'), text_choices=False):
    out = dict((k, option.get(k)) for k in keys)
    if text_choices and out.get('choices') is not None:
        out['choices'] = [str(c) for c in out['choices']]  # --help prints them as text
    return out


def test_snippet_reads_the_same_table_as_the_dump(fake_sglang):
    got = sf.read_installed(run_with(fake_sglang), sys.executable)
    assert got['installed'] is True and got['version'] == '0.5.23', got['error']
    assert got['source'] == 'sglang.srt.server_args.ServerArgs.add_cli_args'
    want = dict((o['dest'], comparable(o)) for o in DUMP['options'] if o['dest'] != 'help')
    have = dict((o['dest'], comparable(o)) for o in got['options'] if o['dest'] != 'help')
    assert have == want


def test_help_fallback_when_the_parser_cannot_be_built(fake_sglang, tmp_path):
    # a copy of the fake whose add_cli_args has another signature; --help still works
    import shutil
    broken = tmp_path / 'broken'
    shutil.copytree(fake_sglang, str(broken))
    args_py = broken / 'sglang' / 'srt' / 'server_args.py'
    text = args_py.read_text()
    args_py.write_text(text.replace('def add_cli_args(parser):', 'def add_cli_args(parser, extra):'))
    (broken / 'sglang' / 'launch_server.py').write_text(
        'import argparse, json, sys\n'
        'sys.path.insert(0, %r)\n'
        'from sglang_parser import add_options\n'
        'parser = argparse.ArgumentParser()\n'
        'add_options(parser, json.load(open(%r))["options"])\n'
        'parser.parse_args()\n' % (HERE, os.path.abspath(ARGS_PATH)))
    got = sf.read_installed(run_with(str(broken)), sys.executable)
    assert got['installed'] and got['source'] == 'launch_server --help'
    assert 'add_cli_args failed' in got['error']
    want = dict((o['flags'][0], comparable(o, ('flags', 'takes_value', 'choices'), True)) for o in DUMP['options'])
    have = dict((o['flags'][0], comparable(o, ('flags', 'takes_value', 'choices'), True)) for o in got['options'])
    assert have == want


def test_not_installed(tmp_path):
    got = sf.read_installed(run_with(str(tmp_path)), sys.executable)
    assert got['installed'] is False and 'import sglang failed' in got['error']


def test_interpreter_missing(tmp_path):
    def run(argv):
        return 2, '', 'No such file or directory: %s' % argv[0]
    got = sf.read_installed(run, '/nope/python3')
    assert got['installed'] is False and 'rc=2' in got['error']


def test_error_kinds():
    result = sf.validate(dict(CASES['base'], moe_runner_backend='flashinfer_trtlm',
                              extra_args=['--nsa-decode-backend', 'x', '--attention-backend', 'trtllm_mha'], port=0),
                         TABLE, arch='sm120')
    assert sf.error_kinds(result['errors']) == ['invalid_input', 'unknown_choice', 'unknown_flag', 'arch_unsupported']


@pytest.mark.parametrize('text, want', [
    ('noise\n@@M@@{"a": 1}\n', {'a': 1}),
    ('@@M@@{"a": 1}\nwarning\nprefix @@M@@{"a": 2}\n', {'a': 2}),
    ('@@M@@{"a": 1}\n@@M@@not json\n', None),
    ('', None),
    (None, None),
])
def test_last_marked_json(text, want):
    assert sf.last_marked_json(text, '@@M@@') == want
