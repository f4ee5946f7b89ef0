# -*- coding: utf-8 -*-
"""await_server_ready as Ansible runs it: a program that reads its arguments from a file and prints its result.

What it decides is tested on module_utils/_readiness.py (tests/unit/plugins/module_utils/test__readiness.py);
here only what the module itself holds: its argument spec, and that main() hands the options to the wait.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest

MODULE = 'ansible_collections.llmserve.sglang.plugins.modules.await_server_ready'
# the folder that holds ansible_collections/ (this file is 4 folders under the collection, the collection 3 under it)
COLLECTIONS_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *(['..'] * 7)))


def run_program(tmp_path, args):
    path = tmp_path / 'args.json'
    path.write_text(json.dumps({'ANSIBLE_MODULE_ARGS': args}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([COLLECTIONS_ROOT] + sys.path))
    proc = subprocess.run([sys.executable, '-m', MODULE, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env, timeout=120, check=False)
    try:
        return json.loads(proc.stdout.decode('utf-8'))
    except ValueError:
        raise AssertionError('no JSON result: %r %r' % (proc.stdout[-2000:], proc.stderr[-2000:]))


@pytest.mark.parametrize('args', [{}, {'pid': 1}], ids=['nothing', 'only pid'])
def test_needs_service_or_log(tmp_path, args):
    res = run_program(tmp_path, args)
    assert res['failed'] and 'service_name, log_path' in res['msg']


def test_options_reach_the_wait(tmp_path):
    """A dead PID and an empty log file: the verdict comes back as the module's result."""
    log = tmp_path / 'sglang.log'
    log.write_text('')
    res = run_program(tmp_path, {'log_path': str(log), 'pid': 2 ** 22 + 12345, 'tail_lines': 3, 'api_key': 'k3y'})
    assert res['status'] in ('crashed', 'killed') and res['reason'] == res['status']
    assert res['changed'] is False and res['log_said_anything'] is False and res['pid'] == 2 ** 22 + 12345
    assert res['invocation']['module_args']['tail_lines'] == 3
    assert res['invocation']['module_args']['api_key'] == 'VALUE_SPECIFIED_IN_NO_LOG_PARAMETER'


def test_bad_option_value_fails(tmp_path):
    res = run_program(tmp_path, {'log_path': str(tmp_path / 'x'), 'poll_interval': 2})
    assert res['failed'] and res['msg'] == 'poll_interval must be in (0, 1] seconds, got 2.0'
