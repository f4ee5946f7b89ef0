# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A load generator for SGLang's streaming ``/generate`` endpoint.

Measures what ``python -m sglang.bench_serving --backend sglang --dataset-name random-ids``
prints, under the same names (snake_case keys, the printed labels in :data:`LABELS`):
TTFT is the time to the first streamed chunk, ITL the gaps between chunks (a chunk that
carries k new tokens counts as k gaps of 1/k, as bench_serving does), E2E the time to the
end of the stream.

Design: one thread per concurrent stream on blocking sockets, a new connection for each
request whose TCP (and TLS) set-up counts into its TTFT, as bench_serving opens a client
session per request.  We use :mod:`http.client` directly here and not
``ansible.module_utils.urls.open_url`` because we need ``read1`` on the raw response so that
each chunk is timestamped the moment it arrives; ``http.client`` is the standard library, so
the module still runs on any target with a bare Python.  Parsing per event is minimal (no JSON decode of the growing
cumulative text: the token count is read from ``"completion_tokens"``), so 64 streams at a
few thousand tokens/s total cost a few percent of one core (see tests/bench/loadgen_accuracy.py).

Stdlib only, Python 3.7+.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import random
import ssl
import threading
import time

try:
    import http.client as http_client
except ImportError:  # pragma: no cover - Python 2 (not a supported target)
    http_client = None

LABELS = {
    'completed': 'Successful requests',
    'failed': 'Failed requests',
    'max_concurrency': 'Max request concurrency',
    'duration_s': 'Benchmark duration (s)',
    'total_input_tokens': 'Total input tokens',
    'total_output_tokens': 'Total generated tokens',
    'request_throughput': 'Request throughput (req/s)',
    'input_throughput': 'Input token throughput (tok/s)',
    'output_throughput': 'Output token throughput (tok/s)',
    'total_throughput': 'Total token throughput (tok/s)',
    'mean_ttft_ms': 'Mean TTFT (ms)',
    'median_ttft_ms': 'Median TTFT (ms)',
    'p99_ttft_ms': 'P99 TTFT (ms)',
    'mean_itl_ms': 'Mean ITL (ms)',
    'median_itl_ms': 'Median ITL (ms)',
    'p99_itl_ms': 'P99 ITL (ms)',
    'mean_e2e_latency_ms': 'Mean E2E Latency (ms)',
    'median_e2e_latency_ms': 'Median E2E Latency (ms)',
}

_CT = b'"completion_tokens":'
_PT = b'"prompt_tokens":'
# SGLang's /generate streams the text so far; before a token that decodes to something (a token that is part of a
# UTF-8 character decodes to nothing yet) it is empty: bench_serving's first token is the first chunk with text
_EMPTY_TEXT = (b'"text":""', b'"text": ""')
WORDS = ('time year people way day man thing woman life child world school state family student group '
         'country problem hand part place case week company system program question work government number '
         'night point home water room mother area money story fact month lot right study book eye job word').split()


# HTTP statuses of a request refused for what it asked (a bad request), not for the server's state; 408 (timeout)
# and 429 (too many requests) say the server is busy, and count as the server's
_NOT_REJECTIONS = (408, 429)


def rejected_status(status):
    """Whether an HTTP status says that the server refused the request itself (4xx but 408 and 429)."""
    return isinstance(status, int) and 400 <= status < 500 and status not in _NOT_REJECTIONS


def rejected_event(payload):
    """Whether a streamed ``{"error": ...}`` event refuses the request itself: SGLang streams a request it cannot
    serve (an input longer than the context, a bad sampling parameter) as ``{"error": {"type":
    "invalid_request_error", "code": 400, ...}}`` on an HTTP 200 stream."""
    try:
        error = json.loads(payload.decode('utf-8', 'replace') if isinstance(payload, bytes) else payload).get('error')
    except (ValueError, AttributeError):
        return False
    if not isinstance(error, dict):
        return False
    return error.get('type') == 'invalid_request_error' or rejected_status(error.get('code'))


class Result(object):
    __slots__ = ('ok', 'ttft', 'itl', 'latency', 'prompt_len', 'output_len', 'error', 'start', 'end', 'rejected')

    def __init__(self):
        self.ok = False
        self.ttft = None
        self.itl = []
        self.latency = None
        self.prompt_len = 0
        self.output_len = 0
        self.error = None
        self.start = None
        self.end = None
        self.rejected = False  # the server refused the request itself (see rejected_status, rejected_event)


def percentile(values, pct):
    """Linear-interpolation percentile (numpy's default)."""
    if not values:
        return 0.0
    s = sorted(values)
    if len(s) == 1:
        return float(s[0])
    k = (len(s) - 1) * pct / 100.0
    f = int(k)
    c = min(f + 1, len(s) - 1)
    return float(s[f] + (s[c] - s[f]) * (k - f))


def mean(values):
    return float(sum(values)) / len(values) if values else 0.0


def _int_after(payload, key):
    i = payload.rfind(key)
    if i < 0:
        return None
    j = i + len(key)
    n = len(payload)
    while j < n and payload[j:j + 1] in (b' ', b'\t'):
        j += 1
    k = j
    while k < n and payload[k:k + 1].isdigit():
        k += 1
    return int(payload[j:k]) if k > j else None


def make_prompts(num, input_len, output_len, seed=0, mode='ids', ignore_eos=True, extra=None, vocab_size=None):
    """Request bodies for ``/generate``: random token ids (exact input length) or random words (``mode='text'``,
    about one token per word).

    Token ids are drawn from ``[0, vocab_size)``, the range of bench_serving's ``--dataset-name random-ids``
    (``vocab_size``: see :mod:`_vocab`; SGLang does not check the ids, and one past the embedding table ends the
    server). Each id is drawn on its own, where bench_serving takes a run of consecutive ids from a random offset:
    with a small vocabulary its offsets repeat, and two prompts with the same start share a prefix that the radix
    cache serves without computing it. ``mode='ids'`` without a ``vocab_size`` raises ValueError.
    """
    if mode == 'ids' and (isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1):
        raise ValueError('token ids need the vocabulary size (a positive int), got %r' % (vocab_size,))
    rnd = random.Random(seed)
    out = []
    for dummy in range(num):
        body = {'sampling_params': {'temperature': 0, 'max_new_tokens': int(output_len), 'ignore_eos': bool(ignore_eos)},
                'stream': True}
        if mode == 'ids':
            body['input_ids'] = [rnd.randrange(vocab_size) for dummy in range(int(input_len))]
        else:
            body['text'] = ' '.join(rnd.choice(WORDS) for dummy in range(int(input_len)))
        if extra:
            body.update(extra)
        out.append(json.dumps(body).encode('utf-8'))
    return out


def _event(payload, now, result, state):
    """One ``data:`` payload of a stream, read at ``now``: the first token's time, the gaps, an error event."""
    if payload == b'[DONE]':
        state['done'] = True
        return
    if payload.startswith(b'{"error"'):
        result.error = payload[:300].decode('utf-8', 'replace')
        result.rejected = rejected_event(payload)
        return
    if state['last_t'] is None and any(empty in payload for empty in _EMPTY_TEXT):
        state['chunks'] += 1        # no text yet: not the first token (as bench_serving counts it)
        return
    tokens = _int_after(payload, _CT)
    if tokens is None:
        tokens = state['tokens'] + 1
    if state['last_t'] is None:
        result.ttft = now - result.start
        pt = _int_after(payload, _PT)
        if pt is not None:
            result.prompt_len = pt
    else:
        new = tokens - state['tokens']
        gap = now - state['last_t']
        if new > 1:
            result.itl.extend([gap / new] * new)
        else:
            # one new token, or the same count (e.g. a meta-only chunk): the gap counts once
            result.itl.append(gap)
    state['last_t'] = now
    state['tokens'] = tokens
    state['chunks'] += 1


def _read_stream(resp, result, clock):
    """Read an SSE response to its end, each chunk timestamped as it arrives; returns what :func:`_event` kept."""
    state = {'last_t': None, 'tokens': 0, 'chunks': 0, 'done': False}
    buf = b''
    while True:
        data = resp.read1(65536)
        if not data:
            return state
        now = clock()
        buf += data
        while True:
            nl = buf.find(b'\n')
            if nl < 0:
                break
            line = buf[:nl].strip()
            buf = buf[nl + 1:]
            if line.startswith(b'data:'):
                _event(line[5:].strip(), now, result, state)


def stream_one(conn, path, body, headers, result, clock=time.perf_counter):
    """Send one streaming request on ``conn`` and fill ``result``.  Returns True when the connection is reusable."""
    result.start = clock()
    try:
        conn.request('POST', path, body, headers)
        resp = conn.getresponse()
    except Exception as e:
        result.error = 'connect: %s' % (e,)
        return False
    if resp.status != 200:
        try:
            text = resp.read()[:300]
        except Exception:
            text = b''
        result.error = 'HTTP %s: %s' % (resp.status, text.decode('utf-8', 'replace'))
        result.rejected = rejected_status(resp.status)
        return not resp.will_close
    try:
        state = _read_stream(resp, result, clock)
    except Exception as e:
        result.error = 'stream: %s' % (e,)
        return False
    result.end = clock()
    # A response with Content-Length is not marked closed when read1 reaches its end, and http.client then
    # refuses the next request on the connection (CannotSendRequest); closing it keeps the connection.
    resp.close()
    result.latency = (state['last_t'] if state['last_t'] is not None else result.end) - result.start
    result.output_len = state['tokens']
    result.ok = result.error is None and state['chunks'] > 0 and (state['done'] or state['tokens'] > 0)
    if not result.ok and result.error is None:
        result.error = 'stream ended without tokens'
    return not resp.will_close


def _connect(host, port, scheme, timeout, validate_certs):
    if scheme == 'https':
        ctx = ssl.create_default_context()
        if not validate_certs:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return http_client.HTTPSConnection(host, port, timeout=timeout, context=ctx)
    return http_client.HTTPConnection(host, port, timeout=timeout)


def _warm_up(connect, path, bodies, headers):
    """Send ``bodies`` one by one, a connection each; not counted."""
    for body in bodies:
        conn = connect()
        try:
            stream_one(conn, path, body, headers, Result())
        finally:
            conn.close()


def _run_streams(connect, path, bodies, headers, concurrency, timeout, monitor=None):
    """Send ``bodies`` with at most ``concurrency`` in flight, one thread each; a request not started
    within ``timeout`` seconds fails unsent. Returns ``(results, t0)``, t0 the moment the threads were released."""
    num = len(bodies)
    results = [Result() for dummy in range(num)]
    lock = threading.Lock()
    state = {'next': 0}
    deadline = time.perf_counter() + timeout
    start_evt = threading.Event()

    def worker():
        start_evt.wait()
        while True:
            with lock:
                i = state['next']
                state['next'] = i + 1
            if i >= num:
                return
            if time.perf_counter() > deadline:
                results[i].error = 'not sent: benchmark timeout'
                continue
            # a connection per request, its set-up inside the request's TTFT, as bench_serving opens a client
            # session per request (sglang/benchmark/serving.py, async_request_sglang_generate)
            conn = connect()
            try:
                stream_one(conn, path, bodies[i], headers, results[i])
            finally:
                conn.close()

    threads = [threading.Thread(target=worker, name='loadgen-%d' % n) for n in range(min(concurrency, num))]
    for t in threads:
        t.daemon = True
        t.start()
    if monitor is not None:
        monitor.start()
    t0 = time.perf_counter()
    start_evt.set()
    try:
        for t in threads:
            t.join(max(0.0, deadline - time.perf_counter()) + 5)
    finally:
        if monitor is not None:
            monitor.stop()
    return results, t0


def run_level(host, port, concurrency, num_prompts, input_len=1024, output_len=256, api_key=None,
              warmup=1, timeout=600, path='/generate', seed=0, mode='ids', scheme='http',
              validate_certs=True, request_timeout=None, extra=None, monitor=None, vocab_size=None):
    """Run ``num_prompts`` streaming requests with at most ``concurrency`` in flight.

    ``mode='ids'`` needs ``vocab_size`` (see :func:`make_prompts`).
    ``monitor`` (optional, e.g. a ``gpu_sampler.Sampler``): its ``start()`` is called as the measured
    requests are released (after the warm-up) and its ``stop()`` when they have ended; its figures are
    the caller's to read.
    Returns ``(figures, results)``: figures as :func:`summarize`, results the per-request list.
    """
    concurrency = max(1, int(concurrency))
    headers = {'Content-Type': 'application/json', 'Accept': 'text/event-stream'}
    if api_key:
        headers['Authorization'] = 'Bearer %s' % api_key
    bodies = make_prompts(num_prompts + warmup, input_len, output_len, seed=seed, mode=mode, extra=extra,
                          vocab_size=vocab_size)
    rt = request_timeout or timeout

    def connect():
        return _connect(host, port, scheme, rt, validate_certs)
    if warmup:
        _warm_up(connect, path, bodies[num_prompts:], headers)
    results, t0 = _run_streams(connect, path, bodies[:num_prompts], headers, concurrency, timeout, monitor)
    duration = time.perf_counter() - t0
    ends = [r.end for r in results if r.ok and r.end]
    if ends:
        duration = max(ends) - t0
    for r in results:
        if not r.prompt_len:
            r.prompt_len = int(input_len)
    return summarize(results, duration, concurrency), results


def summarize(results, duration, concurrency=None):
    """bench_serving's figures from per-request results (times in seconds)."""
    ok = [r for r in results if r.ok]
    ttfts = [r.ttft * 1000.0 for r in ok if r.ttft is not None]
    itls = [x * 1000.0 for r in ok for x in r.itl]
    e2e = [r.latency * 1000.0 for r in ok if r.latency is not None]
    tin = sum(r.prompt_len for r in ok)
    tout = sum(r.output_len for r in ok)
    d = duration if duration and duration > 0 else float('nan')
    errors = sorted(set(r.error for r in results if r.error))[:5]
    # the error of the failed request sent first (not sent at all: last)
    failed = sorted((r for r in results if not r.ok), key=lambda r: (r.start is None, r.start or 0.0))
    first_error = (failed[0].error or 'failed') if failed else None
    fig = {
        'completed': len(ok),
        'failed': len(results) - len(ok),
        'rejected': sum(1 for r in results if not r.ok and r.rejected),
        'max_concurrency': concurrency,
        'duration_s': duration,
        'total_input_tokens': tin,
        'total_output_tokens': tout,
        'request_throughput': len(ok) / d,
        'input_throughput': tin / d,
        'output_throughput': tout / d,
        'total_throughput': (tin + tout) / d,
        'mean_ttft_ms': mean(ttfts),
        'median_ttft_ms': percentile(ttfts, 50),
        'p99_ttft_ms': percentile(ttfts, 99),
        'mean_itl_ms': mean(itls),
        'median_itl_ms': percentile(itls, 50),
        'p99_itl_ms': percentile(itls, 99),
        'mean_e2e_latency_ms': mean(e2e),
        'median_e2e_latency_ms': percentile(e2e, 50),
        'errors': errors,
        'first_error': first_error,
    }
    for k, v in list(fig.items()):
        if isinstance(v, float):
            fig[k] = None if math.isnan(v) else round(v, 3)
    return fig


def format_table(fig, title=None):
    """bench_serving-like text block."""
    lines = ['============ Serving Benchmark Result ============' if not title else '==== %s ====' % title]
    for key in ('completed', 'failed', 'max_concurrency', 'duration_s', 'total_input_tokens', 'total_output_tokens',
                'request_throughput', 'input_throughput', 'output_throughput', 'total_throughput',
                'mean_e2e_latency_ms', 'median_e2e_latency_ms', 'mean_ttft_ms', 'median_ttft_ms', 'p99_ttft_ms',
                'mean_itl_ms', 'median_itl_ms', 'p99_itl_ms'):
        if key in fig and fig[key] is not None:
            lines.append('%-40s %s' % (LABELS[key] + ':', fig[key]))
    return '\n'.join(lines)
