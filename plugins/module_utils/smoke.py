# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Output checks for a freshly started SGLang server.

A ``200`` from ``/health_generate`` proves a token came out, not that it is right:
broken FP4/MoE kernels have served ``!!!!``, ``++++``, all zeros, U+FFFD soup or NaN.
This module holds the fixed prompts with known answers and the pure checks that
tell real text from garbage.  Stdlib only, Python 3.7+.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import json
import math
import re

REASONS = ('nan', 'garbage', 'replacement_chars', 'empty', 'http_error', 'timeout', 'wrong_answer')
# the checks' reasons that may mean the server was lost (no answer, an HTTP error, an empty or NaN answer): then the
# server's own log and process say how it ended
LOST_REASONS = ('http_error', 'timeout', 'empty', 'nan')
# with a watch (smoke_generate's O(watch)): the server died or logged a fatal error before it answered
SERVER_LOST = 'server_lost'
# When several checks fail, the overall reason is the most telling one (first in this order).
REASON_PRIORITY = REASONS

DEFAULT_PROMPTS = [
    {
        'name': 'capital',
        'endpoint': '/generate',
        'prompt': 'The capital city of France is',
        'max_tokens': 16,
        'expect_any': ['Paris'],
    },
    {
        'name': 'arithmetic',
        'endpoint': '/generate',
        'prompt': 'Question: What is 17 + 25? Answer:',
        'max_tokens': 16,
        'expect_any': ['42', 'forty-two', 'forty two'],
    },
    {
        'name': 'chat',
        'endpoint': '/v1/chat/completions',
        'messages': [{'role': 'user', 'content': 'Say hello in one word.'}],
        'max_tokens': 256,
        'expect_any': ['hello', 'hi', 'hey', 'greetings', 'bonjour', 'hola'],
        # thinking models (Qwen3.x, GLM) answer directly; other templates ignore the key
        'extra': {'chat_template_kwargs': {'enable_thinking': False}},
    },
]

# characters that legitimately repeat in long runs (markdown rules, ellipses, indentation)
FORMATTING_CHARS = set(u'-=_*#~. \t\n')
NAN_WORD = re.compile(r'(?<![A-Za-z])(?:nan|NaN|NAN)(?![A-Za-z])')
NAN_ERROR = re.compile(r'(?<![A-Za-z])(?:nan|NaN|inf)(?![A-Za-z])|not a number', re.I)
WORD = re.compile(r'\w+', re.U)
THINK_BLOCK = re.compile(r'<think>.*?(?:</think>|$)', re.S)


# --------------------------------------------------------------------------- text checks
def longest_run(text):
    """Return ``(char, length)`` of the longest run of one repeated character (spaces ignored)."""
    best_c, best_n = u'', 0
    prev, n = None, 0
    for ch in text:
        if ch == prev:
            n += 1
        else:
            prev, n = ch, 1
        if n > best_n and not ch.isspace():
            best_c, best_n = ch, n
    return best_c, best_n


def garbage_reason(text, min_len=8):
    """Return ``(reason, detail)`` when ``text`` is not real text, else ``(None, None)``.

    Reasons: ``empty``, ``replacement_chars``, ``nan``, ``garbage``.  Tuned to avoid false
    positives on real answers: ``!!!`` inside a sentence, ``1000000``, markdown rules.
    """
    if text is None or not text.strip():
        return 'empty', 'no text'
    s = text.strip()
    n_fffd = s.count(u'\ufffd')
    if n_fffd and (n_fffd >= 2 or n_fffd * 10 >= len(s) or s.strip(u'\ufffd \n') == u''):
        return 'replacement_chars', '%d U+FFFD in %d chars' % (n_fffd, len(s))
    words = WORD.findall(s)
    nan_words = [w for w in words if w.lower() == 'nan']
    if nan_words and len(nan_words) * 2 >= len(words):
        return 'nan', 'text is NaN: %r' % s[:60]
    compact = u''.join(ch for ch in s if not ch.isspace())
    # only punctuation / symbols (no letter, no digit): "!!!!", "+ + + +", "?.?."
    if len(compact) >= 4 and not any(ch.isalnum() for ch in compact):
        return 'garbage', 'only punctuation/symbols: %r' % s[:60]
    # all zeros: "0000", "0 0 0 0", "0.0 0.0"
    if len(compact) >= 4 and set(compact) <= set(u'0.,'):
        return 'garbage', 'all zeros: %r' % s[:60]
    ch, run = longest_run(s)
    if run >= 16 and ch not in FORMATTING_CHARS and not ch.isdigit():
        return 'garbage', 'run of %d x %r' % (run, ch)
    if run >= 24 and ch.isdigit():
        return 'garbage', 'run of %d x %r' % (run, ch)
    if len(compact) >= min_len and run * 2 >= len(compact) and not ch.isdigit() and ch not in FORMATTING_CHARS:
        return 'garbage', 'run of %d x %r covers most of the text' % (run, ch)
    distinct = set(compact)
    if len(compact) >= 16 and len(distinct) <= 3:
        return 'garbage', 'only %d distinct characters in %d' % (len(distinct), len(compact))
    if len(compact) >= 200 and len(distinct) * 50 < len(compact):
        return 'garbage', 'low distinct-character ratio %d/%d' % (len(distinct), len(compact))
    if len(words) >= 8:
        word, count = collections.Counter(w.lower() for w in words).most_common(1)[0]
        if count * 10 >= len(words) * 8:
            return 'garbage', 'word %r repeated %d of %d times' % (word, count, len(words))
    return None, None


def _has_nan(value, depth=0):
    if depth > 8:
        return False
    if isinstance(value, float):
        return math.isnan(value) or math.isinf(value)
    if isinstance(value, dict):
        return any(_has_nan(v, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_nan(v, depth + 1) for v in value)
    return False


def expect_match(text, expect_any):
    """True when one of ``expect_any`` occurs in ``text`` (case-insensitive, not inside a longer word/number).

    An entry starting with ``re:`` is a regular expression (case-insensitive).
    """
    if not expect_any:
        return True
    for exp in expect_any:
        if exp.startswith('re:'):
            if re.search(exp[3:], text, re.I):
                return True
            continue
        rx = re.escape(exp)
        if exp[:1].isalnum():
            rx = r'(?<![A-Za-z0-9])' + rx
        if exp[-1:].isalnum():
            rx = rx + r'(?![A-Za-z0-9])'
        if re.search(rx, text, re.I):
            return True
    return False


# --------------------------------------------------------------------------- requests
def normalize_prompt(spec, index=0):
    """Fill defaults into one prompt spec (a dict from the ``prompts`` option)."""
    p = dict((k, v) for k, v in spec.items() if v is not None)
    p.setdefault('endpoint', '/v1/chat/completions' if p.get('messages') else '/generate')
    p.setdefault('name', 'prompt%d' % index)
    p.setdefault('max_tokens', 32)
    p.setdefault('expect_any', [])
    p.setdefault('extra', {})
    if isinstance(p['expect_any'], str):
        p['expect_any'] = [p['expect_any']]
    if not p.get('prompt') and not p.get('messages'):
        raise ValueError('prompt %s: needs prompt or messages' % p['name'])
    if not p['endpoint'].startswith('/'):
        p['endpoint'] = '/' + p['endpoint']
    return p


def build_request(p, model=None):
    """Return ``(path, body_dict)`` for a normalized prompt spec, temperature 0."""
    ep = p['endpoint']
    if ep == '/generate':
        body = {'text': p.get('prompt') or '',
                'sampling_params': {'temperature': 0, 'max_new_tokens': p['max_tokens']},
                'stream': False}
        if p.get('logprobs'):
            body['return_logprob'] = True
    elif ep.endswith('/chat/completions'):
        msgs = p.get('messages') or [{'role': 'user', 'content': p.get('prompt')}]
        body = {'model': model or 'default', 'messages': msgs, 'temperature': 0,
                'max_tokens': p['max_tokens'], 'stream': False}
        if p.get('logprobs'):
            body['logprobs'] = True
    else:  # /v1/completions and anything OpenAI-like
        body = {'model': model or 'default', 'prompt': p.get('prompt') or '', 'temperature': 0,
                'max_tokens': p['max_tokens'], 'stream': False}
        if p.get('logprobs'):
            body['logprobs'] = 1
    for k, v in (p.get('extra') or {}).items():
        body[k] = v
    return ep, body


def extract_text(endpoint, data):
    """Return ``(text, reasoning_text)`` from a response body (already parsed JSON)."""
    if not isinstance(data, dict):
        return None, None
    if endpoint == '/generate':
        t = data.get('text')
        if isinstance(t, list):
            t = u''.join(x for x in t if isinstance(x, str))
        return t, None
    choices = data.get('choices') or []
    if not choices or not isinstance(choices[0], dict):
        return None, None
    c = choices[0]
    if 'message' in c and isinstance(c['message'], dict):
        m = c['message']
        return m.get('content'), m.get('reasoning_content')
    return c.get('text'), None


def parse_json_lenient(body):
    """json.loads that accepts NaN/Infinity (Python's default does) and returns None on failure."""
    try:
        return json.loads(body)
    except (ValueError, TypeError):
        return None


def check_response(p, status, body, seconds=None, error=None, judge=True):
    """Judge one answer.  Returns a check dict: ``name``, ``endpoint``, ``ok``, ``reason``, ``detail``, ``text``, ``seconds``.

    ``judge=False`` (the screen, dummy weights): any 200 with a JSON answer passes; the text is not judged.
    """
    res = {'name': p['name'], 'endpoint': p['endpoint'], 'ok': False, 'reason': None, 'detail': None,
           'text': None, 'status': status, 'seconds': seconds}
    body = body or ''
    if isinstance(body, bytes):
        body = body.decode('utf-8', 'replace')
    if error == 'timeout':
        res.update(reason='timeout', detail='no answer in time')
        return res
    if status is None:
        res.update(reason='http_error', detail='no HTTP answer: %s' % (error or 'connection failed'))
        return res
    if status != 200:
        excerpt = body.strip()[:300]
        reason = 'nan' if NAN_ERROR.search(excerpt) and status >= 500 else 'http_error'
        res.update(reason=reason, detail='HTTP %s: %s' % (status, excerpt))
        return res
    data = parse_json_lenient(body)
    if data is None:
        res.update(reason='http_error', detail='answer is not JSON: %r' % body[:200])
        return res
    if isinstance(data, dict) and data.get('error') and not data.get('choices') and 'text' not in data:
        err = json.dumps(data.get('error'))[:300]
        res.update(reason='nan' if NAN_ERROR.search(err) else 'http_error', detail='error body: %s' % err)
        return res
    if not judge:
        text, _reasoning = extract_text(p['endpoint'], data)
        res.update(ok=True, text=(text or u'')[:500])
        return res
    if _has_nan(data):
        res.update(reason='nan', detail='NaN/inf in the answer (logprobs or scores)')
        return res
    text, reasoning = extract_text(p['endpoint'], data)
    if text:
        text = THINK_BLOCK.sub('', text).strip() or text
    res['text'] = (text or u'')[:500]
    judged = text
    if not (judged or u'').strip() and reasoning:
        judged = reasoning          # a thinking model cut inside its reasoning: judge what it wrote
    reason, detail = garbage_reason(judged)
    if reason:
        res.update(reason=reason, detail=detail)
        return res
    if not expect_match(judged, p.get('expect_any')):
        res.update(reason='wrong_answer', detail='expected one of %s, got %r' % (p.get('expect_any'), judged[:120]))
        return res
    res['ok'] = True
    return res


def may_have_lost(checks):
    """Whether these checks' failure may mean the server was lost (see LOST_REASONS)."""
    ok, reason = overall(checks or [])
    return not ok and reason in LOST_REASONS


def result(checks, server=None):
    """smoke_generate's result for its checks (without the benchmark and the time): ``ok``, ``reason``, ``evidence``,
    ``checks``; with ``server`` (a watch saw the server fail: await_server_ready's result) ``reason`` is
    SERVER_LOST, the evidence is the server's, then the failed checks', and ``server`` is kept."""
    ok, reason = overall(checks)
    evidence = ['%s: %s: %s' % (c['name'], c['reason'], c['detail']) for c in checks if not c['ok']]
    out = dict(changed=False, ok=ok, reason=reason, evidence=evidence, checks=checks)
    if server:
        out.update(ok=False, reason=SERVER_LOST, server=server,
                   evidence=list(server.get('evidence') or [])[:5] + evidence)
    return out


def benchmark_may_have_lost(benchmark):
    """Whether a load test's outcome (smoke_generate's ``benchmark``) may mean the server was lost: a request failed
    at some level (then the watch gives the server's death or fatal line a moment to show)."""
    levels = (benchmark or {}).get('concurrency') or {}
    return any((fig or {}).get('failed') for fig in levels.values())


def with_benchmark(result, benchmark, server=None):
    """smoke_generate's result with its load test. ``benchmark``: the load test's figures, or None when the watch saw
    the server fail before the load test returned (the requests still in flight are not waited for); ``server``:
    that verdict (await_server_ready's result), kept as the result's ``server`` for the trial to judge the server by
    (trial.after_smoke). The smoke checks' own ``ok`` and ``reason`` stand: they passed before the load began."""
    out = dict(result)
    if not server:
        out['benchmark'] = benchmark
        return out
    evidence = list(server.get('evidence') or [])
    out['benchmark'] = dict(benchmark or {'concurrency': {}}, interrupted='the server failed (%s) during the load test%s' % (
        server.get('status') or 'unknown', ': %s' % evidence[0] if evidence else ''))
    out['server'] = server
    return out


def overall(checks):
    """Return ``(ok, reason)`` over a list of check dicts; the reason is the most telling failure."""
    failed = [c for c in checks if not c['ok']]
    if not failed:
        return True, None
    reasons = [c['reason'] for c in failed]
    for r in REASON_PRIORITY:
        if r in reasons:
            return False, r
    return False, reasons[0]


PROMPT_KEYS = ('name', 'endpoint', 'prompt', 'messages', 'max_tokens', 'expect_any', 'logprobs', 'extra')
ENDPOINTS = ('/generate', '/v1/chat/completions', '/v1/completions')


def check_prompts(prompts, where='sglang_smoke_prompts'):
    """Errors of a user's prompt list, each naming ``where[i].key`` and the fix; [] when it can be used."""
    if prompts in (None, ''):
        return []
    if not isinstance(prompts, list):
        return ['%s must be a list of prompts ({prompt or messages, expect_any, ...}), got %s'
                % (where, type(prompts).__name__)]
    errors = []
    for index, spec in enumerate(prompts):
        at = '%s[%d]' % (where, index)
        if not isinstance(spec, dict):
            errors.append('%s must be a dict with prompt (or messages) and expect_any, got %r' % (at, spec))
            continue
        unknown = sorted(set(spec) - set(PROMPT_KEYS))
        if unknown:
            errors.append('%s has unknown key(s) %s; allowed: %s' % (at, ', '.join(unknown), ', '.join(PROMPT_KEYS)))
            continue
        if not spec.get('prompt') and not spec.get('messages'):
            errors.append('%s needs prompt (a text) or messages (a chat)' % at)
        endpoint = spec.get('endpoint')
        if endpoint is not None and '/' + str(endpoint).lstrip('/') not in ENDPOINTS:
            errors.append('%s.endpoint %r is not one of %s' % (at, endpoint, ', '.join(ENDPOINTS)))
        if spec.get('messages') and endpoint not in (None, '/v1/chat/completions', 'v1/chat/completions'):
            errors.append('%s.messages needs endpoint /v1/chat/completions' % at)
        expect = spec.get('expect_any', [])
        expect = [expect] if isinstance(expect, str) else expect
        if not isinstance(expect, list) or not all(isinstance(e, str) and e for e in expect):
            errors.append('%s.expect_any must be a list of non-empty strings (re: for a regular expression)' % at)
            continue
        for exp in expect:
            if exp.startswith('re:'):
                try:
                    re.compile(exp[3:])
                except re.error as exc:
                    errors.append('%s.expect_any %r is not a valid regular expression: %s' % (at, exp, exc))
        tokens = spec.get('max_tokens', 32)
        if not isinstance(tokens, int) or isinstance(tokens, bool) or not 1 <= tokens <= 4096:
            errors.append('%s.max_tokens must be a whole number from 1 to 4096, got %r' % (at, tokens))
    return errors
