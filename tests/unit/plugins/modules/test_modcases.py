# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""modcases, the YAML case runner, on a small module made here: a case passes only when everything it says holds."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading
import types

import pytest

from ansible.module_utils import basic
from ansible_collections.llmserve.sglang.plugins.module_utils import serving_group
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_http
from ansible_collections.llmserve.sglang.tests.unit.plugins.modules.modcases import run_case


def _main():
    """Runs `echo NAME` (twice with twice: true, the second in a thread while the first runs), asks resolve(NAME)
    and GET URL when given, writes NAME into the file PATH; name: fail fails."""
    module = basic.AnsibleModule(argument_spec=dict(
        name=dict(type='str', required=True), twice=dict(type='bool', default=False), url=dict(type='str'),
        path=dict(type='path')), supports_check_mode=True)
    p = module.params
    if p['name'] == 'fail':
        module.fail_json(msg='asked to fail')
    second = threading.Thread(target=module.run_command, args=(['echo', p['name'], 'again'],)) if p['twice'] else None
    if second:
        second.start()
    rc, out, dummy = module.run_command(['echo', p['name']])
    if second:
        second.join()
    result = dict(changed=False, rc=rc, out=out, addresses=serving_group.resolve(p['name']))
    if p['url']:
        result['status'] = sglang_http.get(p['url']).status
    if p['path'] and not module.check_mode:
        with open(p['path'], 'w') as handle:
            handle.write(p['name'])
        result['changed'] = True
    module.exit_json(**result)


MODULE = types.ModuleType('fake_module')
MODULE.main = _main
GOOD = {
    'id': 'good',
    'input': {'name': 'gpu01', 'url': 'http://127.0.0.1:1/health', 'path': '${tmp}/out'},
    'run_command': [{'command': ['echo', 'gpu01'], 'out': 'gpu01\n'}],
    'patches': {'serving_group.resolve': {'return': ['10.0.0.11'], 'calls': [{'args': ['gpu01'], 'kwargs': {}}]}},
    'http': [{'url': 'http://127.0.0.1:1/health', 'method': 'GET', 'status': 200, 'text': ''}],
    'output': {'changed': True, 'rc': 0, 'out': 'gpu01\n', 'addresses': ['10.0.0.11'], 'status': 200},
    'files_after': {'out': 'gpu01'},
}


def run(case, tmp_path, monkeypatch, capsys):
    run_case(MODULE, case, str(tmp_path), monkeypatch, capsys)


def test_a_case_that_holds_passes(tmp_path, monkeypatch, capsys):
    run(GOOD, tmp_path, monkeypatch, capsys)


def test_input_parts_are_merged_in_order(tmp_path, monkeypatch, capsys):
    run(dict(GOOD, input=[dict(GOOD['input'], name='gpu02'), {'name': 'gpu01'}]), tmp_path, monkeypatch, capsys)
    with pytest.raises(AssertionError, match="unexpected command"):
        run(dict(GOOD, input=[GOOD['input'], {'name': 'gpu02'}]), tmp_path, monkeypatch, capsys)


@pytest.mark.parametrize('change, complaint', [
    ({'output': dict(GOOD['output'], rc=1)}, 'result.rc: want 1, got 0'),
    ({'output': dict(GOOD['output'], changed=False)}, 'result.changed: want False, got True'),
    ({'output': dict(GOOD['output'], addresses=['10.0.0.11', '10.0.0.12'])}, 'result.addresses: want 2 item'),
    ({'output': dict(GOOD['output'], absent_key=1)}, "no key 'absent_key'"),
    ({'output_excludes': ['gpu01']}, "result holds 'gpu01'"),
    ({'output_absent': ['status']}, "result has key 'status'"),
    ({'run_command': [{'command': ['echo', 'gpu02']}]}, "unexpected command ['echo', 'gpu01']"),
    ({'run_command': GOOD['run_command'] + [{'command': ['echo', 'more']}]}, "command expected 1 time(s), made 0"),
    ({'run_command': [{'command': ['echo', 'gpu01'], 'kwargs': {'check_rc': True}}]}, "kwargs: no key 'check_rc'"),
    ({'run_command': [{'command': ['echo', 'gpu01'], 'repeat': 2}]}, "command expected 2 time(s), made 1"),
    ({'http': []}, 'unexpected request'),
    ({'http': [dict(GOOD['http'][0], headers={'Authorization': 'Bearer k'})]}, "headers: no key 'Authorization'"),
    ({'patches': {'serving_group.resolve': {'return': ['10.0.0.11'], 'calls': []}}}, 'serving_group.resolve calls'),
    ({'files_after': {'out': 'gpu02'}}, "file out: content 'gpu01', want 'gpu02'"),
    ({'files_after': {'out': 'absent'}}, 'file out: want absent'),
    ({'check_mode': True}, 'file out: missing'),
])
def test_a_case_that_does_not_hold_fails(change, complaint, tmp_path, monkeypatch, capsys):
    with pytest.raises(AssertionError) as caught:
        run(dict(GOOD, **change), tmp_path, monkeypatch, capsys)
    assert complaint in str(caught.value)


def test_a_failure_must_be_expected(tmp_path, monkeypatch, capsys):
    case = {'id': 'fails', 'input': {'name': 'fail'}}
    with pytest.raises(AssertionError, match='result.failed: want False, got True'):
        run(case, tmp_path, monkeypatch, capsys)
    run(dict(case, output={'failed': True, 'msg': 'to fail'}), tmp_path, monkeypatch, capsys)
    with pytest.raises(AssertionError, match="'to pass' is not in 'asked to fail'"):
        run(dict(case, output={'failed': True, 'msg': 'to pass'}), tmp_path, monkeypatch, capsys)


def test_while_holds_only_for_calls_that_overlap(tmp_path, monkeypatch, capsys):
    calls = [{'id': 'first', 'while': 'second', 'command': ['echo', 'gpu01']},
             {'id': 'second', 'while': 'first', 'command': ['echo', 'gpu01', 'again']}]
    case = {'id': 'twice', 'input': {'name': 'gpu01', 'twice': True}, 'unordered': True, 'run_command': calls,
            'patches': {'serving_group.resolve': {'return': []}}}
    run(case, tmp_path, monkeypatch, capsys)
    monkeypatch.setattr('ansible_collections.llmserve.sglang.tests.unit.plugins.modules.modcases.WHILE_WAIT', 0.2)
    serial = dict(case, input={'name': 'gpu01'}, run_command=[calls[0], dict(calls[1], command=['echo', 'x'])])
    with pytest.raises(AssertionError, match='second did not start while it ran'):
        run(serial, tmp_path, monkeypatch, capsys)


def test_tokens_are_replaced(tmp_path, monkeypatch, capsys):
    case = dict(GOOD, processes={'sleeper': {}}, input=dict(GOOD['input'], name='${pid:sleeper}'),
                run_command=[{'command': ['echo', {'re': '^[0-9]+$'}], 'out': 'pid ${pid:sleeper}'}],
                patches={'serving_group.resolve': {'return': '${json:data/sglang/server-args-0.5.23.json#sglang_version}'}},
                output=dict(GOOD['output'], out={'re': '^pid [0-9]+$'}, addresses=None),
                files_after={'out': {'content': str(1)}})
    with pytest.raises(AssertionError) as caught:
        run(case, tmp_path, monkeypatch, capsys)
    problems = str(caught.value).split('\nresult: ', maxsplit=1)[0].splitlines()
    assert problems[0] == "result.addresses: want None, got '0.5.23'"  # the data file's value, whole
    assert problems[1].startswith("file out: content '") and problems[1].endswith("', want '1'")  # the PID
    assert len(problems) == 2  # the command and its output matched with the PID in them
