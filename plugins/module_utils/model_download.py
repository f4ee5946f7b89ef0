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
import shutil

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


def errors(repo_id, revision, cache, endpoint, python, hf_found=None):
    """The problems with the download's inputs, each naming the variable and the fix; empty when fine.
    ``hf_found``: whether the host has the ``hf`` command beside ``python`` (None: not known yet)."""
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
    elif hf_found is False:
        out.append(no_hf(python))
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


def snapshot(folder):
    """{relative path: (size, mtime_ns)} of the files under ``folder``, the hf client's own ``.cache`` left out;
    empty when the folder is not there. Two snapshots differ when the download wrote a file."""
    out = {}
    folder = str(folder)
    if not os.path.isdir(folder):
        return out
    for root, dirs, files in os.walk(folder):
        if root == folder and '.cache' in dirs:
            dirs.remove('.cache')
        for name in files:
            full = os.path.join(root, name)
            try:
                st = os.stat(full)
            except OSError:
                continue
            out[os.path.relpath(full, folder)] = (st.st_size, getattr(st, 'st_mtime_ns', int(st.st_mtime * 1e9)))
    return out


def written(before, after):
    """The files a download added or rewrote (sorted), from two snapshots."""
    return sorted(name for name, stat in after.items() if before.get(name) != stat)


# what the hf command's error output says -> (the variable to name, which value it shows, the advice); first match wins.
# hf >= 1.0 prints one "Error: ..." line (e.g. "Error: Model 'a/b' not found."), older ones a traceback.
FAILURES = (
    (re.compile(r'RevisionNotFound|Invalid rev id|Revision \S+ not found', re.I), 'sglang_model_revision',
     'revision', 'the hub at {endpoint} has no such branch, tag or commit of {repo_id}'),
    (re.compile(r'GatedRepo|gated repo|401 Client Error|403 Client Error|Invalid (user )?token|Unauthorized|'
                r'Forbidden|Access denied|Access to model \S+ is restricted', re.I),
     'HF_TOKEN', None,
     'the hub at {endpoint} refused access to {repo_id}: give a token that may read it as HF_TOKEN in sglang_env '
     '(a gated model needs its terms accepted on the hub first)'),
    (re.compile(r'RepositoryNotFound|Repository Not Found|404 Client Error|Model \S+ not found', re.I),
     'sglang_model_path', 'repo_id',
     'the hub at {endpoint} has no such model repo (check the owner/name and sglang_model_revision; a private '
     'repo needs HF_TOKEN in sglang_env)'),
    (re.compile(r'No space left on device', re.I), 'sglang_model_cache', 'cache',
     'no space left on the host for {repo_id}: free space or choose another sglang_model_cache'),
    (re.compile(r'Connection ?(refused|Error|reset)|Max retries exceeded|Name or service not known|'
                r'Temporary failure in name resolution|timed? ?out|LocalEntryNotFound|Local entry not found|'
                r'offline mode', re.I),
     'HF_ENDPOINT', 'endpoint',
     'cannot be reached from the host: set HF_ENDPOINT in sglang_env to a hub or mirror the host reaches '
     '(and HTTPS_PROXY if it needs one)'),
)
DEFAULT_ENDPOINT = 'https://huggingface.co'
_ANSI_RE = re.compile(r'\x1b\[[0-9;]*[A-Za-z]')


def _said(output):
    """The line of hf's output that says what went wrong: its ``Error:`` line, else the last line that is not a
    hint or a progress bar."""
    lines = [line.strip() for line in _ANSI_RE.sub('', str(output or '')).replace('\r', '\n').splitlines()]
    lines = [line for line in lines if line]
    errors_ = [line for line in lines if line.startswith('Error:') or re.match(r'^[\w.]+(Error|Exception)\b', line)]
    if errors_:
        return errors_[-1][-300:]
    rest = [line for line in lines if not line.startswith('Hint:') and '%|' not in line]
    return (rest[-1] if rest else '(no output)')[-300:]


def failure(output, repo_id, revision, cache, env):
    """A clear message for a failed download: the variable to change first, then what hf said."""
    values = {'repo_id': repo_id, 'revision': revision, 'cache': cache,
              'endpoint': (env or {}).get('HF_ENDPOINT') or DEFAULT_ENDPOINT}
    text = _ANSI_RE.sub('', str(output or ''))
    said = _said(output)
    for pattern, var, key, advice in FAILURES:
        if pattern.search(text):
            name = var if key is None else '%s=%s' % (var, values[key])
            return '%s: %s. hf said: %s' % (name, advice.format(**values), said)
    return 'sglang_model_path=%s: the download from %s failed. hf said: %s' % (repo_id, values['endpoint'], said)


def no_hf(python):
    return ('sglang_python=%s: there is no hf command beside it (%s); huggingface_hub >= 0.34 installs it with SGLang. '
            'Install SGLang with sglang_install: true, or download the model yourself and give its folder as '
            'sglang_model_path with sglang_model_download: false' % (python, hf_program(python)))


def _remove_made(made):
    """Remove the folders a failed download made (the deepest first), with the hf client's .cache in them."""
    for path in reversed(made):
        if os.path.isdir(path):
            shutil.rmtree(os.path.join(path, '.cache'), ignore_errors=True)
            try:
                os.rmdir(path)
            except OSError:
                pass


def download(run_command, repo_id, revision, cache, python, server_env=None, endpoint=None, check_mode=False,
             exists=os.path.exists, makedirs=os.makedirs, remove=None):
    """Download ``repo_id`` into ``local_dir(cache, repo_id)`` with the ``hf`` command.

    ``run_command(argv, env)`` -> (rc, stdout, stderr) runs the command with ``env`` added to its environment.
    ``endpoint`` (else ``HF_ENDPOINT`` of ``server_env``) is the hub. A failed first download that wrote no file leaves
    no folder behind.
    -> {'failed': bool, 'msg': str, 'changed': bool, 'path': folder, 'written': [...], 'files': N, 'bytes': N,
    'cmd': argv}. Nothing runs in check mode: changed is whether the folder is not yet a whole model (the hub is not
    asked whether it has a newer revision). The result names no token: the argv has none, the output is not kept."""
    folder = local_dir(cache, repo_id)
    argv = download_argv(python, repo_id, revision, cache)
    endpoint = endpoint or (server_env or {}).get('HF_ENDPOINT') or None
    env = download_env(server_env, endpoint)
    out = {'failed': False, 'changed': False, 'path': folder, 'written': [], 'files': 0, 'bytes': 0, 'cmd': argv,
           'endpoint': env.get('HF_ENDPOINT') or DEFAULT_ENDPOINT}
    problems = errors(repo_id, revision, cache, endpoint, python)
    if not problems and not exists(argv[0]):
        problems = [no_hf(python)]
    if problems:
        out.update(failed=True, msg='; '.join(problems))
        return out
    before = snapshot(folder)
    if check_mode:
        whole = not model_check.check(folder)['errors']
        out.update(changed=not whole, files=len(before), bytes=sum(s for s, _m in before.values()),
                   msg='%s is %s in %s' % (repo_id, 'a whole model' if whole else 'to be downloaded', folder))
        return out
    made = [path for path in (str(cache), os.path.dirname(folder), folder) if not exists(path)]
    if not exists(str(cache)):
        makedirs(str(cache), 0o755)
    rc, stdout, stderr = run_command(argv, env)
    after = snapshot(folder)
    if rc != 0 and not after and made:
        (remove or _remove_made)(made)
    out.update(written=written(before, after), files=len(after), bytes=sum(s for s, _m in after.values()))
    out['changed'] = bool(out['written']) or len(after) != len(before)
    if rc != 0:
        out.update(failed=True, msg=failure('%s\n%s' % (stdout, stderr), repo_id, revision, cache, env))
        return out
    out['msg'] = '%s@%s in %s: %d file(s), %d written' % (
        repo_id, revision, folder, out['files'], len(out['written']))
    return out
