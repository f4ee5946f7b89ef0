# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import loadgen

CASES = yaml.safe_load(open(os.path.join(os.path.dirname(__file__), 'cases', 'loadgen.yml')))


class Clock(object):
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class ScriptedResponse(object):
    status = 200
    will_close = False

    def __init__(self, chunks, clock):
        self.chunks = list(chunks)
        self.clock = clock

    def read1(self, n):
        if not self.chunks:
            return b''
        t, data = self.chunks.pop(0)
        self.clock.t = t
        return data.encode('utf-8')

    def read(self):
        return b''

    def close(self):
        pass


class ScriptedConn(object):
    def __init__(self, resp):
        self.resp = resp
        self.sent = None

    def request(self, method, path, body, headers):
        self.sent = (method, path, body, headers)

    def getresponse(self):
        return self.resp


@pytest.mark.parametrize('case', CASES['streams'], ids=[c['name'] for c in CASES['streams']])
def test_stream_one(case):
    clock = Clock()
    conn = ScriptedConn(ScriptedResponse(case['chunks'], clock))
    r = loadgen.Result()
    loadgen.stream_one(conn, '/generate', b'{}', {}, r, clock=clock)
    exp = case['expect']
    assert r.ok is exp['ok'], r.error
    if 'ttft' in exp:
        assert r.ttft == pytest.approx(exp['ttft'])
    if 'itl' in exp:
        assert r.itl == pytest.approx(exp['itl'])
    if 'output_len' in exp:
        assert r.output_len == exp['output_len']
    if 'prompt_len' in exp:
        assert r.prompt_len == exp['prompt_len']
    if 'latency' in exp:
        assert r.latency == pytest.approx(exp['latency'])
    if 'error' in exp:
        assert exp['error'] in r.error
    if 'rejected' in exp:
        assert r.rejected is exp['rejected']


@pytest.mark.parametrize('case', CASES['percentiles'])
def test_percentile(case):
    assert loadgen.percentile(case['values'], case['pct']) == pytest.approx(case['result'])


def test_http_error_status():
    class R(ScriptedResponse):
        status = 503

        def read(self):
            return b'starting'
    r = loadgen.Result()
    loadgen.stream_one(ScriptedConn(R([], Clock())), '/generate', b'{}', {}, r, clock=Clock())
    assert not r.ok and r.error.startswith('HTTP 503')


def test_summarize_names_and_values():
    results = []
    for i in range(4):
        r = loadgen.Result()
        r.ok = True
        r.ttft = 0.1 * (i + 1)
        r.itl = [0.02, 0.04]
        r.latency = 1.0
        r.prompt_len = 100
        r.output_len = 3
        results.append(r)
    bad = loadgen.Result()
    bad.error = 'HTTP 500: x'
    fig = loadgen.summarize(results + [bad], 2.0, 4)
    assert fig['completed'] == 4 and fig['failed'] == 1
    assert fig['request_throughput'] == 2.0
    assert fig['input_throughput'] == 200.0 and fig['output_throughput'] == 6.0 and fig['total_throughput'] == 206.0
    assert fig['mean_ttft_ms'] == 250.0 and fig['median_ttft_ms'] == 250.0
    assert fig['mean_itl_ms'] == 30.0 and fig['mean_e2e_latency_ms'] == 1000.0
    assert fig['errors'] == ['HTTP 500: x']
    for key in ('completed', 'duration_s', 'request_throughput', 'input_throughput', 'output_throughput',
                'total_throughput', 'mean_ttft_ms', 'median_ttft_ms', 'p99_ttft_ms', 'mean_itl_ms',
                'median_itl_ms', 'p99_itl_ms', 'mean_e2e_latency_ms'):
        assert key in fig and key in loadgen.LABELS
    assert loadgen.LABELS['completed'] == 'Successful requests'
    assert 'Output token throughput (tok/s):' in loadgen.format_table(fig)


@pytest.mark.parametrize('case', CASES['prompts'], ids=[c['name'] for c in CASES['prompts']])
def test_make_prompts_ids_stay_in_the_vocabulary(case):
    args = (case['num'], case['input_len'], 8)
    kwargs = dict(seed=case.get('seed', 0), mode='ids', vocab_size=case['vocab_size'])
    if case.get('raises'):
        with pytest.raises(ValueError, match=case['raises']):
            loadgen.make_prompts(*args, **kwargs)
        return
    bodies = [json.loads(b) for b in loadgen.make_prompts(*args, **kwargs)]
    assert len(bodies) == case['num']
    ids = [i for b in bodies for i in b['input_ids']]
    assert all(len(b['input_ids']) == case['input_len'] for b in bodies)
    assert all(isinstance(i, int) and 0 <= i < case['vocab_size'] for i in ids), max(ids)
    if case.get('all_ids_seen'):
        assert set(ids) == set(range(case['vocab_size']))
    if case['vocab_size'] >= 100:
        assert len(set(tuple(b['input_ids'][:4]) for b in bodies)) == case['num']  # no two prompts start alike
    assert bodies == [json.loads(b) for b in loadgen.make_prompts(*args, **kwargs)]  # the seed decides


@pytest.mark.parametrize('status, rejected', CASES['rejected_status'])
def test_rejected_status(status, rejected):
    assert loadgen.rejected_status(status) is rejected


@pytest.mark.parametrize('payload, rejected', CASES['rejected_event'])
def test_rejected_event(payload, rejected):
    assert loadgen.rejected_event(payload.encode('utf-8')) is rejected


def test_http_400_is_a_refusal_and_the_first_error_is_the_first_sent():
    class R(ScriptedResponse):
        status = 400

        def read(self):
            return b'{"error": "input_ids must be a list"}'
    refused = loadgen.Result()
    loadgen.stream_one(ScriptedConn(R([], Clock())), '/generate', b'{}', {}, refused, clock=Clock())
    assert not refused.ok and refused.rejected and refused.error.startswith('HTTP 400')
    later = loadgen.Result()
    later.error, later.start = 'connect: refused', 5.0
    unsent = loadgen.Result()
    unsent.error = 'not sent: benchmark timeout'
    fig = loadgen.summarize([unsent, later, refused], 1.0, 2)
    assert (fig['failed'], fig['rejected']) == (3, 1)
    assert fig['first_error'] == refused.error  # started at 0.0, before the connect error at 5.0
    assert loadgen.summarize([], 1.0)['first_error'] is None


def test_make_prompts_exact_lengths():
    bodies = [json.loads(b) for b in loadgen.make_prompts(3, 17, 5, seed=1, vocab_size=662)]
    assert all(len(b['input_ids']) == 17 for b in bodies)
    assert all(b['sampling_params'] == {'temperature': 0, 'max_new_tokens': 5, 'ignore_eos': True} for b in bodies)
    assert bodies[0]['stream'] is True
    text = json.loads(loadgen.make_prompts(1, 10, 5, mode='text')[0])
    assert len(text['text'].split()) == 10


def test_run_level_calls_the_monitor_around_the_measured_requests():
    """run_level against a loopback SSE server: monitor.start() after the warm-up, stop() after the last request."""
    import threading
    try:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    except ImportError:  # pragma: no cover - Python 2
        pytest.skip('Python 3 only')
    events = []
    sent = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def log_message(self, *args):
            pass

        def do_POST(self):
            sent.append(json.loads(self.rfile.read(int(self.headers['Content-Length'])))['input_ids'])
            events.append('request')
            body = b''.join(b'data: {"meta_info": {"prompt_tokens": 4, "completion_tokens": %d}}\n\n' % i
                            for i in (1, 2)) + b'data: [DONE]\n\n'
            self.send_response(200)
            self.send_header('Content-Type', 'text/event-stream')
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Monitor(object):
        def start(self):
            events.append('start')

        def stop(self):
            events.append('stop')

    server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever)
    thread.daemon = True
    thread.start()
    try:
        fig, dummy = loadgen.run_level('127.0.0.1', server.server_address[1], 2, 4, input_len=4, output_len=2,
                                       warmup=1, timeout=10, monitor=Monitor(), vocab_size=5)
    finally:
        server.shutdown()
        server.server_close()
    assert fig['completed'] == 4 and fig['total_output_tokens'] == 8, fig['errors']
    assert events == ['request', 'start'] + ['request'] * 4 + ['stop']
    assert len(sent) == 5 and all(len(ids) == 4 and all(0 <= i < 5 for i in ids) for ids in sent), sent
