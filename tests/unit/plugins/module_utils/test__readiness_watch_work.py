# -*- coding: utf-8 -*-
"""_readiness.watch_work: a work (the smoke test's requests) run while the server's process and log are watched."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import threading

import pytest

from ansible_collections.llmserve.sglang.plugins.module_utils import _readiness
from ansible_collections.llmserve.sglang.plugins.module_utils import smoke
from ansible_collections.llmserve.sglang.tests.unit.plugins.module_utils.test__readiness import (
    CRASH, READY, FakeModule, Exited, write)

LOST = [{'name': 'capital', 'ok': False, 'reason': 'http_error', 'detail': 'no HTTP answer: reset'}]
ANSWERED = [{'name': 'capital', 'ok': True, 'reason': None, 'detail': ''}]


def options(log):
    return {'log_path': str(log), 'pid': os.getpid(), 'timeout': 30}


def module():
    return FakeModule({})


def test_a_work_that_answers_is_its_value_and_no_verdict(tmp_path):
    log = tmp_path / 'sglang.log'
    write(str(log), READY + '\n')
    value, verdict = _readiness.watch_work(module(), options(log), lambda: ANSWERED, smoke.may_have_lost)
    assert value == ANSWERED
    assert verdict is None


def test_a_crash_during_the_work_is_the_verdict_without_waiting_for_the_request(tmp_path):
    """The request hangs (as SGLang 0.5.23 keeps it open after its scheduler failed); the traceback in the log
    decides, and the work is not waited for."""
    log = tmp_path / 'sglang.log'
    write(str(log), READY + '\n')
    release = threading.Event()

    def work():
        with open(str(log), 'a') as f:
            f.write(CRASH)
        release.wait(60)
        return ANSWERED
    try:
        value, verdict = _readiness.watch_work(module(), options(log), work, smoke.may_have_lost)
        still_in_flight = not release.is_set()
    finally:
        release.set()
    assert still_in_flight
    assert value is None
    assert verdict['status'] == 'crashed' and verdict['reason'] == 'crashed'
    assert any('contains no kernels runnable on sm120' in line for line in verdict['evidence']), verdict['evidence']


def test_a_lost_work_then_a_crash_line_is_the_verdict_with_the_work_s_value(tmp_path):
    log = tmp_path / 'sglang.log'
    write(str(log), READY + '\n')

    def work():
        with open(str(log), 'a') as f:
            f.write(CRASH)
        return LOST
    value, verdict = _readiness.watch_work(module(), options(log), work, smoke.may_have_lost)
    assert value == LOST
    assert verdict['status'] == 'crashed'


def test_a_lost_work_with_nothing_in_the_log_leaves_the_verdict_to_later(tmp_path):
    """No death and no fatal line within probe_grace: no verdict (the trial's post-mortem looks again)."""
    log = tmp_path / 'sglang.log'
    write(str(log), READY + '\n')
    value, verdict = _readiness.watch_work(module(), options(log), lambda: LOST, smoke.may_have_lost)
    assert value == LOST
    assert verdict is None


def test_an_error_in_the_work_is_raised_in_the_caller(tmp_path):
    log = tmp_path / 'sglang.log'
    write(str(log), READY + '\n')

    def work():
        raise KeyError('boom')
    with pytest.raises(KeyError):
        _readiness.watch_work(module(), options(log), work, smoke.may_have_lost)


def test_bad_watch_options_fail_the_module(tmp_path):
    log = tmp_path / 'sglang.log'
    write(str(log), READY + '\n')
    with pytest.raises(Exited) as exc:
        _readiness.watch_work(module(), dict(options(log), timeout=0), lambda: ANSWERED, smoke.may_have_lost)
    assert exc.value.result['failed'] and 'timeout must be greater than 0' in exc.value.result['msg']


def test_watch_options_are_await_server_ready_s_for_a_running_server():
    p = _readiness.watch_options({'service_name': 'sglang', 'cursor': 'c1', 'timeout': 120})
    assert p['require_ready_line'] is False
    assert (p['service_name'], p['cursor'], p['timeout']) == ('sglang', 'c1', 120)
    assert p['poll_interval'] == _readiness.argument_spec()['poll_interval']['default']
    assert p['probe_grace'] == _readiness.TIMING['probe_grace']
