# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import os
import socket

import pytest
import yaml

from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_http as sghttp

CASES = yaml.safe_load(open(os.path.join(os.path.dirname(__file__), 'cases', 'sglang_http.yml')))


class Resp(object):
    def __init__(self, status, body):
        self.status = status
        self._body = body.encode('utf-8')
        self.headers = {}

    def read(self):
        return self._body

    def getcode(self):
        return self.status


def make_opener(case, calls):
    def opener(url, **kw):
        calls.append((url, kw))
        if 'raise' in case:
            r = case['raise']
            if r['kind'] == 'http_error':
                raise HTTPError(url, r['code'], 'x', {}, io.BytesIO(r['body'].encode('utf-8')))
            if r['kind'] == 'timeout':
                raise URLError(socket.timeout('timed out'))
            if r['kind'] == 'refused':
                raise URLError(ConnectionRefusedError(111, 'Connection refused'))
            raise ConnectionResetError(104, 'Connection reset by peer')
        return Resp(case['open']['status'], case['open']['body'])
    return opener


@pytest.mark.parametrize('case', CASES, ids=[c['name'] for c in CASES])
def test_request(case):
    calls = []
    r = sghttp.request('http://127.0.0.1:1/x', 'POST', {'q': 1}, api_key='sekrit', timeout=3,
                       opener=make_opener(case, calls))
    exp = case['expect']
    assert r.status == exp['status']
    if 'data' in exp:
        assert r.data == exp['data']
    if exp.get('error'):
        assert exp['error'] in r.error
    else:
        assert r.error is None
    kw = calls[0][1]
    assert kw['headers']['Authorization'] == 'Bearer sekrit'
    assert kw['headers']['Content-Type'] == 'application/json'
    assert kw['timeout'] == 3 and kw['method'] == 'POST'


def test_base_url():
    assert sghttp.base_url('127.0.0.1', 30000) == 'http://127.0.0.1:30000'
    assert sghttp.base_url('::1', 8, 'https') == 'https://[::1]:8'
    assert sghttp.base_url(None, 1) == 'http://127.0.0.1:1'


def test_iter_sse():
    fp = io.BytesIO(b'data: {"a": 1}\n\n: comment\ndata: {"a": 2}\n\ndata: [DONE]\n\ndata: after\n')
    assert list(sghttp.iter_sse(fp)) == ['{"a": 1}', '{"a": 2}']


def test_get_has_no_body_headers():
    calls = []
    sghttp.get('http://h/health', opener=make_opener({'open': {'status': 200, 'body': ''}}, calls))
    assert calls[0][1]['data'] is None and 'Authorization' not in calls[0][1]['headers']
