# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/module_utils/_launch.py: the pure steps from cases/_launch.yml, and run() on a real AnsibleModule with
sglang_launch's documented options against a fake systemctl (and fake GPU tools)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

import pytest
import yaml

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmserve.sglang.plugins.module_utils import _launch
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_flags
from ansible_collections.llmserve.sglang.plugins.module_utils import systemd_unit
from ansible_collections.llmserve.sglang.plugins.module_utils import trial
from ansible_collections.llmserve.sglang.tests.unit.plugins.modules.utils import run_mocked

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, 'cases', '_launch.yml')) as _h:
    CASES = yaml.safe_load(_h)
with open(os.path.join(HERE, '..', '..', '..', 'data', 'sglang', 'server-args-0.5.23.json')) as _h:
    DUMP = json.load(_h)
KEY = 'sk-very-secret'


SPEC = _launch.argument_spec()


class FakeSystemd(object):
    """systemctl as a tiny state machine: is-active/is-enabled answer from state; actions change it."""

    def __init__(self, active=False, enabled=False, version=252):
        self.active = active
        self.enabled = enabled
        self.version = version
        self.actions = []
        self.starts = 1 if active else 0  # a new InvocationID for every start

    @property
    def invocation(self):
        return ('%032x' % self.starts) if self.active else ''

    def __call__(self, argv):
        if argv[0] != '/usr/bin/systemctl':
            if argv[1:2] == ['-c'] and argv[2] == sglang_flags.INTROSPECT_SNIPPET:
                payload = {'installed': True, 'version': '0.5.23', 'options': DUMP['options']}
                return 0, sglang_flags.MARKER + json.dumps(payload) + '\n', ''
            raise AssertionError('unexpected %r' % argv)
        verb = argv[1]
        if verb == '--version':
            return 0, 'systemd %s (%s.1-1)\n+PAM +AUDIT\n' % (self.version, self.version), ''
        if verb == 'is-active':
            return (0, 'active\n', '') if self.active else (3, 'inactive\n', '')
        if verb == 'is-enabled':
            return (0, 'enabled\n', '') if self.enabled else (1, 'disabled\n', '')
        if verb == 'show':
            assert argv[2:4] == ['--property=InvocationID', '--value'], argv
            return 0, self.invocation + '\n', ''
        self.actions.append(verb)
        if verb in ('start', 'restart'):
            self.active = True
            self.starts += 1
        elif verb == 'stop':
            self.active = False
        elif verb == 'enable':
            self.enabled = True
        elif verb == 'disable':
            self.enabled = False
        return 0, '', ''


class FakeSystemdAndGpu(FakeSystemd):
    """systemctl plus the stop and the GPU tools gpu_free runs: one stale GPU holder, gone once it is signalled."""

    def __init__(self, held_mib=20000, **kw):
        super(FakeSystemdAndGpu, self).__init__(**kw)
        self.held = held_mib
        self.calls = []

    def __call__(self, argv):
        self.calls.append(list(argv))
        if argv[0] == 'systemctl' and argv[1] == 'show':
            return 0, 'LoadState=loaded\nActiveState=%s\n' % ('active' if self.active else 'inactive'), ''
        if argv[0] == 'timeout' and argv[2:4] == ['systemctl', 'stop']:
            self.actions.append('stop')
            self.active = False
            return 0, '', ''
        if argv[0].endswith('nvidia-smi'):
            if argv[1].startswith('--query-gpu='):
                return 0, '0, GPU-x, %d, 97887\n' % self.held, ''
            return 0, '', ''  # no compute apps
        if argv[0].endswith('fuser'):
            return 1, '', ''
        return super(FakeSystemdAndGpu, self).__call__(argv)


@pytest.fixture
def base(tmp_path):
    return {
        'service_name': 'sglang-trial',
        'python': '/root/ml-env/bin/python3',
        'model_path': '/models/Qwen 3.5 "NVFP4" $v 100%',
        'served_model_name': 'qwen3.5',
        'tp_size': 8,
        'quantization': 'modelopt_fp4',
        'moe_runner_backend': 'flashinfer_cutlass',
        'fp4_gemm_backend': 'flashinfer_cudnn',
        'host': '0.0.0.0',
        'port': 30000,
        'api_key': KEY,
        'env': {'NCCL_P2P_LEVEL': 'SYS'},
        'extra_args': ['--trust-remote-code'],
        'gpu_arch': 'sm120',
        'gpu_count': 8,
        'sglang_options': DUMP['options'],
        'sglang_version': '0.5.23',
        'unit_dir': str(tmp_path / 'units'),
        'env_dir': str(tmp_path / 'etc'),
        'state': 'started',
    }


def launch_main():
    _launch.run(AnsibleModule(argument_spec=SPEC, supports_check_mode=True))


def run(args, monkeypatch, systemd):
    return run_mocked(launch_main, args, monkeypatch, systemd)


# ---- the pure steps (cases/_launch.yml)

def test_spec_has_every_option_run_reads():
    for name in ('service_name', 'state', 'env', 'free_gpus', 'backup_keep', 'restart', 'redact_values'):
        assert name in SPEC
    assert SPEC['state']['choices'] == ['started', 'stopped', 'restarted', 'present', 'absent']
    assert SPEC['free_gpus']['options']['stop_timeout'] == {'type': 'float', 'default': 60}
    assert SPEC['api_key']['no_log'] is True


@pytest.mark.parametrize('case', CASES['renders'], ids=lambda c: '%(state)s-%(model_path)s' % c)
def test_renders(case):
    assert _launch.renders(case['state'], case['model_path']) is case['want']


@pytest.mark.parametrize('case', CASES['option_errors'], ids=lambda c: c['name'])
def test_option_errors(case):
    params = dict(CASES['option_defaults'], **case.get('set', {}))
    assert _launch.option_errors(params, case['restart']) == case['want']


@pytest.mark.parametrize('case', CASES['errors_message'], ids=lambda c: str(len(c['errors'])))
def test_errors_message(case):
    assert _launch.errors_message(case['errors']) == case['want']


@pytest.mark.parametrize('case', CASES['removal_actions'], ids=lambda c: 'active=%(active)s-enabled=%(enabled)s' % c)
def test_removal_actions(case):
    assert _launch.removal_actions(case['active'], case['enabled']) == case['want']


@pytest.mark.parametrize('case', CASES['service_actions'], ids=lambda c: c['name'])
def test_service_actions(case):
    got = _launch.service_actions(case['state'], case['active'], case['restart_due'], enable=case.get('enable'),
                                  free_gpus=case.get('free_gpus', False))
    assert got == case['want']


def test_masked_env_diff_masks_the_key_before_and_after():
    before = systemd_unit.render_env_file({'A': '1'}, api_key='old-secret-key')
    got = _launch.masked_env_diff(before, {'env': {'A': '2'}, 'api_key': KEY}, True)
    assert 'A="1"' in got[0] and 'A="2"' in got[1]
    assert 'old-secret-key' not in got[0] and KEY not in got[1] and '********' in got[1]
    assert _launch.masked_env_diff(None, {'env': {}, 'api_key': None}, False) == ('', '')


# ---- run(): a whole call of the module

def test_first_run_writes_and_starts_then_idempotent(base, monkeypatch, tmp_path):
    systemd = FakeSystemd()
    result, failed, calls = run(base, monkeypatch, systemd)
    assert not failed, result
    assert result['changed'] and result['unit_changed'] and result['env_changed']
    assert systemd.actions == ['daemon-reload', 'start']
    unit = open(result['unit_path']).read()
    env = open(result['env_path']).read()
    assert stat.S_IMODE(os.stat(result['env_path']).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(result['unit_path']).st_mode) == 0o644
    assert stat.S_IMODE(os.stat(os.path.dirname(result['env_path'])).st_mode) == 0o700
    assert KEY not in unit and KEY in env and KEY not in json.dumps(result)
    assert '--api-key ${SGLANG_API_KEY}' in unit and 'KillMode=mixed' in unit and 'Restart=no' in unit
    assert '--tp-size 8' in result['exec_start']
    assert result['argv'][:3] == ['/root/ml-env/bin/python3', '-m', 'sglang.launch_server']
    argv = systemd_unit.parse_exec_start(systemd_unit.read_unit_value(unit, 'ExecStart'),
                                         systemd_unit.parse_env_file(env))
    assert argv[argv.index('--model-path') + 1] == base['model_path']
    assert argv[argv.index('--api-key') + 1] == KEY
    assert result['backup_files'] == []

    first_invocation = result['invocation_id']
    assert first_invocation == systemd.invocation != ''

    # the same again: nothing written, no daemon-reload, no restart; the same process goes on (same invocation)
    systemd.actions = []
    result, failed, calls = run(base, monkeypatch, systemd)
    assert not failed and not result['changed'] and systemd.actions == []
    assert result['invocation_id'] == first_invocation

    # enabling only: still the same process
    systemd.actions = []
    result, failed, calls = run(dict(base, enabled=True), monkeypatch, systemd)
    assert not failed and systemd.actions == ['enable'] and result['invocation_id'] == first_invocation

    # a restart is a new invocation
    result, failed, calls = run(dict(base, state='restarted'), monkeypatch, systemd)
    assert not failed and result['invocation_id'] not in ('', first_invocation)
    systemd.actions = []

    # a new backend: unit rewritten, backup kept, running service restarted
    changed = dict(base, moe_runner_backend='triton')
    result, failed, calls = run(changed, monkeypatch, systemd)
    assert not failed and result['changed'] and result['unit_changed'] and not result['env_changed']
    assert systemd.actions == ['daemon-reload', 'restart']
    assert len(result['backup_files']) == 1 and os.path.basename(result['backup_files'][0]).startswith('sglang-trial.service.')
    assert open(result['backup_files'][0]).read() == unit
    assert stat.S_IMODE(os.stat(result['backup_files'][0]).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(result['unit_path']).st_mode) == 0o644

    # only the key changes: env rewritten, no daemon-reload, restart
    systemd.actions = []
    result, failed, calls = run(dict(changed, api_key='other'), monkeypatch, systemd)
    assert result['env_changed'] and not result['unit_changed'] and systemd.actions == ['restart']
    assert stat.S_IMODE(os.stat(result['env_path']).st_mode) == 0o600
    assert [stat.S_IMODE(os.stat(b).st_mode) for b in result['backup_files']] == [0o600]
    assert open(result['backup_files'][0]).read() == env


def test_check_mode_and_diff_write_nothing(base, monkeypatch):
    systemd = FakeSystemd()
    args = dict(base, _ansible_check_mode=True, _ansible_diff=True)
    result, failed, calls = run(args, monkeypatch, systemd)
    assert not failed and result['changed']
    assert not os.path.exists(result['unit_path']) and not os.path.exists(result['env_path'])
    assert systemd.actions == [] and result['actions'] == ['daemon-reload', 'start']
    unit_diff, env_diff = result['diff']
    assert unit_diff['before'] == '' and 'ExecStart=' in unit_diff['after']
    assert 'SGLANG_API_KEY="********"' in env_diff['after'] and KEY not in json.dumps(result)


@pytest.mark.parametrize('case', CASES['validation'], ids=lambda c: c['name'])
def test_validation_fails_before_any_change(base, monkeypatch, case):
    systemd = FakeSystemd(active=case.get('active', False))
    result, failed, calls = run(dict(base, **case['args']), monkeypatch, systemd)
    assert failed
    for want in case['want_in_msg']:
        assert want in result['msg'], want
    if 'errors' in case:
        assert len(result['errors']) == case['errors']
        assert all(e in result['msg'] for e in result['errors'])
    if 'error_kinds' in case:
        assert sorted(result['error_kinds']) == case['error_kinds']
    assert KEY not in json.dumps(result)
    assert not os.path.exists(base['unit_dir']) and systemd.actions == []


def test_force_turns_the_arch_error_into_a_warning(base, monkeypatch):
    systemd = FakeSystemd()
    result, failed, calls = run(dict(base, moe_runner_backend='flashinfer_trtllm', force=True), monkeypatch, systemd)
    assert not failed and result['arch_findings'][0]['verdict'] == 'unsupported'
    assert any('(forced)' in w for w in result['validation_warnings'])


def test_introspects_when_no_table_given(base, monkeypatch):
    args = dict(base)
    del args['sglang_options']
    del args['sglang_version']
    result, failed, calls = run(dict(args, extra_args=['--tp', '8']), monkeypatch, FakeSystemd())
    assert failed and 'did you mean --tp-size? (sglang 0.5.23)' in result['msg']
    assert calls[0][1] == '-c'


def test_restart_no_unquoted_and_restarted_state(base, monkeypatch):
    systemd = FakeSystemd(active=True)
    result, failed, calls = run(dict(base, restart=False, state='restarted', enabled=True), monkeypatch, systemd)
    assert not failed and systemd.actions == ['daemon-reload', 'enable', 'restart']
    assert 'Restart=no' in open(result['unit_path']).read()
    result, failed, calls = run(dict(base, restart='sometimes'), monkeypatch, systemd)
    assert failed and result['msg'].count('restart:') == 1


def test_stopped_then_absent_with_backups(base, monkeypatch):
    systemd = FakeSystemd()
    result, failed, calls = run(base, monkeypatch, systemd)
    systemd.enabled = True
    result, failed, calls = run({'service_name': 'sglang-trial', 'state': 'stopped', 'unit_dir': base['unit_dir'],
                                 'env_dir': base['env_dir']}, monkeypatch, systemd)
    assert not failed and result['changed'] and systemd.actions[-1] == 'stop'
    result, failed, calls = run({'service_name': 'sglang-trial', 'state': 'absent', 'unit_dir': base['unit_dir'],
                                 'env_dir': base['env_dir']}, monkeypatch, systemd)
    assert not failed and result['changed'] and systemd.actions[-2:] == ['disable', 'daemon-reload']
    assert not os.path.exists(result['unit_path']) and not os.path.exists(result['env_path'])
    assert len(result['backup_files']) == 2
    assert [stat.S_IMODE(os.stat(b).st_mode) for b in result['backup_files']] == [0o600, 0o600]
    result, failed, calls = run({'service_name': 'sglang-trial', 'state': 'absent', 'unit_dir': base['unit_dir'],
                                 'env_dir': base['env_dir']}, monkeypatch, systemd)
    assert not failed and not result['changed']


def test_backups_are_pruned(base, monkeypatch):
    systemd = FakeSystemd()
    for port in range(30000, 30006):
        result, failed, calls = run(dict(base, port=port, backup_keep=2), monkeypatch, systemd)
        assert not failed
    backups = sorted(os.listdir(os.path.join(base['env_dir'], 'backup')))
    assert len([b for b in backups if b.startswith('sglang-trial.service.')]) == 2


@pytest.mark.parametrize('case', CASES['log_filter'], ids=lambda c: 'systemd-%(systemd)s-key-%(api_key)s' % c)
def test_log_filter_follows_the_hosts_systemd(base, monkeypatch, case):
    """The start-up argument dump (it holds the key) is kept out of the journal where systemd can filter it."""
    key = KEY if case['api_key'] else None
    result, failed, calls = run(dict(base, api_key=key), monkeypatch, FakeSystemd(version=case['systemd']))
    assert not failed, result.get('msg')
    unit = open(result['unit_path']).read()
    assert ('LogFilterPatterns=~api_key.:.\\x27\n' in unit) is case['filtered']
    assert result['log_filter_patterns'] == (['~api_key.:.\\x27'] if case['filtered'] else [])
    assert KEY not in unit


def test_free_gpus_stops_frees_then_starts(base, monkeypatch):
    systemd = FakeSystemdAndGpu(held_mib=3, active=True)
    args = dict(base, state='restarted', free_gpus={'stop_timeout': 9, 'timeout': 2, 'devices': '/dev/null*'})
    result, failed, calls = run(args, monkeypatch, systemd)
    assert not failed, result.get('msg')
    assert result['actions'] == ['daemon-reload', 'stop', 'free-gpus', 'start']
    assert systemd.actions == ['daemon-reload', 'stop', 'start'] and systemd.active
    assert ['timeout', '9', 'systemctl', 'stop', 'sglang-trial.service'] in systemd.calls
    assert result['unit_stop']['result'] == 'stopped'
    assert result['gpus_freed']['memory_after'][0]['used_mib'] == 3


def test_free_gpus_held_memory_fails_and_leaves_the_unit_stopped(base, monkeypatch):
    systemd = FakeSystemdAndGpu(held_mib=20000, active=True)
    args = dict(base, state='restarted', free_gpus={'timeout': 0.3, 'devices': '/dev/null*'})
    result, failed, calls = run(args, monkeypatch, systemd)
    assert failed and result['msg'].startswith('free_gpus: the unit is stopped and not started: GPU memory still held')
    assert 'start' not in systemd.actions and not systemd.active
    assert result['changed'] and result['gpus_freed']['memory_after'][0]['used_mib'] == 20000


def test_free_gpus_unused_when_nothing_starts(base, monkeypatch):
    systemd = FakeSystemdAndGpu(held_mib=20000, active=True)
    args = dict(base, state='present', free_gpus={'timeout': 0.3})
    result, failed, calls = run(args, monkeypatch, systemd)
    assert not failed and 'free-gpus' not in result['actions'] and 'gpus_freed' not in result


def test_flag_table_as_json_text_validates_the_same(base, monkeypatch):
    bad = dict(base, moe_runner_backend='flashinfer_nope', state='present', _ansible_check_mode=True)
    as_list, failed_list, dummy = run(bad, monkeypatch, FakeSystemd())
    as_text, failed_text, dummy = run(dict(bad, sglang_options=json.dumps(DUMP['options'])), monkeypatch, FakeSystemd())
    assert failed_list and failed_text and as_text['errors'] == as_list['errors']
    assert 'moe_runner_backend' in as_text['errors'][0]
    good, failed, dummy = run(dict(base, state='present', _ansible_check_mode=True,
                                   sglang_options=json.dumps(DUMP['options'])), monkeypatch, FakeSystemd())
    assert not failed, good


@pytest.mark.parametrize('case', CASES['install']['cases'], ids=lambda c: c['name'])
def test_installing_the_trials_unit(base, monkeypatch, case):
    want = case['want']
    systemd = FakeSystemd()
    trial_result, failed, dummy = run(dict(base, state='restarted', enabled=False, restart='no'), monkeypatch, systemd)
    assert not failed and 'Restart=no' in open(trial_result['unit_path']).read()
    trial_unit = open(trial_result['unit_path']).read()
    systemd.actions = []
    result, failed, dummy = run(dict(base, **dict(CASES['install']['args'], **case['change'])), monkeypatch, systemd)
    assert not failed, result.get('msg')
    assert systemd.actions == want and result['actions'] == want
    assert result['changed'] and result['unit_changed'] and result['daemon_reloaded']
    unit = open(result['unit_path']).read()
    assert 'Restart=on-failure\nRestartSec=%d\n' % case['change'].get('restart_sec', 10) in unit
    assert [open(b).read() for b in result['backup_files'] if '.service.' in b] == [trial_unit]
    same = result['invocation_id'] == trial_result['invocation_id'] != ''
    assert same is ('restart' not in want)
    # the sglang_service role's check: the trial's process still serves, it is not verified again
    outcome = {'selected': 'a', 'last_started': 'a', 'last_invocation': trial_result['invocation_id']}
    assert trial.verified_by_trial(outcome, result) is ('restart' not in want)


def test_restart_policy_change_of_a_stopped_unit_starts_it(base, monkeypatch):
    systemd = FakeSystemd()
    run(dict(base, state='present'), monkeypatch, systemd)
    systemd.actions = []
    result, failed, dummy = run(dict(base, **CASES['install']['args']), monkeypatch, systemd)
    assert not failed and systemd.actions == ['daemon-reload', 'enable', 'start']


def test_restart_policy_change_in_check_mode_and_with_free_gpus(base, monkeypatch):
    install = CASES['install']['args']
    systemd = FakeSystemdAndGpu(held_mib=20000, active=False)
    run(dict(base, state='restarted', restart='no'), monkeypatch, systemd)
    systemd.actions = []
    result, failed, dummy = run(dict(base, _ansible_check_mode=True, **install), monkeypatch, systemd)
    assert not failed and result['changed'] and result['actions'] == ['daemon-reload', 'enable'] and systemd.actions == []
    assert 'Restart=no' in open(result['unit_path']).read()  # check mode wrote nothing
    # free_gpus is for a start: with a reload only, nothing is stopped and no GPU holder is looked for
    args = dict(base, free_gpus={'timeout': 0.3, 'devices': '/dev/null*'}, **install)
    result, failed, dummy = run(args, monkeypatch, systemd)
    assert not failed and result['actions'] == ['daemon-reload', 'enable'] and 'gpus_freed' not in result
    assert systemd.active and not [c for c in systemd.calls if c[0].endswith('nvidia-smi')]


def test_restart_sec_zero_is_written(base, monkeypatch):
    result, failed, dummy = run(dict(base, restart='always', restart_sec=0), monkeypatch, FakeSystemd())
    assert not failed and 'RestartSec=0\n' in open(result['unit_path']).read()


def test_systemctl_calls_in_order(base, monkeypatch):
    """The order of every systemctl call of a first start with enabled=true: read, write, reload, query, act."""
    result, failed, calls = run(dict(base, enabled=True), monkeypatch, FakeSystemd())
    assert not failed
    assert [c[1:] for c in calls] == [['--version'], ['daemon-reload'], ['is-enabled', 'sglang-trial.service'],
                                      ['is-active', 'sglang-trial.service'], ['enable', 'sglang-trial.service'],
                                      ['start', 'sglang-trial.service'],
                                      ['show', '--property=InvocationID', '--value', 'sglang-trial.service']]
