# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_flags as sf
from ansible_collections.llmserve.sglang.plugins.module_utils import systemd_unit as su
from ansible_collections.llmserve.sglang.tests.unit.plugins.module_utils.sglang_parser import build_parser

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, '..', '..', '..', 'data', 'sglang', 'server-args-0.5.23.json')) as _handle:
    DUMP = json.load(_handle)
CASES = yaml.safe_load(open(os.path.join(HERE, 'cases', 'systemd_unit.yml')))
ENV = {'SGLANG_API_KEY': 'k e y'}
SYSTEMD_ANALYZE = shutil.which('systemd-analyze') if hasattr(shutil, 'which') else None


@pytest.mark.parametrize('case', CASES['quote'], ids=[repr(c['arg']) for c in CASES['quote']])
def test_quote(case):
    assert su.quote_arg(case['arg']) == case['want']
    # and systemd's reading gives the argument back
    assert su.parse_exec_start('/bin/x ' + case['want']) == ['/bin/x', case['arg']]


@pytest.mark.parametrize('arg', CASES['quote_errors'])
def test_quote_errors(arg):
    with pytest.raises(su.UnitError):
        su.quote_arg(arg)


@pytest.mark.parametrize('case', CASES['split'], ids=[c['text'] for c in CASES['split']])
def test_split(case):
    assert su.parse_exec_start(case['text'], ENV) == case['want']


@pytest.mark.parametrize('text', CASES['split_errors'])
def test_split_errors(text):
    with pytest.raises(su.UnitError):
        su.parse_exec_start(text, ENV)


def params_for(model_path):
    return {
        'python': sys.executable, 'model_path': model_path, 'served_model_name': 'my model', 'tp_size': 8,
        'quantization': 'modelopt_fp4', 'moe_runner_backend': 'flashinfer_cutlass', 'fp4_gemm_backend': 'flashinfer_cudnn',
        'attention_backend': 'triton', 'tool_call_parser': 'qwen3_coder', 'reasoning_parser': 'qwen3', 'host': '0.0.0.0',
        'port': 30000, 'api_key': 'k e y', 'disable_custom_all_reduce': True,
        'extra_args': ['--trust-remote-code', '--mem-fraction-static', '0.85', '--chat-template', '{% if a %}$x{% endif %}',
                       '--cuda-graph-bs-decode', '1', '2', '4'],
    }


@pytest.mark.parametrize('case', CASES['roundtrip'], ids=[c['name'] for c in CASES['roundtrip']])
def test_roundtrip_through_systemd_rules_and_sglang_parser(case, tmp_path):
    params = params_for(case['model_path'])
    argv = sf.build_argv(params)
    unit = su.render_unit(argv, 'sglang-test', str(tmp_path / 'sglang-test.env'))
    exec_start = su.read_unit_value(unit, 'ExecStart')
    assert exec_start == su.render_exec_start(argv)
    words = su.parse_exec_start(exec_start, ENV)
    assert words[:3] == [sys.executable, '-m', 'sglang.launch_server']
    assert words[3:] == [str(a) if not isinstance(a, sf.EnvRef) else 'k e y' for a in argv[3:]]
    ns = build_parser(DUMP['options']).parse_args(words[3:])
    assert ns.model_path == case['model_path']
    assert ns.tp_size == 8 and ns.port == 30000 and ns.served_model_name == 'my model'
    assert ns.api_key == 'k e y'
    assert ns.disable_custom_all_reduce is True and ns.trust_remote_code is True
    assert ns.moe_runner_backend == 'flashinfer_cutlass' and ns.fp4_gemm_runner_backend == 'flashinfer_cudnn'
    assert ns.mem_fraction_static == 0.85
    assert ns.chat_template == '{% if a %}$x{% endif %}'
    assert ns.cuda_graph_bs_decode == ['1', '2', '4'] or ns.cuda_graph_bs_decode == [1, 2, 4]
    assert 'k e y' not in unit


@pytest.mark.skipif(not SYSTEMD_ANALYZE, reason='systemd-analyze not installed')
@pytest.mark.parametrize('case', CASES['roundtrip'], ids=[c['name'] for c in CASES['roundtrip']])
def test_systemd_analyze_verify_accepts_the_unit(case, tmp_path):
    argv = sf.build_argv(params_for(case['model_path']))
    path = tmp_path / 'llmserve-verify.service'
    path.write_text(su.render_unit(argv, 'llmserve-verify', str(tmp_path / 'x y %.env'), description='100% "test"',
                                   restart='on-failure', user='root', working_directory=str(tmp_path)))
    proc = subprocess.run([SYSTEMD_ANALYZE, 'verify', str(path)], check=False, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)
    problems = [line for line in (proc.stdout + proc.stderr).splitlines() if 'llmserve-verify' in line]
    assert proc.returncode == 0 and not problems, proc.stdout + proc.stderr


@pytest.mark.skipif(not SYSTEMD_ANALYZE, reason='systemd-analyze not installed')
def test_systemd_analyze_catches_what_the_tokenizer_rejects(tmp_path):
    """The tokenizer and systemd agree on a broken line (so the round trip above means something)."""
    path = tmp_path / 'llmserve-broken.service'
    path.write_text('[Service]\nExecStart=%s "unbalanced\n' % sys.executable)
    proc = subprocess.run([SYSTEMD_ANALYZE, 'verify', str(path)], check=False, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)
    assert proc.returncode != 0
    with pytest.raises(su.UnitError):
        su.parse_exec_start('%s "unbalanced' % sys.executable)


def test_unit_content():
    argv = sf.build_argv(params_for('/m'))
    unit = su.render_unit(argv, 'sglang', '/etc/llmserve/sglang.env', timeout_stop_sec=45, limit_nofile=65536)
    for line in ('# Ansible managed', 'After=network-online.target', 'Type=simple', 'KillMode=mixed',
                 'TimeoutStopSec=45', 'Restart=no', 'LimitNOFILE=65536', 'WorkingDirectory=/',
                 'EnvironmentFile=/etc/llmserve/sglang.env', '--api-key ${SGLANG_API_KEY}', 'WantedBy=multi-user.target'):
        assert line in unit, line
    assert 'RestartSec' not in unit
    assert 'RestartSec=7' in su.render_unit(argv, 'sglang', '/e', restart='on-failure', restart_sec=7)
    assert unit == su.render_unit(argv, 'sglang', '/etc/llmserve/sglang.env', timeout_stop_sec=45, limit_nofile=65536)


@pytest.mark.parametrize('case', CASES['env'], ids=[c['name'] for c in CASES['env']])
def test_env_file(case):
    text = su.render_env_file(case['env'], api_key=case.get('api_key'))
    body = ''.join(line + '\n' for line in text.splitlines() if not line.startswith('#'))
    assert body == case['want']
    masked = su.render_env_file(case['env'], api_key=case.get('api_key'), mask=True)
    assert ''.join(line + '\n' for line in masked.splitlines() if not line.startswith('#')) == case['masked']
    back = su.parse_env_file(text)
    expected = dict((k, su._bool_env(v)) for k, v in case['env'].items())
    if case.get('api_key'):
        expected['SGLANG_API_KEY'] = case['api_key']
    assert back == expected


@pytest.mark.parametrize('case', CASES['env_errors'], ids=[str(c['env']) for c in CASES['env_errors']])
def test_env_errors(case):
    errors = su.validate_env(case['env'], reserved=('SGLANG_API_KEY',))
    assert any(case['error'] in e for e in errors), errors
    assert all(e.startswith('env: ') for e in errors)


@pytest.mark.parametrize('case', CASES['service_names'], ids=[c['name'] or 'empty' for c in CASES['service_names']])
def test_service_names(case):
    error = su.validate_service_name(case['name'])
    if case['error'] is None:
        assert error is None
    else:
        assert case['error'] in error


@pytest.mark.parametrize('case', CASES['restart'], ids=[str(c['value']) for c in CASES['restart']])
def test_restart(case):
    assert su.normalize_restart(case['value']) == case['want']


@pytest.mark.parametrize('rank', [0, 1])
def test_multinode_units_of_both_ranks_parse_with_sglangs_parser(rank, tmp_path):
    """A two-node group: the rendered unit of each rank, read back the way systemd splits ExecStart, parses with the
    0.5.23 parser into the same flags except the rank."""
    params = params_for('/models/Qwen3.5 397B "NVFP4"')
    params.update(tp_size=16, nnodes=2, node_rank=rank, dist_init_addr='10.77.0.11:20000')
    checked = sf.validate(params, sf.FlagTable(DUMP['options'], DUMP['sglang_version']), arch='sm120', gpu_count=8)
    assert checked['errors'] == []
    argv = sf.build_argv(params)
    unit = su.render_unit(argv, 'sglang', str(tmp_path / 'sglang.env'))
    words = su.parse_exec_start(su.read_unit_value(unit, 'ExecStart'), ENV)
    ns = build_parser(DUMP['options']).parse_args(words[3:])
    assert (ns.nnodes, ns.node_rank, ns.dist_init_addr, ns.tp_size) == (2, rank, '10.77.0.11:20000', 16)
    assert ns.model_path == '/models/Qwen3.5 397B "NVFP4"' and ns.moe_runner_backend == 'flashinfer_cutlass'


def _edited(text, edits):
    for old, new in edits or []:
        assert old in text, old
        text = text.replace(old + '\n', '') if new is None else text.replace(old, new)
    return text


@pytest.mark.parametrize('case', CASES['unit_change'], ids=[c['name'] for c in CASES['unit_change']])
def test_unit_change(case):
    old = _edited(CASES['unit_base'], case.get('old_edits')) if case.get('old', '') is not None else None
    new = _edited(CASES['unit_base'], case.get('new_edits'))
    assert su.unit_change(old, new) == case['want']
    assert su.only_restart_policy_changed(old, new) is (case['want'] == 'reload')


def test_trial_unit_to_installed_unit_is_a_reload():
    """The trial's rendered unit (Restart=no) and the installed one (on-failure, RestartSec=10) of the same
    configuration differ by the policy only; another backend is a restart."""
    argv = sf.build_argv(params_for('/models/my "best" model'))
    trial = su.render_unit(argv, 'sglang', '/etc/llmserve/sglang.env')
    installed = su.render_unit(argv, 'sglang', '/etc/llmserve/sglang.env', restart='on-failure', restart_sec=10)
    assert trial != installed and 'RestartSec=10' in installed
    assert su.unit_change(trial, installed) == 'reload' == su.unit_change(installed, trial)
    assert su.unit_change(installed, installed) == 'none'
    other = su.render_unit(sf.build_argv(dict(params_for('/models/my "best" model'), moe_runner_backend='triton')),
                           'sglang', '/etc/llmserve/sglang.env', restart='on-failure', restart_sec=10)
    assert su.unit_change(trial, other) == 'restart'


@pytest.mark.parametrize('case', CASES['systemd_version'], ids=[c['text'][:20] for c in CASES['systemd_version']])
def test_systemd_version(case):
    assert su.systemd_version(case['text']) == case['version']


@pytest.mark.parametrize('case', CASES['log_filter'], ids=[c['name'] for c in CASES['log_filter']])
def test_log_filter_patterns(case):
    assert su.log_filter_patterns(case['version'], case['key']) == case['patterns']


def _server_args_line(api_key):
    # SGLang 0.5.23 logs its arguments as the repr of a dict (see the real logs in the reference run)
    args = {'model_path': '/models/m', 'tokenizer_path': '/models/m', 'api_key': api_key, 'admin_api_key': None,
            'served_model_name': 'm', 'port': 30000}
    return '[2026-12-01 15:10:15] server_args=%r' % (args,)


def test_log_filter_pattern_hides_the_key_line_only():
    """The deny pattern (PCRE2 in systemd; this one is plain enough for Python's re too) matches the start-up line
    with a key and not the one without, nor other lines that name the option."""
    regex = re.compile(su.SECRET_LOG_FILTER[1:])
    assert su.SECRET_LOG_FILTER.startswith('~')
    assert regex.search(_server_args_line('sk-live-0123'))
    assert regex.search(_server_args_line('o-starts-with-o'))
    assert not regex.search(_server_args_line(None))
    assert not regex.search('--api-key is set; requests need Authorization: Bearer')
    assert ' ' not in su.SECRET_LOG_FILTER and '"' not in su.SECRET_LOG_FILTER and "'" not in su.SECRET_LOG_FILTER


def test_unit_carries_the_log_filter():
    argv = sf.build_argv(params_for('/models/m'))
    plain = su.render_unit(argv, 'sglang', '/etc/llmserve/sglang.env')
    assert 'LogFilterPatterns' not in plain
    unit = su.render_unit(argv, 'sglang', '/etc/llmserve/sglang.env', log_filter_patterns=['~a%b', su.SECRET_LOG_FILTER])
    assert 'LogFilterPatterns=~a%%b\n' in unit
    assert 'LogFilterPatterns=~api_key.:.\\x27\n' in unit
    assert unit.index('LogFilterPatterns=') < unit.index('[Install]')
