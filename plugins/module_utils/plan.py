# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The candidate plan and the per-host record.

Pure functions, no Ansible imports: the ``sglang_plan`` and ``sglang_record`` modules are thin wrappers.

A *candidate* is one backend configuration to try (the public contract's ``sglang_candidates`` item).
The *plan* is the user's candidates in order, then the known-good configuration; each entry either
``planned`` or ``skipped`` with a reason (``arch_unsupported``, ``unknown_flag``, ``known_bad``) and
the evidence for it, decided before anything on the host changes.

The *record* is a JSON file on the host: GPU fingerprint + SGLang version + configuration key ->
outcome and figures, so that the next run skips what already failed on the same hardware and software.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re

CANDIDATE_KEYS = ('name', 'moe_runner_backend', 'fp4_gemm_backend', 'attention_backend',
                  'extra_args', 'env', 'force')

# structured candidate fields -> the SGLang flag they set
BACKEND_FLAGS = (
    ('moe_runner_backend', '--moe-runner-backend'),
    ('fp4_gemm_backend', '--fp4-gemm-backend'),
    ('attention_backend', '--attention-backend'),
)

ENV_NAME_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')
CANDIDATE_NAME_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.+-]*$')

RECORD_VERSION = 1
RECORD_MAX_ENTRIES = 200


class PlanError(ValueError):
    """Bad input: the message names the field and the fix."""


def _field(index, key):
    return 'sglang_candidates[%d].%s' % (index, key)


def normalize_candidate(cand, where):
    """Check one candidate dict and return it with every key present.

    ``where`` is how the error messages name it (``sglang_candidates[2]`` or ``sglang_known_good``).
    """
    if not isinstance(cand, dict):
        raise PlanError('%s must be a dict with keys %s, got %s: %r'
                        % (where, ', '.join(CANDIDATE_KEYS), type(cand).__name__, cand))
    unknown = sorted(set(cand) - set(CANDIDATE_KEYS))
    if unknown:
        raise PlanError('%s has unknown key(s) %s; allowed keys: %s'
                        % (where, ', '.join(unknown), ', '.join(CANDIDATE_KEYS)))
    name = cand.get('name')
    if not isinstance(name, str) or not name.strip():
        raise PlanError('%s.name is missing or empty: give each candidate a short unique name, e.g. "cutlass-moe"' % where)
    if not CANDIDATE_NAME_RE.match(name):
        raise PlanError('%s.name %r may only contain letters, digits, ".", "_", "+" and "-" (it names files and report rows)'
                        % (where, name))
    out = {'name': name}
    for key, flag in BACKEND_FLAGS:
        val = cand.get(key)
        if val is not None and (not isinstance(val, str) or not val.strip()):
            raise PlanError('%s.%s must be a backend name string (the value of %s), got %r' % (where, key, flag, val))
        out[key] = val
    extra = cand.get('extra_args') or []
    if not isinstance(extra, list) or not all(isinstance(a, (str, int, float)) for a in extra):
        raise PlanError('%s.extra_args must be a list of strings (one argv item each, e.g. ["--chunked-prefill-size", "8192"]), got %r'
                        % (where, extra))
    out['extra_args'] = [str(a) for a in extra]
    env = cand.get('env') or {}
    if not isinstance(env, dict):
        raise PlanError('%s.env must be a dict of environment variables, got %r' % (where, env))
    for k in env:
        if not isinstance(k, str) or not ENV_NAME_RE.match(k):
            raise PlanError('%s.env has an invalid variable name %r: names must match [A-Za-z_][A-Za-z0-9_]*'
                            % (where, k))
    out['env'] = dict((k, str(v)) for k, v in env.items())
    force = cand.get('force', False)
    if not isinstance(force, bool):
        raise PlanError('%s.force must be true or false, got %r' % (where, force))
    out['force'] = force
    return out


def normalize_candidates(candidates, known_good):
    """Return the ordered candidate list: the user's, then the known-good one (marked)."""
    if candidates is None:
        candidates = []
    if not isinstance(candidates, list):
        raise PlanError('sglang_candidates must be a list of dicts (name, moe_runner_backend, fp4_gemm_backend, '
                        'attention_backend, extra_args, env, force), got %s' % type(candidates).__name__)
    out = []
    seen = {}
    for i, cand in enumerate(candidates):
        c = normalize_candidate(cand, 'sglang_candidates[%d]' % i)
        if c['name'] in seen:
            raise PlanError('sglang_candidates[%d].name %r is also the name of sglang_candidates[%d]: names must be unique'
                            % (i, c['name'], seen[c['name']]))
        seen[c['name']] = i
        c['known_good'] = False
        out.append(c)
    kg = normalize_candidate(known_good, 'sglang_known_good')
    if kg['name'] in seen:
        same = out[seen[kg['name']]]
        if _config_of(same) != _config_of(kg):
            raise PlanError('sglang_known_good.name %r is also the name of sglang_candidates[%d] with a different '
                            'configuration: rename one of them' % (kg['name'], seen[kg['name']]))
        # the user listed the known-good config explicitly: keep their position, mark it
        same['known_good'] = True
    else:
        kg['known_good'] = True
        out.append(kg)
    return out


def _config_of(cand):
    return {
        'moe_runner_backend': cand.get('moe_runner_backend'),
        'fp4_gemm_backend': cand.get('fp4_gemm_backend'),
        'attention_backend': cand.get('attention_backend'),
        'extra_args': list(cand.get('extra_args') or []),
        'env': dict(cand.get('env') or {}),
    }


def config_key(cand, base=None):
    """A short stable key of everything that decides how SGLang runs (not the name, not force)."""
    doc = {'candidate': _config_of(cand), 'base': base or {}}
    raw = json.dumps(doc, sort_keys=True, separators=(',', ':'))
    return hashlib.sha256(raw.encode('utf-8')).hexdigest()[:16]


def gpu_fingerprint(gpu):
    """GPU model, compute capability, count and driver: what decides which kernels run."""
    return '%s|cc%s|x%s|drv%s' % (gpu.get('name'), gpu.get('compute_cap'), gpu.get('count'),
                                  gpu.get('driver_version'))


def candidate_args(cand):
    """The SGLang argv fragment a candidate adds to the base command line."""
    args = []
    for key, flag in BACKEND_FLAGS:
        if cand.get(key):
            args.extend([flag, cand[key]])
    args.extend(cand.get('extra_args') or [])
    return args


def flag_pairs(args):
    """``[(flag, value)]`` of an argv list, ``--flag value`` and ``--flag=value`` alike, in order.

    A flag followed by another flag (or by nothing) has no value and is left out: the arch matrix judges backend
    choices, which always take one.
    """
    pairs = []
    args = [str(a) for a in (args or [])]
    i = 0
    while i < len(args):
        item = args[i]
        if item.startswith('--') and '=' in item:
            flag, _sep, value = item.partition('=')
            pairs.append((flag, value))
        elif item.startswith('--') and i + 1 < len(args) and not args[i + 1].startswith('--'):
            pairs.append((item, args[i + 1]))
            i += 1
        i += 1
    return pairs


def arch_verdict(args, arch, arch_check):
    """The first ``(verdict, why)`` of ``arch_check(flag, value, arch)`` over every flag of ``args`` that is not
    ``ok``, or None: a backend is judged the same whether a structured field or ``extra_args`` gave it. A flag
    given twice is judged by its last value, the one SGLang keeps."""
    last = {}
    order = []
    for flag, value in flag_pairs(args):
        if flag not in last:
            order.append(flag)
        last[flag] = value
    for flag in order:
        value = last[flag]
        verdict, why = arch_check(flag, value, arch)
        if verdict != 'ok':
            return verdict, why or '%s %s on %s' % (flag, value, arch)
    return None


def _last_entry(record, fingerprint, sglang_version, key):
    """The last record entry for this fingerprint + version + config, or None."""
    found = None
    for entry in (record or {}).get('entries', []):
        if (entry.get('fingerprint') == fingerprint and entry.get('sglang_version') == sglang_version
                and entry.get('config_key') == key):
            found = entry
    return found


def find_record_failure(record, fingerprint, sglang_version, key):
    """The last record entry for this fingerprint + version + config if it failed, else None."""
    found = _last_entry(record, fingerprint, sglang_version, key)
    return found if found and found.get('outcome') == 'failed' else None


def find_record_success(record, fingerprint, sglang_version, key):
    """The last record entry for this configuration if it was ready, else None."""
    found = _last_entry(record, fingerprint, sglang_version, key)
    return found if found and found.get('outcome') == 'ready' else None


def build_plan(candidates, base, gpu, sglang_version, record, arch_check, flag_check, base_args=()):
    """Decide, for each normalized candidate, ``planned`` or ``skipped`` (reason, evidence).

    ``arch_check(flag, value, arch) -> (verdict, why)``, verdict in ``ok``, ``unsupported``, ``known_bad``; it is
    asked about every ``--flag value`` of the candidate's argv (its backend fields and its ``extra_args``) and of
    ``base_args`` (the arguments every candidate shares).
    ``flag_check(args) -> list of problems`` (each a string naming the flag and the closest valid one);
    an empty list means the installed SGLang accepts the arguments.
    Both are injected so that the plan is testable with plain data.
    """
    fingerprint = gpu_fingerprint(gpu)
    arch = gpu.get('arch')
    plan = []
    for cand in candidates:
        key = config_key(cand, base)
        entry = {
            'name': cand['name'],
            'args': candidate_args(cand),
            'env': cand['env'],
            'config_key': key,
            'known_good': cand.get('known_good', False),
            'force': cand['force'],
            'outcome': 'planned',
            'reason': None,
            'evidence': None,
        }
        for k, _flag in BACKEND_FLAGS:
            entry[k] = cand.get(k)
        entry['extra_args'] = cand.get('extra_args') or []
        problems = flag_check(entry['args'])
        if problems:
            # the installed SGLang cannot even parse it: force does not help
            entry.update(outcome='skipped', reason='unknown_flag', evidence='; '.join(problems))
            plan.append(entry)
            continue
        if not cand['force']:
            arch_why = arch_verdict(list(base_args) + entry['args'], arch, arch_check)
            if arch_why:
                entry.update(outcome='skipped',
                             reason='arch_unsupported' if arch_why[0] == 'unsupported' else 'known_bad',
                             evidence=arch_why[1] + ' (set force: true to try it anyway)')
                plan.append(entry)
                continue
            failed = None if cand.get('known_good') else find_record_failure(record, fingerprint, sglang_version, key)
            if failed:
                entry.update(outcome='skipped', reason='known_bad',
                             evidence='failed on this host (same GPU and sglang %s) at %s: %s: %s '
                                      '(set force: true to try it again)'
                                      % (sglang_version, failed.get('time'), failed.get('reason'),
                                         failed.get('evidence')))
                plan.append(entry)
                continue
        plan.append(entry)
    return plan


def merge_record(record, fingerprint, gpu, sglang_version, results, selected, now):
    """Return a new record with this run's results appended (bounded), and ``selected`` updated.

    ``results``: list of report candidate dicts (name, config_key, args, outcome, reason, evidence, seconds,
    smoke, benchmark). Skipped candidates whose reason came from the record are not written again.
    """
    rec = {'version': RECORD_VERSION, 'entries': [], 'selected': None}
    if isinstance(record, dict):
        rec['entries'] = list(record.get('entries') or [])
        rec['selected'] = record.get('selected')
    for res in results:
        if res.get('reused') or res.get('outcome') not in ('ready', 'failed'):
            continue
        rec['entries'].append({
            'time': now,
            'fingerprint': fingerprint,
            'gpu': {'name': gpu.get('name'), 'compute_cap': gpu.get('compute_cap'), 'count': gpu.get('count')},
            'sglang_version': sglang_version,
            'name': res.get('name'),
            'config_key': res.get('config_key'),
            'args': res.get('args'),
            'outcome': res.get('outcome'),
            'reason': res.get('reason'),
            'evidence': res.get('evidence'),
            'seconds': res.get('seconds'),
            'benchmark': res.get('benchmark'),
            'screen': res.get('screen'),
            'diagnosis': (res.get('diagnosis') or {}).get('id'),
            'force': bool(res.get('force')),  # tried because of force: true (reuse_check counts it as retried)
        })
    rec['entries'] = rec['entries'][-RECORD_MAX_ENTRIES:]
    prev = rec.get('selected') or {}
    if selected and (prev.get('config_key'), prev.get('fingerprint'), prev.get('sglang_version')) == (
            selected.get('config_key'), fingerprint, sglang_version):
        pass  # the same configuration still serves: keep the entry as it was (idempotent)
    elif selected:
        rec['selected'] = {'name': selected.get('name'), 'config_key': selected.get('config_key'),
                           'fingerprint': fingerprint, 'sglang_version': sglang_version, 'time': now}
    return rec


def reuse_check(plan, record, fingerprint, sglang_version, selection='first_ready'):
    """May the configuration that serves now be kept without a trial?

    -> ``{'recorded': name or None, 'blocked_by': [{'name', 'why'}]}``. ``recorded`` is the plan entry the record says
    serves on this host (same GPUs and SGLang version) when it is still planned; ``blocked_by`` lists the planned
    candidates that must be tried first, each with why: a candidate ahead of it (with ``first_ready``; any other one
    with ``fastest``) that this host never tried with these GPUs and this SGLang, or that was ready before (the user
    moved it up), or one marked ``force`` that was not tried here since it was forced. Candidates that failed here
    before are already skipped ``known_bad`` by the plan; a forced one that failed here while forced is not tried
    again until something else changes (an identical run changes nothing). Reuse is allowed only when ``recorded`` is
    set and ``blocked_by`` is empty.
    """
    selected = (record or {}).get('selected') or {}
    out = {'recorded': None, 'blocked_by': []}
    if (not selected or selected.get('fingerprint') != fingerprint
            or selected.get('sglang_version') != sglang_version):
        return out
    planned = [e for e in plan or [] if e.get('outcome') == 'planned']
    position = None
    for index, entry in enumerate(planned):
        if entry.get('config_key') == selected.get('config_key'):
            position = index
            break
    if position is None:
        return out
    out['recorded'] = planned[position]['name']
    others = planned[:position] if selection != 'fastest' else planned[:position] + planned[position + 1:]
    for entry in others:
        last = _last_entry(record, fingerprint, sglang_version, entry.get('config_key'))
        if entry.get('force') and (last is None or not last.get('force')):
            why = 'marked force: true, not tried here since'
        elif entry.get('force') and last.get('outcome') == 'failed':
            continue  # tried here while forced and failed: retried when something else changes
        elif last is None:
            why = 'never tried on this host with these GPUs and sglang %s' % sglang_version
        elif selection == 'fastest' and last.get('outcome') == 'ready':
            continue  # measured before: the serving one was the fastest of them
        elif last.get('outcome') == 'ready':
            why = 'ready here before (%s) and now ahead of %s' % (last.get('time'), out['recorded'])
        else:
            why = 'last outcome here %s' % last.get('outcome')
        out['blocked_by'].append({'name': entry['name'], 'why': why})
    return out
