# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Explain a failed candidate from a table of failure signatures (data, not code).

A *signature* is a dict read from ``roles/backend_trial/files/failure_signatures.yml``::

    id: trtllm_moe_sm100_only            # short, unique
    match:                               # every key given must match (AND); the first signature that matches wins
      reason: crashed                    # a value, a list (any of), {not: value-or-list}, or null (= not known)
      arch: {not: sm100}
      moe_runner_backend: [flashinfer_trtllm, flashinfer_trtllm_routed]
      lines: ['trtllm_fp4_block_scale_moe', 'requires (SM )?10\\.x']    # regexes: ANY matches some line
      all_lines: [...]                   # regexes: EACH matches some line
      no_lines: [...]                    # regexes: NONE matches any line
    explanation: one or two sentences
    references: [sglang issue 24321, ...]
    next_step: what to do about it

Context keys a signature can match (see :func:`context`): ``reason``, ``status``, ``phase`` (``screen`` or
``trial``), ``arch``, ``moe_runner_backend``, ``fp4_gemm_backend``, ``attention_backend``, ``quantization``,
``milestone`` (the last start-up milestone reached), ``signal`` (number), ``signal_name`` (``KILL``),
``log_empty`` (true when the server wrote nothing), ``exit_code``.

Pure, stdlib only; the ``diagnose`` filter plugin loads the YAML and calls :func:`diagnose`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

CONTEXT_KEYS = ('reason', 'status', 'phase', 'arch', 'moe_runner_backend', 'fp4_gemm_backend', 'attention_backend',
                'quantization', 'milestone', 'signal', 'signal_name', 'log_empty', 'exit_code')
LINE_KEYS = ('lines', 'all_lines', 'no_lines')
SIGNATURE_KEYS = ('id', 'title', 'match', 'explanation', 'references', 'next_step')
MAX_LINES = 400
UNMATCHED_SHOWN = 15

UNKNOWN = {
    'id': 'unknown',
    'explanation': 'No failure signature matched; the lines below are what the server and the checks said.',
    'references': [],
    'next_step': ('Read the lines below and the unit\'s journal (journalctl -u SERVICE); once understood, add a '
                  'signature to roles/backend_trial/files/failure_signatures.yml (data, no code change).'),
}


class SignatureError(ValueError):
    """A malformed signature: the message names it and the key."""


def _as_list(value):
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _norm(value):
    """Compare numbers and strings alike: 9 == '9', True == 'true'."""
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return None
    return str(value)


def value_matches(spec, value):
    """``spec`` (value, list, ``{not: ...}`` or None) against one context value."""
    if isinstance(spec, dict):
        if set(spec) != {'not'}:
            raise SignatureError('a match value that is a dict must be {not: value-or-list}, got %r' % (spec,))
        return not value_matches(spec['not'], value)
    if spec is None:
        return value is None
    return _norm(value) in [_norm(s) for s in _as_list(spec)]


def validate(signatures):
    """Check the table; return it compiled: list of dicts with ``_rx`` {key: [(pattern, regex)]}."""
    if not isinstance(signatures, list):
        raise SignatureError('signatures must be a list, got %s' % type(signatures).__name__)
    out = []
    seen = set()
    for i, sig in enumerate(signatures):
        where = 'signature %d' % i
        if not isinstance(sig, dict):
            raise SignatureError('%s must be a dict, got %r' % (where, sig))
        sid = sig.get('id')
        if not isinstance(sid, str) or not sid.strip():
            raise SignatureError('%s has no id' % where)
        where = 'signature %r' % sid
        if sid in seen or sid == 'unknown':
            raise SignatureError('%s: the id is used twice (or is the reserved "unknown")' % where)
        seen.add(sid)
        unknown = sorted(set(sig) - set(SIGNATURE_KEYS))
        if unknown:
            raise SignatureError('%s: unknown key(s) %s; allowed: %s' % (where, ', '.join(unknown), ', '.join(SIGNATURE_KEYS)))
        for key in ('explanation', 'next_step'):
            if not isinstance(sig.get(key), str) or not sig[key].strip():
                raise SignatureError('%s: %s must be a non-empty string' % (where, key))
        if not isinstance(sig.get('references', []), list):
            raise SignatureError('%s: references must be a list of strings' % where)
        match = sig.get('match') or {}
        if not isinstance(match, dict) or not match:
            raise SignatureError('%s: match must be a non-empty dict' % where)
        bad = sorted(set(match) - set(CONTEXT_KEYS) - set(LINE_KEYS))
        if bad:
            raise SignatureError('%s: unknown match key(s) %s; allowed: %s'
                                 % (where, ', '.join(bad), ', '.join(CONTEXT_KEYS + LINE_KEYS)))
        compiled = {}
        for key in LINE_KEYS:
            pats = []
            for pat in _as_list(match.get(key)):
                try:
                    pats.append((pat, re.compile(pat)))
                except (re.error, TypeError) as e:
                    raise SignatureError('%s: %s: bad regex %r: %s' % (where, key, pat, e))
            compiled[key] = pats
        for key in CONTEXT_KEYS:
            if isinstance(match.get(key), dict):
                value_matches(match[key], None)     # raises on a malformed dict
        entry = dict(sig)
        entry['references'] = [str(r) for r in sig.get('references') or []]
        entry['_rx'] = compiled
        out.append(entry)
    return out


def _text_lines(value):
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            out.extend(_text_lines(v))
        return out
    return [ln for ln in str(value).splitlines() if ln.strip()]


def collect_lines(results):
    """The lines a signature is matched against, from module results and report entries, most telling first.

    Reads ``evidence``, ``msg``, ``errors``, failed ``checks`` (``detail``, ``text``) and ``log_tail``.
    """
    lines = []
    tails = []
    for res in results:
        if not isinstance(res, dict):
            continue
        lines.extend(_text_lines(res.get('evidence')))
        lines.extend(_text_lines(res.get('msg')))
        lines.extend(_text_lines(res.get('errors')))
        for check in res.get('checks') or []:
            if isinstance(check, dict) and check.get('ok') is False:
                lines.extend(_text_lines('%s: %s: %s' % (check.get('name'), check.get('reason'), check.get('detail'))))
                lines.extend(_text_lines(check.get('text')))
        tails.extend(_text_lines(res.get('log_tail')))
    out = []
    seen = set()
    for line in lines + tails:
        line = line.rstrip()
        if line not in seen:
            seen.add(line)
            out.append(line)
    return out[:MAX_LINES]


def context(entry, results=(), arch=None, candidate=None, phase=None, quantization=None):
    """The values signatures match, from the report entry, the module results, the GPU arch and the candidate."""
    entry = entry or {}
    ctx = dict((k, None) for k in CONTEXT_KEYS)
    ctx['reason'] = entry.get('reason')
    ctx['phase'] = phase
    ctx['arch'] = arch
    ctx['quantization'] = quantization
    for key in ('moe_runner_backend', 'fp4_gemm_backend', 'attention_backend'):
        ctx[key] = (candidate or {}).get(key)
    said = None
    for res in list(results) + [entry]:
        if not isinstance(res, dict):
            continue
        for key in ('status', 'milestone', 'signal', 'signal_name', 'exit_code'):
            if ctx[key] is None and res.get(key) is not None:
                ctx[key] = res.get(key)
        if said is None and 'log_said_anything' in res:
            said = bool(res.get('log_said_anything'))
    if said is None:
        # an await result without the flag: its evidence says so
        said = not any('the log is empty' in ln for ln in collect_lines(list(results) + [entry]))
    ctx['log_empty'] = not said
    if ctx['signal'] is not None:
        try:
            ctx['signal'] = int(ctx['signal'])
        except (TypeError, ValueError):
            pass
    return ctx


def _first_match(rx, lines):
    for line in lines:
        if rx.search(line):
            return line
    return None


def match_one(sig, ctx, lines):
    """Return the ``matched`` dict when ``sig`` (compiled) matches, else None."""
    match = sig['match']
    matched = {}
    for key in CONTEXT_KEYS:
        if key in match:
            if not value_matches(match[key], ctx.get(key)):
                return None
            matched[key] = ctx.get(key)
    rx = sig['_rx']
    found = []
    if rx['lines']:
        hit = None
        for _pat, r in rx['lines']:
            hit = _first_match(r, lines)
            if hit is not None:
                break
        if hit is None:
            return None
        found.append(hit)
    for _pat, r in rx['all_lines']:
        hit = _first_match(r, lines)
        if hit is None:
            return None
        if hit not in found:
            found.append(hit)
    for _pat, r in rx['no_lines']:
        if _first_match(r, lines) is not None:
            return None
    if found:
        matched['lines'] = found
    return matched


def diagnose(signatures, entry, results=(), arch=None, candidate=None, phase=None, quantization=None):
    """The diagnosis of one failed report entry: ``{id, explanation, references, next_step, matched}``.

    ``signatures`` is the table (raw or from :func:`validate`); the first one that matches wins. With no match:
    ``id: unknown`` and ``lines`` (the lines that matched nothing). None when the entry did not fail.
    """
    entry = entry or {}
    if entry.get('outcome') != 'failed':
        return None
    table = signatures if (signatures and '_rx' in signatures[0]) else validate(signatures or [])
    results = [r for r in results if isinstance(r, dict)]
    ctx = context(entry, results, arch, candidate, phase, quantization)
    lines = collect_lines(results + [entry])
    for sig in table:
        matched = match_one(sig, ctx, lines)
        if matched is not None:
            out = {'id': sig['id'], 'explanation': sig['explanation'].strip(),
                   'references': list(sig['references']), 'next_step': sig['next_step'].strip(), 'matched': matched}
            if sig.get('title'):
                out['title'] = sig['title']
            return out
    out = dict(UNKNOWN)
    out['matched'] = {}
    out['context'] = dict((k, v) for k, v in ctx.items() if v is not None)
    out['lines'] = lines[:UNMATCHED_SHOWN]
    return out
