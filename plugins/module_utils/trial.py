# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Turning module results into the report's candidate entries, and choosing the winner.

Pure functions used by the collection's filter plugins (controller side) and tested with plain data.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

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
    broken = benchmark_failures(res['benchmark'])
    if smoke_result.get('ok') and broken:
        # answered the smoke test, then failed requests under load (for example the server died): not ready
        res.update(outcome='failed', reason='unhealthy', evidence=broken)
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


def benchmark_value(benchmark, metric='output_throughput'):
    """The metric at the highest concurrency level measured, or None."""
    levels = (benchmark or {}).get('concurrency') or {}
    if not levels:
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


LOST_REASONS = ('http_error', 'timeout', 'empty', 'nan')


def lost_server(smoke_result):
    """Whether the smoke test or the benchmark may have lost the server (no answer, an HTTP error, failed requests
    under load): then the server's own log and process say how it ended, not the HTTP error."""
    if not isinstance(smoke_result, dict) or smoke_result.get('skipped') or not smoke_result:
        return False
    if smoke_result.get('ok'):
        return bool(benchmark_failures(smoke_result.get('benchmark')))
    return smoke_result.get('reason') in LOST_REASONS


def after_smoke(await_result, postmortem):
    """The await result to judge the trial by: the post-mortem's when it found the server failed (crashed, killed,
    nan, oom, unhealthy...), else the await's (the server still answers: the smoke test's own reason stands)."""
    if isinstance(postmortem, dict) and not postmortem.get('skipped') and postmortem.get('status') \
            and postmortem.get('status') not in ('ready', 'loading'):
        out = dict(postmortem)
        out['phase'] = 'after_smoke'
        return out
    return await_result
