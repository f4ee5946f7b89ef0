# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_vocab: the cases of cases/_vocab.yml, and server_model_path against scripted answers."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import _vocab
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_http

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, 'cases', '_vocab.yml')) as _f:
    CASES = yaml.safe_load(_f)


def ids(section):
    return [c['name'] for c in CASES[section]]


class Files(object):
    """A read() over {path: JSON data | {text: raw} | {error: text}}; it records what it was asked."""

    def __init__(self, files):
        self.files, self.reads = files, []

    def __call__(self, path):
        self.reads.append(path)
        value = self.files.get(path)
        if isinstance(value, dict) and set(value) == set(['error']):
            raise OSError(value['error'])
        if isinstance(value, dict) and set(value) == set(['text']):
            return value['text']
        return None if value is None else json.dumps(value)


def matches(want, got):
    """want: a value, or a list of substrings that ``got`` holds in order."""
    if isinstance(want, list) and isinstance(got, str):
        at = 0
        for part in want:
            at = got.find(part, at)
            if at < 0:
                return False
        return True
    if isinstance(want, str) and isinstance(got, str):
        return want in got
    return want == got


@pytest.mark.parametrize('case', CASES['config'], ids=ids('config'))
def test_from_config(case):
    size, where = _vocab.from_config(case['config'])
    assert size == case['want'][0]
    assert case['want'][1] in where


@pytest.mark.parametrize('case', CASES['tokenizer'], ids=ids('tokenizer'))
def test_from_tokenizer(case):
    size, where = _vocab.from_tokenizer(case['tokenizer'])
    assert size == case['want'][0]
    assert case['want'][1] in where


@pytest.mark.parametrize('case', CASES['folder'], ids=ids('folder'))
def test_from_folder(case):
    root = case['path'] or ''
    got = _vocab.from_folder(case['path'], Files(dict((root + '/' + k, v) for k, v in case['files'].items())))
    want = case['want']
    assert got['vocab_size'] == want['vocab_size']
    if 'source' in want:
        assert matches(want['source'], got['source']), got['source']
    if 'problems' in want:
        assert len(got['problems']) == len(want['problems']), got['problems']
        for part, problem in zip(want['problems'], got['problems']):
            assert part in problem, (part, problem)


@pytest.mark.parametrize('case', CASES['resolve'], ids=ids('resolve'))
def test_resolve(case):
    def server():
        if case.get('server_error'):
            raise ValueError(case['server_error'])
        return case.get('server_folder')
    read = Files(case['files'])
    folders = [server if f == 'server' else f for f in case['folders']]
    got = _vocab.resolve(case.get('vocab_size'), folders, read)
    assert set(got) == set(['mode', 'vocab_size', 'source', 'note'])
    for key, want in case['want'].items():
        assert matches(want, got[key]), (key, got[key])
    if 'reads' in case:
        assert read.reads == case['reads']


@pytest.mark.parametrize('answers, want', [
    ([(200, {'model_path': '/models/tiny', 'served_model_name': 'tiny'})], '/models/tiny'),
    ([(404, None), (200, {'model_path': '/models/old'})], '/models/old'),
    ([(404, None), (404, None)], ValueError('GET /get_model_info: HTTP 404')),
    ([(None, 'refused')], ValueError('GET /model_info: no HTTP answer: refused')),
    ([(200, {'model_path': ''})], ValueError('GET /model_info: no model_path in the answer')),
    ([(200, 'not json')], ValueError('no model_path in the answer')),
])
def test_server_model_path(monkeypatch, answers, want):
    asked = []

    def get(url, api_key=None, timeout=None, validate_certs=True):
        asked.append((url, api_key))
        status, data = answers[len(asked) - 1]
        if status is None:
            return sglang_http.Reply(None, u'', None, 0.0, data)
        return sglang_http.Reply(status, json.dumps(data), data if isinstance(data, dict) else None, 0.0, None)
    monkeypatch.setattr(sglang_http, 'get', get)
    if isinstance(want, ValueError):
        with pytest.raises(ValueError, match=str(want).replace('(', r'\(').replace(')', r'\)')):
            _vocab.server_model_path('http://127.0.0.1:30000', api_key='k')
    else:
        assert _vocab.server_model_path('http://127.0.0.1:30000', api_key='k') == want
    assert len(asked) == len(answers)
    assert asked[0] == ('http://127.0.0.1:30000/model_info', 'k')
