# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A candidate's report entry: its schema (:data:`ENTRY`), and :func:`record`, which writes each stage into it.

The backend_trial role starts an entry for every plan entry (:func:`trial.init_results`); each stage that runs a
candidate then records what it found with :func:`record`: ``reuse`` (the serving configuration still answers),
``screen`` (dummy weights), ``trial`` (the full trial), and ``screen_launch_error`` / ``trial_launch_error`` (the
rescue of either). A failed entry gets its diagnosis (:mod:`diagnosis`) in the same call. The entries, in plan
order, are the ``candidates`` of the report and the results the record keeps.

Pure functions, stdlib only; the ``candidate_entry`` filter calls :func:`record`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.module_utils import diagnosis
from ansible_collections.llmserve.sglang.plugins.module_utils import screen
from ansible_collections.llmserve.sglang.plugins.module_utils import trial

STAGES = ('reuse', 'screen', 'screen_launch_error', 'trial', 'trial_launch_error')
# the stages whose failure is diagnosed (a reuse only keeps a configuration that answered)
DIAGNOSED = STAGES[1:]
_ALL = ('init',) + STAGES

# The report's candidate entry: (key, type, the stages that set it, what it holds). ``init`` is
# trial.init_results (every plan entry has each of its keys), ``check_mode`` trial.check_mode_results; the others
# are the stages of record(). A type ``a|b`` takes either; ``number`` is an int or a float.
ENTRY = (
    ('name', 'str', ('init',), "the plan entry's name"),
    ('args', 'list', ('init',), "the candidate's own extra arguments"),
    ('config_key', 'str|null', ('init',), "the key of its configuration in the host's record"),
    ('known_good', 'bool', ('init',), 'the known-good configuration (the fallback, tried last)'),
    ('force', 'bool', ('init',), 'tried, and screened, even when the record knows it'),
    ('outcome', 'str', _ALL,
     'skipped (init, check mode), ready or failed; a screen that passed leaves it as it was'),
    ('reason', 'str|null', _ALL + ('check_mode',),
     "why: the plan's reason, not_needed, check_mode, launch_error, the await's or the smoke test's failure "
     '(crashed, killed, hang, timeout, garbage, ...), the screen\'s; null when ready'),
    ('evidence', 'str|null', _ALL + ('check_mode',), 'the line that says why'),
    ('seconds', 'number', ('init', 'reuse', 'screen', 'trial'),
     'seconds the trial took; reuse: the readiness check; a screen that failed: the screen'),
    ('smoke', 'dict|null', ('init', 'reuse', 'trial'),
     "the trial's smoke test {ok, reason, checks: [{name, ok, text}]}; reuse: smoke_generate's whole result"),
    ('benchmark', 'dict|null', ('init', 'trial'), "smoke_generate's benchmark, when it ran"),
    ('screen', 'dict|null', ('init', 'screen', 'screen_launch_error'),
     'the screen: {outcome (passed or failed), reason, evidence, seconds, milestone, layers}'),
    ('diagnosis', 'dict|null', ('init',) + DIAGNOSED,
     'a failed entry\'s diagnosis.diagnose(): {id, explanation, references, next_step, matched, title, flag_notes}, '
     'or id unknown with context and lines'),
    ('would_try', 'int', ('check_mode',), 'check mode: the position a run would try it at'),
    ('reused', 'bool', ('reuse',), 'kept without a trial: the serving configuration still answered'),
    ('log_tail', 'list', ('screen', 'trial'), "the last 15 log lines of a failed screen's or trial's await"),
    ('ready_seconds', 'number|null', ('trial',), "the trial's await's own seconds"),
    ('rank', 'int|null', ('trial',), 'a multi-node group: the rank whose result decided'),
    ('rank_host', 'str|null', ('trial',), 'a multi-node group: the host of that rank'),
    ('ranks', 'list', ('trial',), 'a multi-node group: {rank, host, status, reason, evidence} of each member'),
)

# what record() reads in ``results``, per stage (registered module results; ``failed``: ansible_failed_result)
RESULTS = {
    'reuse': ('await', 'smoke'),
    'screen': ('await',),
    'screen_launch_error': ('failed',),
    'trial': ('await', 'postmortem', 'smoke'),
    'trial_launch_error': ('failed',),
}

_TYPES = {'str': str, 'list': list, 'dict': dict, 'bool': bool, 'int': int, 'number': (int, float),
          'null': type(None)}


def keys_set_by(stage):
    """The keys of :data:`ENTRY` that ``stage`` may set."""
    return [key for key, _type, stages, _doc in ENTRY if stage in stages]


def schema_errors(entry):
    """What in ``entry`` does not follow :data:`ENTRY`: unknown keys and values of another type."""
    types = dict((key, kind) for key, kind, _stages, _doc in ENTRY)
    errors = []
    for key, value in (entry or {}).items():
        if key not in types:
            errors.append('%s: not a key of the entry' % key)
            continue
        kinds = types[key].split('|')
        if not isinstance(value, tuple(_TYPES[k] for k in kinds)) or (isinstance(value, bool) and 'bool' not in kinds):
            errors.append('%s: %s is not %s' % (key, type(value).__name__, types[key]))
    return errors


def combine(base, update, recursive=True):
    """Ansible's ``combine`` filter of two dicts (merge_hash, lists replaced), keys kept in their order.

    A base that is not a dict (absent, null) gives a copy of ``update``.
    """
    if not isinstance(base, dict) or base == {} or base == update:
        return dict(update)
    if update == {}:
        return base
    out = dict(base)
    for key, value in update.items():
        if recursive and key in out and isinstance(out[key], dict) and isinstance(value, dict):
            out[key] = combine(out[key], value, True)
        else:
            out[key] = value
    return out


def _ran(result):
    """A module result, or None when the task was skipped (or did not run)."""
    if not isinstance(result, dict) or result.get('skipped'):
        return None
    return result


def _launch_error(results):
    """The failure fields of a launch error: ansible_failed_result's ``msg``."""
    failed = results.get('failed')
    msg = failed.get('msg', 'unknown error') if isinstance(failed, dict) else 'unknown error'
    return {'outcome': 'failed', 'reason': 'launch_error', 'evidence': msg}


def _reuse(results, seconds, context):
    ready = results.get('await') or {}
    return ({'outcome': 'ready', 'reason': None, 'reused': True,
             'evidence': 'already serving, unit unchanged (%s)' % (ready.get('status'),),
             'seconds': ready.get('seconds'), 'smoke': results.get('smoke')}, None, None)


def _screen(results, seconds, context):
    ready = results.get('await')
    res = screen.outcome(ready, None, seconds, None, context.get('layers'))
    fields = {'screen': res}
    if res['outcome'] == 'failed':
        fields.update(outcome='failed', reason=res['reason'], evidence=res['evidence'], seconds=res['seconds'],
                      log_tail=(ready or {}).get('log_tail', [])[-15:])
    return fields, None, [ready]


def _screen_launch_error(results, seconds, context):
    failure = _launch_error(results)
    fields = dict(failure, screen=dict(failure, seconds=0.0, milestone=None, layers=context.get('layers')))
    return fields, failure, [results.get('failed')]   # the failure alone is diagnosed, not the whole entry


def _trial(results, seconds, context):
    smoke = results.get('smoke')
    judged = trial.after_smoke(results.get('await'), results.get('postmortem'), smoke)
    return trial.outcome(judged, _ran(smoke), seconds or 0.0), None, [judged, smoke]


def _trial_launch_error(results, seconds, context):
    return _launch_error(results), None, [results.get('failed')]


# stage -> (its builder, the phase its diagnosis names). A builder returns the fields to merge into the entry, what to
# diagnose in place of the entry (None: the entry) and the results the diagnosis reads (None: no diagnosis).
_STAGE = {
    'reuse': (_reuse, None),
    'screen': (_screen, 'screen'),
    'screen_launch_error': (_screen_launch_error, 'screen'),
    'trial': (_trial, 'trial'),
    'trial_launch_error': (_trial_launch_error, 'trial'),
}


def diagnose(entry, results, candidate, phase, context):
    """The diagnosis of a failed entry, from ``context``'s ``signatures``, ``arch`` and ``flags``.

    Raises ValueError for a bad flag table or a bad signature.
    """
    signatures = context.get('signatures')
    if isinstance(signatures, dict):
        signatures = signatures.get('signatures')
    try:
        flags = diagnosis.flag_table(context.get('flags'))
        return diagnosis.diagnose(signatures or [], entry, results, arch=context.get('arch'),
                                  candidate=candidate if isinstance(candidate, dict) else None, phase=phase,
                                  flags=flags)
    except diagnosis.SignatureError as e:
        raise ValueError('diagnose: bad failure signature: %s' % e)
    except ValueError as e:
        raise ValueError('diagnose: %s' % e)


def record(by_name, candidate, stage, results=None, seconds=None, context=None):
    """``by_name`` (the entries keyed by name, in plan order) with ``candidate``'s entry updated by ``stage``.

    ``candidate``: the plan entry (a dict with ``name``), or its name. ``stage``: one of :data:`STAGES`.
    ``results``: the stage's registered module results by the names in :data:`RESULTS` (``failed``: the rescue's
    ansible_failed_result); a skipped or absent one may be null. ``seconds``: how long the screen or the trial took
    (reuse records its await's own seconds). ``context``: ``signatures`` (the failure signature table), ``arch``,
    ``flags`` (the installed SGLang's flag table) for a diagnosis, and the screen's ``layers``.

    The stage's fields are merged into the entry like Ansible's ``combine(recursive=True)``; an entry that has
    failed then gets ``diagnosis``. The input is not changed. Raises ValueError for an unknown stage, a bad flag
    table or a bad signature.
    """
    if stage not in _STAGE:
        raise ValueError('candidate_entry: unknown stage %r (one of %s)' % (stage, ', '.join(STAGES)))
    build, phase = _STAGE[stage]
    context = context or {}
    name = candidate.get('name') if isinstance(candidate, dict) else candidate
    fields, subject, seen = build(results or {}, seconds, context)
    entry = combine((by_name or {}).get(name), fields)
    if seen is not None and entry.get('outcome') == 'failed':
        entry = combine(entry, {'diagnosis': diagnose(subject or entry, seen, candidate, phase, context)})
    out = dict(by_name or {})
    out[name] = entry
    return out
