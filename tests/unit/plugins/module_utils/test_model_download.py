# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/model_download.py, from the YAML cases in cases/model_download.yml."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.llmserve.sglang.plugins.module_utils import model_download as md

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, 'cases', 'model_download.yml')) as _handle:
    CASES = yaml.safe_load(_handle)


@pytest.mark.parametrize('case', CASES['errors'], ids=[c['name'] for c in CASES['errors']])
def test_errors(case):
    got = md.errors(**case['args'])
    assert len(got) == len(case['errors']), got
    for want, message in zip(case['errors'], got):
        assert want in message


@pytest.mark.parametrize('case', CASES['argv'], ids=[c['name'] for c in CASES['argv']])
def test_argv(case):
    assert md.download_argv(**case['args']) == case['argv']


@pytest.mark.parametrize('case', CASES['env'], ids=[c['name'] for c in CASES['env']])
def test_env(case):
    env = md.download_env(case['server_env'], case['endpoint'])
    assert env == case['env']
    assert 'hf_secret' not in ' '.join(md.download_argv('/v/bin/python3', 'a/b', 'main', '/m'))


@pytest.mark.parametrize('case', CASES['failure'], ids=[c['name'] for c in CASES['failure']])
def test_failure(case):
    revision = 'v9' if 'revision' in case['name'] else 'main'
    msg = md.failure(case['output'], 'llmlab/nope', revision, '/m', case['env'])
    assert msg.startswith(case['starts']), msg
    assert case['holds'] in msg, msg
    assert 'hf_secret' not in msg


class FakeHf(object):  # pylint: disable=too-few-public-methods
    """Plays the hf command: writes ``files`` into the --local-dir (only those whose content differs), -> rc."""

    def __init__(self, files, rc=0, output=''):
        self.files, self.rc, self.output, self.calls = files, rc, output, []

    def __call__(self, argv, env):
        self.calls.append((argv, env))
        folder = argv[argv.index('--local-dir') + 1]
        if not os.path.isdir(folder):  # hf makes its own metadata folder first
            os.makedirs(os.path.join(folder, '.cache', 'huggingface'))
        for name, data in self.files.items():
            path = os.path.join(folder, name)
            if os.path.exists(path) and open(path, 'rb').read() == data:
                continue
            if not os.path.isdir(os.path.dirname(path)):
                os.makedirs(os.path.dirname(path))
            with open(path, 'wb') as handle:
                handle.write(data)
        return self.rc, '', self.output


MODEL = {'config.json': b'{"model_type": "qwen2"}', 'model.safetensors': b'x' * 64, 'tokenizer.json': b'{}',
         '.cache/huggingface/download/model.safetensors.metadata': b'etag'}


def _venv(tmp_path):
    bindir = tmp_path / 'venv' / 'bin'
    bindir.mkdir(parents=True)
    (bindir / 'hf').write_text(u'#!/bin/sh\n')
    return str(bindir / 'python3')


def test_download_then_nothing_to_do(tmp_path):
    python, cache = _venv(tmp_path), str(tmp_path / 'models')
    hf = FakeHf(MODEL)
    env = {'HF_TOKEN': 'hf_secret', 'HF_ENDPOINT': 'http://10.77.0.1:8090', 'CUDA_HOME': '/usr/local/cuda'}
    # check mode: nothing there yet -> changed, nothing ran, no folder made
    got = md.download(hf, 'llmlab/tiny', 'main', cache, python, env, check_mode=True)
    assert (got['failed'], got['changed'], hf.calls) == (False, True, []) and not os.path.exists(cache)
    got = md.download(hf, 'llmlab/tiny', 'main', cache, python, env)
    assert not got['failed'] and got['changed'], got
    assert got['path'] == os.path.join(cache, 'llmlab', 'tiny')
    assert got['written'] == ['config.json', 'model.safetensors', 'tokenizer.json'] and got['files'] == 3
    argv, passed = hf.calls[0]
    assert 'hf_secret' not in ' '.join(argv) and passed['HF_TOKEN'] == 'hf_secret' and 'CUDA_HOME' not in passed
    assert got['endpoint'] == 'http://10.77.0.1:8090'
    # again: hf rewrites nothing -> not changed; check mode on the whole folder -> not changed
    got = md.download(hf, 'llmlab/tiny', 'main', cache, python, env)
    assert (got['failed'], got['changed'], got['written']) == (False, False, []), got
    got = md.download(hf, 'llmlab/tiny', 'main', cache, python, env, check_mode=True)
    assert (got['failed'], got['changed']) == (False, False), got
    # the hub has a new weight file: rewritten -> changed, only that file
    hf.files = dict(MODEL, **{'model.safetensors': b'y' * 64})
    got = md.download(hf, 'llmlab/tiny', 'main', cache, python, env)
    assert got['changed'] and got['written'] == ['model.safetensors'], got


def test_download_failures(tmp_path):
    python, cache = _venv(tmp_path), str(tmp_path / 'models')
    hf = FakeHf({}, rc=1, output='huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error.\n'
                                 'Repository Not Found for url: http://10.77.0.1:8090/api/models/llmlab/nope')
    got = md.download(hf, 'llmlab/nope', 'main', cache, python, {'HF_TOKEN': 'hf_secret'},
                      endpoint='http://10.77.0.1:8090')
    assert got['failed'] and got['msg'].startswith('sglang_model_path=llmlab/nope: the hub at http://10.77.0.1:8090 '), got
    assert hf.calls[0][1]['HF_ENDPOINT'] == 'http://10.77.0.1:8090'
    # the failed first download leaves no folder behind (not the cache, not the owner's folder)
    assert not os.path.exists(cache), os.listdir(str(tmp_path))
    # bad inputs: nothing runs
    hf.calls = []
    got = md.download(hf, '/models/x', 'main', cache, python, {})
    assert got['failed'] and 'sglang_model_download: true give a hub repo id' in got['msg'] and hf.calls == []
    # no hf beside the python: nothing runs, the message names sglang_python and the way out
    got = md.download(hf, 'llmlab/tiny', 'main', cache, str(tmp_path / 'other' / 'python3'), {})
    assert got['failed'] and got['msg'].startswith('sglang_python=') and 'no hf command' in got['msg']
    assert hf.calls == []
