# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Downloading a hub model before any trial (``sglang_model_download: true``).

The ``hf`` command of the huggingface_hub in SGLang's own venv (next to ``sglang_python``) downloads ``repo_id`` at
``revision`` into ``<sglang_model_cache>/<owner>/<name>``; ``HF_ENDPOINT`` points it at a mirror and ``HF_TOKEN``
(from the server's environment) reaches it through the environment only, never the argv. Pure functions: the
inputs' checks, the argv, the environment, the folder the model check then reads.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.llmserve.sglang.plugins.module_utils import model_check

REVISION_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_./-]*$')
ENDPOINT_RE = re.compile(r'^https?://[^\s/]+(/[^\s]*)?$')
PASSED_ENV = ('HF_TOKEN', 'HF_ENDPOINT', 'HF_HUB_ENABLE_HF_TRANSFER', 'HF_HUB_OFFLINE', 'HTTPS_PROXY', 'HTTP_PROXY',
              'NO_PROXY', 'REQUESTS_CA_BUNDLE')


def hf_program(python):
    """The ``hf`` command beside ``python`` (huggingface_hub >= 0.34 installs it with SGLang)."""
    return os.path.join(os.path.dirname(str(python or '')), 'hf')


def local_dir(cache, repo_id):
    return os.path.join(str(cache).rstrip('/'), *str(repo_id).split('/'))


def errors(repo_id, revision, cache, endpoint, python):
    """The problems with the download's inputs, each naming the variable and the fix; empty when fine."""
    out = []
    if not model_check.REPO_ID_RE.match(str(repo_id or '')) or '..' in str(repo_id):
        out.append('sglang_model_path=%s: with sglang_model_download: true give a hub repo id (owner/name), or set '
                   'sglang_model_download: false and give the model folder' % (repo_id,))
    if not REVISION_RE.match(str(revision or '')) or '..' in str(revision):
        out.append('sglang_model_revision=%s: give a branch, tag or commit (letters, digits, _ . / -), e.g. main'
                   % (revision,))
    if not str(cache or '').startswith('/') or '..' in str(cache).split('/'):
        out.append('sglang_model_cache=%s: give an absolute folder on the host, e.g. /var/lib/llmserve/models'
                   % (cache,))
    if endpoint and not ENDPOINT_RE.match(str(endpoint)):
        out.append('HF_ENDPOINT=%s: give the mirror\'s http(s) URL, e.g. https://hf-mirror.example.internal'
                   % (endpoint,))
    if not str(python or '').startswith('/'):
        out.append('sglang_python=%s: give the absolute path of the venv\'s python; its hf command downloads'
                   % (python,))
    return out


def download_argv(python, repo_id, revision, cache):
    """argv of the download (no secret in it): ``hf download REPO --revision R --local-dir DIR``."""
    return [hf_program(python), 'download', str(repo_id), '--revision', str(revision), '--local-dir',
            local_dir(cache, repo_id)]


def download_env(server_env, endpoint=None):
    """The variables the download gets from the server's environment (token, mirror, proxy), and the endpoint."""
    env = dict((k, str(v)) for k, v in (server_env or {}).items() if k in PASSED_ENV and v not in (None, ''))
    if endpoint:
        env['HF_ENDPOINT'] = str(endpoint)
    env['HF_HUB_DISABLE_TELEMETRY'] = '1'
    return env
