# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's readiness loop: calls until a decision, passes the cursor back, prints progress, waits as a group."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading

import pytest

from ansible_collections.llmserve.sglang.plugins.plugin_utils import await_loop

GROUP = {'name': 'g', 'head': 'h0', 'nnodes': 2,
         'members': [{'host': 'h0', 'rank': 0}, {'host': 'h1', 'rank': 1}]}


class Script(object):
    """A module stand-in that answers from a list and records (step, cursor) of each call."""

    def __init__(self, answers, pause=0.0):
        self.answers = list(answers)
        self.calls = []
        self.pause = pause

    def __call__(self, step, cursor):
        self.calls.append((step, cursor))
        if self.pause:
            threading.Event().wait(self.pause)
        return self.answers.pop(0)


def loading(n, milestone='Load weight begin'):
    return {'status': 'loading', 'cursor': 'c%d' % n, 'milestone': milestone, 'elapsed': 10.0 * n}


def test_calls_until_a_decision_and_passes_the_cursor_back():
    call = Script([loading(1), loading(2), {'status': 'ready', 'cursor': 'c3', 'elapsed': 31.0}])
    out = await_loop.AwaitLoop(call, 10, say=lambda line: None, label='known-good', first_cursor='c0').run()
    assert out['status'] == 'ready'
    assert [c for dummy, c in call.calls] == ['c0', 'c1', 'c2']
    assert all(step == await_loop.SINGLE_STEP for step, dummy in call.calls)


@pytest.mark.parametrize('answer', [{'status': 'crashed', 'reason': 'crashed'}, {'failed': True, 'msg': 'bad option'}])
def test_a_failure_or_a_failed_call_ends_it(answer):
    call = Script([loading(1), answer, loading(3)])
    out = await_loop.AwaitLoop(call, 10, say=lambda line: None, label='x').run()
    assert out == answer
    assert len(call.calls) == 2


def test_progress_lines_while_a_call_is_in_flight():
    lines = []
    call = Script([loading(1, 'Load weight end'), {'status': 'ready', 'elapsed': 12.0}], pause=0.25)
    await_loop.AwaitLoop(call, 0.05, say=lines.append, label='cutlass').run()
    assert len(lines) >= 4
    assert lines[0].startswith('cutlass: starting, ')
    assert any(line.startswith('cutlass: Load weight end, 1') for line in lines)


def test_progress_line_counts_from_the_last_result():
    assert await_loop.progress_line('a', {'milestone': 'Capture target decode CUDA graph begin', 'elapsed': 40.0}, 2.5) == \
        'a: Capture target decode CUDA graph begin, 42.5 s'
    assert await_loop.progress_line('a', {'status': 'loading'}, 0) == 'a: starting, 0.0 s'


def test_a_group_member_stops_loading_when_another_rank_failed(tmp_path):
    other = await_loop.GroupBoard(str(tmp_path), GROUP, 'h1', key='cand')
    other.post({'status': 'crashed', 'reason': 'crashed', 'evidence': ['Traceback']})
    board = await_loop.GroupBoard(str(tmp_path), GROUP, 'h0', key='cand')
    call = Script([loading(1), loading(2)])
    out = await_loop.AwaitLoop(call, 10, say=lambda line: None, label='cand', shared=board).run()
    assert out['status'] == 'loading'
    assert len(call.calls) == 1 and call.calls[0][0] == 10
    assert board.results()['h0']['status'] == 'loading'


def test_a_ready_member_is_watched_until_the_group_is_ready(tmp_path):
    board = await_loop.GroupBoard(str(tmp_path), GROUP, 'h1', key='cand')
    head = await_loop.GroupBoard(str(tmp_path), GROUP, 'h0', key='cand')

    class HeadReadyOnSecondCall(Script):
        def __call__(self, step, cursor):
            if len(self.calls) == 1:
                head.post({'status': 'ready'})
            return Script.__call__(self, step, cursor)

    call = HeadReadyOnSecondCall([{'status': 'ready', 'elapsed': 5.0}, {'status': 'ready', 'elapsed': 5.1},
                                  {'status': 'ready', 'elapsed': 5.2}])
    out = await_loop.AwaitLoop(call, 0.01, say=lambda line: None, label='cand', shared=board).run()
    assert out['status'] == 'ready'
    assert len(call.calls) == 2


def test_a_ready_member_alone_stops_at_the_wait_limit(tmp_path):
    board = await_loop.GroupBoard(str(tmp_path), GROUP, 'h1', key='cand')
    call = Script([{'status': 'ready', 'elapsed': 5.0}, {'status': 'ready', 'elapsed': 20.0}])
    out = await_loop.AwaitLoop(call, 0.01, say=lambda line: None, label='cand', shared=board, limit=15).run()
    assert out['elapsed'] == 20.0
    assert len(call.calls) == 2


def test_boards_of_other_candidates_are_apart(tmp_path):
    await_loop.GroupBoard(str(tmp_path), GROUP, 'h1', key='first').post({'status': 'crashed'})
    board = await_loop.GroupBoard(str(tmp_path), GROUP, 'h0', key='second')
    assert board.results() == {'h0': {}, 'h1': {}}
    assert not board.group_failed()
    assert board.group_waiting()
