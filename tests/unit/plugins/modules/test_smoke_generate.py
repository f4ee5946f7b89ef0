# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import json

import pytest

from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible_collections.llmserve.sglang.plugins.modules import smoke_generate as mod

HU = 'ansible_collections.llmserve.sglang.plugins.module_utils.sglang_http.open_url'


class Resp(object):
    def __init__(self, body):
        self.status = 200
        self.headers = {}
        self._b = json.dumps(body).encode('utf-8')

    def read(self):
        return self._b

    def getcode(self):
        return 200


def server(answers, calls):
    """answers: prompt/message substring -> text, or an exception instance."""
    def open_url(url, data=None, **kw):
        body = json.loads(data)
        calls.append((url, body, kw))
        key = body.get('text') or body.get('prompt') or body['messages'][-1]['content']
        for sub, ans in answers.items():
            if sub in key:
                if isinstance(ans, Exception):
                    raise ans
                if url.endswith('/generate'):
                    return Resp({'text': ans, 'meta_info': {}})
                return Resp({'choices': [{'index': 0, 'message': {'role': 'assistant', 'content': ans}}]})
        raise AssertionError(key)
    return open_url


GOOD = {'France': ' Paris. It is', '17 + 25': ' 42', 'hello': 'Hello!'}


def test_all_good(run_module, mocker):
    calls = []
    mocker.patch(HU, side_effect=server(GOOD, calls))
    res = run_module(mod, {'port': 30001, 'api_key': 's3cr3t', 'served_model_name': 'glm'})
    assert res['ok'] is True and res['reason'] is None and res['changed'] is False
    assert [c['name'] for c in res['checks']] == ['capital', 'arithmetic', 'chat']
    assert calls[0][0] == 'http://127.0.0.1:30001/generate'
    assert calls[0][1]['sampling_params']['temperature'] == 0
    assert calls[2][0].endswith('/v1/chat/completions') and calls[2][1]['model'] == 'glm'
    assert calls[2][2]['headers']['Authorization'] == 'Bearer s3cr3t'
    assert 'benchmark' not in res
    assert 's3cr3t' not in json.dumps(res)


@pytest.mark.parametrize('answers,reason', [
    (dict(GOOD, France='!!!!!!!!!!!!!!!!!!!!'), 'garbage'),
    (dict(GOOD, France='++++++++'), 'garbage'),
    (dict(GOOD, France=' Lyon'), 'wrong_answer'),
    (dict(GOOD, hello=''), 'empty'),
    (dict(GOOD, France=u'\ufffd\ufffd\ufffd'), 'replacement_chars'),
    (dict(GOOD, France='nan nan nan'), 'nan'),
    (dict(GOOD, France=HTTPError('u', 500, 'x', {}, io.BytesIO(b'{"error": "NaN in the logits"}'))), 'nan'),
    (dict(GOOD, France=HTTPError('u', 500, 'x', {}, io.BytesIO(b'Internal Server Error'))), 'http_error'),
    (dict(GOOD, France=URLError(ConnectionRefusedError(111, 'Connection refused'))), 'http_error'),
    (dict(GOOD, France=URLError(__import__('socket').timeout('timed out'))), 'timeout'),
    (dict(GOOD, France=' Lyon', hello='!!!!!!!!'), 'garbage'),
])
def test_failures(run_module, mocker, answers, reason):
    mocker.patch(HU, side_effect=server(answers, []))
    res = run_module(mod, {})
    assert res['ok'] is False and res['reason'] == reason, res['checks']
    assert res['evidence']


def test_custom_prompts(run_module, mocker):
    calls = []
    mocker.patch(HU, side_effect=server({'Japan': ' Tokyo.'}, calls))
    res = run_module(mod, {'prompts': [{'name': 'jp', 'prompt': 'The capital city of Japan is', 'max_tokens': 4,
                                        'expect_any': ['Tokyo']}]})
    assert res['ok'] and res['checks'][0]['name'] == 'jp'
    assert calls[0][1]['sampling_params']['max_new_tokens'] == 4


def test_prompt_without_text_fails(run_module):
    res = run_module(mod, {'prompts': [{'name': 'x'}]})
    assert res['failed'] and 'needs prompt or messages' in res['msg']


def test_benchmark_runs_levels(run_module, mocker):
    mocker.patch(HU, side_effect=server(GOOD, []))
    seen = []

    def run_level(host, port, level, n, **kw):
        seen.append((level, n, kw['input_len'], kw['output_len']))
        return {'completed': n, 'output_throughput': 100.0 * level}, []
    mocker.patch.object(mod.loadgen, 'run_level', side_effect=run_level)
    res = run_module(mod, {'benchmark': {'concurrency': [1, 64], 'input_len': 128, 'output_len': 32}})
    assert seen == [(1, 8, 128, 32), (64, 256, 128, 32)]
    assert res['benchmark']['concurrency']['64']['output_throughput'] == 6400.0
    assert res['benchmark']['labels']['mean_ttft_ms'] == 'Mean TTFT (ms)'
    assert res['benchmark']['settings'] == {
        'concurrency': [1, 64], 'num_prompts': None, 'input_len': 128, 'output_len': 32, 'warmup': 1, 'timeout': 600,
        'input_mode': 'ids', 'seed': 0, 'gpu_sampling': True, 'sample_interval': 0.5, 'nvidia_smi': 'nvidia-smi'}


def test_benchmark_skipped_when_smoke_fails_and_in_check_mode(run_module, mocker):
    mocker.patch(HU, side_effect=server(dict(GOOD, France='!!!!!!!!'), []))
    rl = mocker.patch.object(mod.loadgen, 'run_level')
    res = run_module(mod, {'benchmark': {'concurrency': [1]}})
    assert 'benchmark' not in res and not rl.called
    mocker.patch(HU, side_effect=server(GOOD, []))
    res = run_module(mod, {'benchmark': {'concurrency': [1]}, '_ansible_check_mode': True})
    assert res['ok'] and 'benchmark' not in res and not rl.called


def test_bad_benchmark_levels(run_module):
    res = run_module(mod, {'benchmark': {'concurrency': [0]}})
    assert res['failed'] and 'concurrency' in res['msg']
