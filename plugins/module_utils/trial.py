# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Turning module results into the report's candidate entries, choosing the winner, and judging a load test.

Pure functions used by the collection's filter plugins (controller side) and tested with plain data.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.module_utils import smoke

# await_server_ready statuses that are failures, mapped to the report contract's reasons
AWAIT_REASONS = {
    'crashed': 'crashed', 'killed': 'killed', 'oom': 'oom', 'hang': 'hang', 'timeout': 'timeout',
    'unhealthy': 'unhealthy', 'nan': 'nan',
}


def init_results(plan):
    """Report entries for every plan entry, in plan order (a dict keeps the order)."""
    out = {}
    for entry in plan:
        planned = entry.get('outcome') == 'planned'
        out[entry['name']] = {
            'name': entry['name'],
            'args': list(entry.get('args') or []),
            'config_key': entry.get('config_key'),
            'known_good': bool(entry.get('known_good')),
            'force': bool(entry.get('force')),
            'outcome': 'skipped',
            'reason': 'not_needed' if planned else entry.get('reason'),
            'evidence': ('an earlier candidate was selected' if planned else entry.get('evidence')),
            'seconds': 0.0,
            'smoke': None,
            'benchmark': None,
            'screen': None,       # set by the screen (dummy weights) when it ran
            'diagnosis': None,    # set for a failed candidate (failure signatures)
        }
    return out


def _first(lines):
    if isinstance(lines, (list, tuple)):
        return lines[0] if lines else None
    return lines


def outcome(await_result, smoke_result=None, seconds=0.0):
    """The report fields for one tried candidate."""
    await_result = await_result or {}
    status = await_result.get('status')
    res = {'seconds': round(float(seconds), 2), 'smoke': None, 'benchmark': None,
           'ready_seconds': await_result.get('seconds')}
    if await_result.get('ranks'):
        # a multi-node group: which rank decided, and how each member ended
        res['rank'], res['rank_host'] = await_result.get('rank'), await_result.get('host')
        res['ranks'] = [{'rank': r.get('rank'), 'host': r.get('host'), 'status': r.get('status'),
                         'reason': r.get('reason'), 'evidence': _first(r.get('evidence'))}
                        for r in await_result['ranks']]
    if status != 'ready' and smoke_result and smoke_result.get('ok') and await_result.get('phase') == 'after_smoke':
        failure = benchmark_failure(smoke_result.get('benchmark'), await_result)
        if failure and failure['by'] == 'benchmark':
            # the load test's own input ended the server after it answered the smoke test: not this configuration's
            status = 'ready'
    if status != 'ready':
        reason = await_result.get('reason') or AWAIT_REASONS.get(status) or status or 'unknown'
        evidence = _first(await_result.get('evidence')) or await_result.get('msg')
        if status == 'killed' and await_result.get('signal'):
            evidence = evidence or 'ended by signal %s with an empty log' % await_result.get('signal')
        res.update(outcome='failed', reason=reason, evidence=evidence,
                   log_tail=list(await_result.get('log_tail') or [])[-15:])
        return res
    smoke_result = smoke_result or {}
    res['smoke'] = {'ok': smoke_result.get('ok'), 'reason': smoke_result.get('reason'),
                    'checks': [{'name': c.get('name'), 'ok': c.get('ok'), 'text': c.get('text')}
                               for c in smoke_result.get('checks') or []]}
    res['benchmark'] = smoke_result.get('benchmark')
    failure = benchmark_failure(res['benchmark'], await_result)
    if failure:
        res['benchmark'] = dict(res['benchmark'], failure=failure)
    if smoke_result.get('ok') and failure and failure['by'] == 'benchmark':
        # the load test's own doing (refused requests, its input ended the server): ready, its figures not counted
        res.update(outcome='ready', reason=None,
                   evidence="benchmark not counted, not this configuration's fault: %s" % failure['msg'])
    elif smoke_result.get('ok') and failure:
        # answered the smoke test, then failed requests under load (for example the server died): not ready
        res.update(outcome='failed', reason='unhealthy', evidence=benchmark_failures(res['benchmark']))
    elif smoke_result.get('ok'):
        res.update(outcome='ready', reason=None, evidence=_first(await_result.get('evidence')))
    else:
        res.update(outcome='failed', reason=smoke_result.get('reason') or 'smoke_failed',
                   evidence=_first(smoke_result.get('evidence')) or smoke_result.get('msg'))
    return res


def benchmark_failures(benchmark):
    """'benchmark: N of M requests failed at concurrency C (first error)' for the first level with failures, else None."""
    levels = (benchmark or {}).get('concurrency') or {}
    for level in sorted(levels, key=int):
        figures = levels[level] or {}
        failed = figures.get('failed') or 0
        if failed:
            errors = figures.get('errors') or []
            return 'benchmark: %s of %s requests failed at concurrency %s%s' % (
                failed, failed + (figures.get('completed') or 0), level, (': %s' % errors[0]) if errors else '')
    return None


# what a server ends with when a request's input_ids go past its embedding table (SGLang does not check them):
# torch's CPU embedding, and the CUDA assert of the same lookup
INPUT_CRASHES = ('index out of range in self', 'srcIndex < srcSelectDimSize')


def _lines(result):
    """The evidence and log tail lines of an await_server_ready result."""
    result = result if isinstance(result, dict) else {}
    evidence = result.get('evidence')
    lines = list(evidence) if isinstance(evidence, (list, tuple)) else [evidence]
    return [str(line) for line in lines + list(result.get('log_tail') or []) + [result.get('msg')] if line]


def input_crash(await_result):
    """The line saying that the server ended on an input id past its vocabulary, or None."""
    if not isinstance(await_result, dict) or await_result.get('status') in (None, 'ready', 'loading'):
        return None
    for line in _lines(await_result):
        if any(pattern in line for pattern in INPUT_CRASHES):
            return line.strip()
    return None


def benchmark_failure(benchmark, await_result=None):
    """What went wrong in a load test (smoke_generate's ``benchmark``), or None when every request completed.

    ``await_result``: what the server said afterwards (await_server_ready's result, the trial's post-mortem), if
    asked. Returns ``{level, failed, total, rejected, first_error, server_answers, by, msg}``: the first level with
    failed requests, the failed and the sent requests of every level, whether the server still answered after them (the post-mortem's
    status, else the module's own ``health`` check; None when not asked), and ``by``: ``benchmark`` when the
    load test did it (every failed request refused as a bad request, an HTTP 4xx or a streamed
    ``invalid_request_error``, or the server ended on an input id past its vocabulary), else ``server``.
    """
    levels = (benchmark or {}).get('concurrency') or {}
    failed_levels = [lv for lv in sorted(levels, key=int) if (levels[lv] or {}).get('failed')]
    crash = input_crash(await_result) if levels or (benchmark or {}).get('interrupted') else None
    if not failed_levels and not crash:
        return None
    first = levels[failed_levels[0]] if failed_levels else {}
    failed = sum(levels[lv].get('failed') or 0 for lv in failed_levels)
    rejected = sum(levels[lv].get('rejected') or 0 for lv in failed_levels)
    health = (benchmark or {}).get('health') or {}
    answers = health.get('answers') if 'answers' in health else None
    if isinstance(await_result, dict) and await_result.get('status') not in (None, 'ready', 'loading'):
        answers = False
    out = {'level': failed_levels[0] if failed_levels else None, 'failed': failed,
           'total': failed + sum((levels[lv] or {}).get('completed') or 0 for lv in levels),
           'rejected': rejected, 'first_error': first.get('first_error') or _first(first.get('errors')),
           'server_answers': answers,
           'by': 'benchmark' if crash or (failed and rejected == failed) else 'server'}
    out['msg'] = _failure_msg(out, benchmark, crash, health)
    return out


def _failure_msg(failure, benchmark, crash, health):
    parts = []
    if failure['failed']:
        parts.append('%s of %s requests failed (first at concurrency %s: %s)' % (
            failure['failed'], failure['total'], failure['level'], failure['first_error'] or 'no error text'))
    if crash:
        parts.append("the server ended on the load test's input (a token id past the model's vocabulary: %s)" % crash)
    elif failure['rejected'] and failure['by'] == 'benchmark':
        parts.append('the server refused them as bad requests: check the load test settings (input_len + output_len '
                     'within the context length, vocab_size)')
    if failure['server_answers'] is False:
        parts.append('the server stopped answering%s' % (
            ' (%s)' % health['detail'] if not crash and health.get('detail') else ''))
    elif failure['server_answers']:
        parts.append('the server still answers')
    not_run = (benchmark or {}).get('not_run') or []
    if not_run:
        parts.append('concurrency %s not run' % ', '.join(not_run))
    return '; '.join(parts)


def benchmark_verdict(result):
    """Whether a load test run on its own (playbooks/benchmark.yml) failed: ``{'failed': bool, 'msg': str}``.

    ``result``: smoke_generate's registered result. It failed when the smoke checks failed (no load test ran), or
    when requests failed: ``msg`` says how many, the first error, whether the server still answers, and whether the
    load test's own requests were at fault (see :func:`benchmark_failure`). A skipped task has not failed.
    """
    if not isinstance(result, dict) or result.get('skipped'):
        return {'failed': False, 'msg': 'skipped'}
    if result.get('failed'):
        return {'failed': True, 'msg': 'smoke_generate failed: %s' % (result.get('msg') or 'no message')}
    if not result.get('ok'):
        return {'failed': True, 'msg': 'the smoke checks failed (%s): %s; no load test ran' % (
            result.get('reason'), '; '.join(result.get('evidence') or []) or 'no evidence')}
    if not isinstance(result.get('benchmark'), dict):
        return {'failed': False, 'msg': 'the smoke checks passed; no load test ran (check mode)'}
    failure = benchmark_failure(result['benchmark'])
    if failure:
        return {'failed': True, 'msg': 'benchmark: %s' % failure['msg']}
    levels = result['benchmark'].get('concurrency') or {}
    return {'failed': False, 'msg': 'every request completed (%s)' % ', '.join(
        'concurrency %s: %s' % (lv, (levels[lv] or {}).get('completed')) for lv in sorted(levels, key=int))}


def benchmark_value(benchmark, metric='output_throughput'):
    """The metric at the highest concurrency level measured, or None (also for a benchmark whose own requests
    failed: its figures do not measure the configuration)."""
    levels = (benchmark or {}).get('concurrency') or {}
    if not levels or ((benchmark or {}).get('failure') or {}).get('by') == 'benchmark':
        return None
    top = max(levels, key=int)
    value = levels[top].get(metric)
    return None if value is None else float(value)


def select(by_name, selection='first_ready', metric='output_throughput'):
    """The name of the candidate to serve, or None.

    first_ready: the first ready entry in plan order. fastest: the ready entry with the highest metric
    (ties and missing figures fall back to plan order).
    """
    ready = [r for r in by_name.values() if r.get('outcome') == 'ready']
    if not ready:
        return None
    if selection == 'fastest':
        best = None
        best_value = None
        for r in ready:
            value = benchmark_value(r.get('benchmark'), metric)
            if value is not None and (best_value is None or value > best_value):
                best, best_value = r, value
        if best is not None:
            return best['name']
    return ready[0]['name']


def verified_by_trial(outcome, install, check_mode=False):
    """Whether the served process is the very one the last full trial awaited and smoke-tested in this run.

    ``outcome``: backend_trial's ``backend_trial_outcome`` (``selected``, ``last_started``, ``last_invocation``);
    ``install``: sglang_launch's result when it installed the chosen configuration as the service. True only when
    the chosen candidate was the last one started, the unit's InvocationID is the one the trial saw (not empty),
    and the install neither started, stopped nor restarted anything. In check mode nothing is known: False.
    """
    outcome = outcome or {}
    install = install or {}
    invocation = outcome.get('last_invocation') or ''
    return bool(not check_mode
                and outcome.get('selected') not in (None, '')
                and outcome.get('last_started') == outcome.get('selected')
                and invocation
                and install.get('invocation_id') == invocation
                and not set(install.get('actions') or []) & set(['start', 'restart', 'stop']))


def check_mode_results(by_name, planned):
    """Check mode: the report entries with each planned candidate marked with the position a run would try it at.

    ``planned``: the host's planned plan entries in order. Nothing was started, so nothing is ready or failed:
    each stays ``skipped``, with reason ``check_mode`` and ``would_try`` = 1, 2, ...
    """
    out = dict((name, dict(entry)) for name, entry in (by_name or {}).items())
    for position, entry in enumerate(planned or [], 1):
        result = out.get(entry.get('name'))
        if result is None or result.get('outcome') != 'skipped' or result.get('reason') != 'not_needed':
            continue
        result.update(reason='check_mode', would_try=position,
                      evidence='would be tried %s%s (check mode: nothing was started)'
                               % ('first' if position == 1 else 'at position %d' % position,
                                  ', the fallback' if entry.get('known_good') else ''))
    return out


def fallback_used(results, selected, final_state):
    """Whether the known-good configuration serves because a candidate before it was tried in this run and failed.

    False when it was kept without a trial (``reused``), when the user's candidates were all skipped by the plan
    (arch, flags, the record) and when something else serves.
    """
    if final_state != 'serving' or not selected:
        return False
    results = list(results or [])
    chosen = [r for r in results if r.get('name') == selected]
    if not chosen or not chosen[0].get('known_good') or chosen[0].get('reused'):
        return False
    before = results[:results.index(chosen[0])]
    return any(r.get('outcome') == 'failed' and not r.get('known_good') for r in before)


LOST_REASONS = smoke.LOST_REASONS


def lost_server(smoke_result):
    """Whether the smoke test or the benchmark may have lost the server (no answer, an HTTP error, failed requests
    under load): then the server's own log and process say how it ended, not the HTTP error. Not when the smoke
    test's own watch already said how (its ``server``)."""
    if not isinstance(smoke_result, dict) or smoke_result.get('skipped') or not smoke_result:
        return False
    if smoke_result.get('server'):
        return False
    if smoke_result.get('ok'):
        return bool(benchmark_failures(smoke_result.get('benchmark')))
    return smoke_result.get('reason') in LOST_REASONS


def after_smoke(await_result, postmortem, smoke_result=None):
    """The await result to judge the trial by: the post-mortem's when it found the server failed (crashed, killed,
    nan, oom, unhealthy...), else the await's (the server still answers: the smoke test's own reason stands). With
    no post-mortem, the smoke test's own watch's verdict (its ``server``) is the post-mortem."""
    ran = isinstance(postmortem, dict) and not postmortem.get('skipped') and postmortem.get('status')
    if not ran and isinstance(smoke_result, dict) and isinstance(smoke_result.get('server'), dict):
        postmortem = smoke_result['server']
    if isinstance(postmortem, dict) and not postmortem.get('skipped') and postmortem.get('status') \
            and postmortem.get('status') not in ('ready', 'loading'):
        out = dict(postmortem)
        out['phase'] = 'after_smoke'
        return out
    return await_result
