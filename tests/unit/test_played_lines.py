# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every failure line the lab plays, and every line regex of the failure signatures, names where its text comes from.

Played lines: the ``error``, ``frames`` and ``traceback`` params of the rules of the lab's behaviour tables
(tests/lab/behaviour/*.yml, tests/integration/behaviour.yml); a crash rule without ``error`` or ``traceback`` plays
the fake server's default error line, so it counts as playing ``error``. Their sources: the rule's ``source:``
mapping (param -> text or list of texts). Signatures: the line regexes of roles/backend_trial/files/
failure_signatures.yml; their sources: the signature's ``sources:`` mapping (regex -> text or list of texts).

A source is one of:

* ``PATH:LINE (DIST VERSION)``: a file of an installed wheel, site-packages relative (``PATH (DIST VERSION)`` for a
  binary, which has no lines), or a file of the Python standard library (``argparse.py:1871 (Python 3.11.7)``);
* ``PATH[:LINE] ...``: a file of this repository (a capture of the real server, a dump of its parser, the
  collection's own message);
* ``seeds ...``: seen in the deployments behind this project;
* for ``frames`` only: ``each frame's own file and line (DIST VERSION, ...)``; then every frame names a file under
  ``{site}`` (or tvm-ffi's Cython file) and a line.

With the lab's installed wheels on this machine (env LLMSERVE_LAB_SITE, else the lab's real SGLang 0.5.23), every
wheel source's file and line must exist there, its DIST VERSION must be the installed one, and every played frame's
code must be the line it names in the function it names.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
TABLES = sorted(glob.glob(os.path.join(ROOT, 'tests', 'lab', 'behaviour', '*.yml'))) + [
    os.path.join(ROOT, 'tests', 'integration', 'behaviour.yml')]
SIGNATURES = os.path.join(ROOT, 'roles', 'backend_trial', 'files', 'failure_signatures.yml')
PLAYED_PARAMS = ('error', 'frames', 'traceback')
LINE_KEYS = ('lines', 'all_lines', 'no_lines')
SITE = os.environ.get('LLMSERVE_LAB_SITE') or '/var/lib/llmserve-lab/sglang-0.5.23/lib/python3.11/site-packages'

# Played lines and signature regexes whose text no installed wheel, capture or seed confirms (yet). The list is exact:
# an entry that gets a source, or goes away, must leave it too.
UNSOURCED = frozenset([
    # the sampler line of earlier SGLang releases (0.4.6.post5 srt/layers/sampler.py:65), not in the lab's 0.5.23
    ('roles/backend_trial/files/failure_signatures.yml', 'nan_logits', 'NaN in the logits'),
])

WHEEL_SOURCE = re.compile(r'^(?P<path>[\w./+-]+?)(?::(?P<line>\d+))? \((?P<dist>[A-Za-z][\w.-]*) (?P<version>\d[\w.+-]*)\)')
REPO_SOURCE = re.compile(r'^(?P<path>[\w./+-]+?)(?::(?P<line>\d+))?(?: .*)?$')
FRAMES_SOURCE = re.compile(r"^each frame's own file and line \((?P<dists>[^)]+)\)$")
FRAME = re.compile(r'^File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>[\w.<>]+)$')
BINARY = re.compile(r'\.so(?:\.\d+)*$')
CYTHON_PREFIX = 'python/tvm_ffi/'


def rel(path):
    return os.path.relpath(path, ROOT)


def as_list(value):
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def played_entries():
    """(table, rule name, param, played text or None, its sources) for every line a behaviour rule plays."""
    out = []
    for path in TABLES:
        with open(path, encoding='utf-8') as f:
            rules = (yaml.safe_load(f) or {}).get('rules') or []
        for rule in rules:
            params = rule.get('params') or {}
            behaviour = rule.get('behaviour', rule.get('behavior', 'ready'))
            played = [k for k in PLAYED_PARAMS if params.get(k)]
            if behaviour in ('crash', 'die_after_ready') and not ({'error', 'traceback'} & set(played)):
                played.append('error')      # the fake's default error line
            sources = rule.get('source') or {}
            for key in played:
                out.append((rel(path), rule.get('name'), key, params.get(key), as_list(sources.get(key))))
    return out


def signature_entries():
    """(file, signature id, regex, sources) for every line regex of the failure signatures."""
    with open(SIGNATURES, encoding='utf-8') as f:
        sigs = yaml.safe_load(f)['signatures']
    out = []
    for sig in sigs:
        sources = sig.get('sources') or {}
        for key in LINE_KEYS:
            for pat in as_list((sig.get('match') or {}).get(key)):
                out.append((rel(SIGNATURES), sig['id'], pat, as_list(sources.get(pat))))
    return out


def source_kind(text, param=None):
    """'seeds', 'frames', 'repo' or 'wheel' for a well-formed source, else None."""
    text = str(text).strip()
    if text == 'seeds' or text.startswith('seeds '):
        return 'seeds'
    if param == 'frames' and FRAMES_SOURCE.match(text):
        return 'frames'
    m = REPO_SOURCE.match(text)
    if m and os.path.isfile(os.path.join(ROOT, m.group('path'))):
        return 'repo'
    m = WHEEL_SOURCE.match(text)
    if m and (m.group('line') or BINARY.search(m.group('path'))):
        return 'wheel'
    return None


def line_count(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        return sum(1 for _line in f)


def problems_of(sources, param=None):
    """What is wrong with one entry's sources: [] when it has at least one and each is well formed."""
    if not sources:
        return ['no source']
    out = []
    for src in sources:
        kind = source_kind(src, param)
        if kind is None:
            out.append('not a source: %r' % (src,))
        elif kind == 'repo':
            m = REPO_SOURCE.match(src)
            path = os.path.join(ROOT, m.group('path'))
            if m.group('line') and int(m.group('line')) > line_count(path):
                out.append('%s has no line %s' % (m.group('path'), m.group('line')))
    return out


def frames_of(text):
    """[(path, line, function, code or None)] of a ``frames`` text (each ``File`` line, then its code line)."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    out = []
    for i, line in enumerate(lines):
        m = FRAME.match(line)
        if m:
            code = lines[i + 1] if i + 1 < len(lines) and not FRAME.match(lines[i + 1]) else None
            out.append((m.group('path'), int(m.group('line')), m.group('func'), code))
        elif i == 0 or not FRAME.match(lines[i - 1]):
            out.append((None, 0, None, line))        # a line that is neither a frame nor its code
    return out


# --------------------------------------------------------------------------- every entry has a source
@pytest.mark.parametrize('entry', played_entries(), ids=lambda e: '%s:%s:%s' % e[:3])
def test_every_played_line_names_its_source(entry):
    table, name, param, text, sources = entry
    key = (table, name, param)
    problems = problems_of(sources, param)
    if key in UNSOURCED:
        assert problems == ['no source'], '%s now has a source: take it off UNSOURCED (%r)' % (key, problems)
        return
    assert not problems, '%s plays %s %r without a source: %s' % (table, name, param, '; '.join(problems))
    if param == 'frames' and any(source_kind(s, param) == 'frames' for s in sources):
        for path, _line, _func, code in frames_of(text):
            assert path is not None, '%s %s: %r is no frame' % (table, name, code)
            assert path.startswith('{site}/') or path.startswith(CYTHON_PREFIX), \
                '%s %s: the frame %s names no installed file' % (table, name, path)


@pytest.mark.parametrize('entry', signature_entries(), ids=lambda e: '%s:%s' % (e[1], e[2]))
def test_every_signature_regex_names_its_source(entry):
    path, sid, pat, sources = entry
    key = (path, sid, pat)
    problems = problems_of(sources)
    if key in UNSOURCED:
        assert problems == ['no source'], '%s now has a source: take it off UNSOURCED (%r)' % (key, problems)
        return
    assert not problems, 'signature %s: %r without a source: %s' % (sid, pat, '; '.join(problems))


def test_unsourced_list_names_existing_entries():
    keys = set(e[:3] for e in played_entries()) | set(e[:3] for e in signature_entries())
    assert sorted(UNSOURCED - keys) == []


def test_the_checks_can_fail():
    assert problems_of([]) == ['no source']
    assert problems_of(['flashinfer/fused_moe/core.py (flashinfer-python 0.7.2)']) != []   # no line, not a binary
    assert problems_of(['somewhere in flashinfer']) != []
    assert problems_of(['tests/data/sglang/server-args-0.5.23.json:99999999']) != []
    assert problems_of(['flashinfer/fused_moe/core.py:6518 (flashinfer-python 0.7.2)']) == []
    assert problems_of(['nvidia/cu13/lib/libcudart.so.13 (nvidia-cuda-runtime 13.0.96)']) == []
    assert problems_of(['seeds (RTX PRO 6000, 2026)']) == []
    assert problems_of(["each frame's own file and line (sglang 0.5.23)"], 'frames') == []
    assert problems_of(["each frame's own file and line (sglang 0.5.23)"], 'error') != []
    assert frames_of('File "{site}/a.py", line 3, in f\n  x()\nRuntimeError: boom')[-1][0] is None


# --------------------------------------------------------------------------- against the installed wheels
def installed():
    if not os.path.isdir(SITE):
        pytest.skip('the lab\'s installed wheels are not on this machine (%s)' % SITE)
    return SITE


def python_stdlib_and_version(site):
    """The lab interpreter's standard library folder and version, from its venv's pyvenv.cfg."""
    cfg = {}
    with open(os.path.join(site, '..', '..', '..', 'pyvenv.cfg'), encoding='utf-8') as f:
        for line in f:
            if '=' in line:
                k, v = line.split('=', 1)
                cfg[k.strip()] = v.strip()
    version = cfg.get('version') or cfg.get('version_info', '')
    major_minor = '.'.join(version.split('.')[:2])
    return os.path.join(os.path.dirname(cfg['home']), 'lib', 'python' + major_minor), version


def installed_versions(site):
    out = {}
    for info in glob.glob(os.path.join(site, '*.dist-info')):
        name, _sep, version = os.path.basename(info)[:-len('.dist-info')].rpartition('-')
        out[name.lower().replace('-', '_')] = version
    return out


def wheel_sources():
    out = []
    for table, name, param, _text, sources in played_entries():
        out.extend(('%s %s %s' % (table, name, param), s) for s in sources if source_kind(s, param) == 'wheel')
    for _path, sid, pat, sources in signature_entries():
        out.extend(('%s %r' % (sid, pat), s) for s in sources if source_kind(s) == 'wheel')
    return out


@pytest.mark.parametrize('where,source', wheel_sources(), ids=lambda x: str(x)[:60])
def test_wheel_sources_exist_in_the_installed_wheels(where, source):
    site = installed()
    m = WHEEL_SOURCE.match(source)
    dist, version = m.group('dist'), m.group('version')
    if dist == 'Python':
        base, have = python_stdlib_and_version(site)
    else:
        base, have = site, installed_versions(site).get(dist.lower().replace('-', '_'))
    assert have == version, '%s: %s is %s where the lab has %s' % (where, dist, version, have)
    path = os.path.join(base, m.group('path'))
    assert os.path.isfile(path), '%s: no %s in %s' % (where, m.group('path'), base)
    if m.group('line'):
        with open(path, encoding='utf-8', errors='replace') as f:
            lines = f.read().splitlines()
        number = int(m.group('line'))
        assert number <= len(lines) and lines[number - 1].strip(), '%s: %s has no line %d' % (where, path, number)


def played_frames():
    out = []
    for table, name, param, text, sources in played_entries():
        if param == 'frames' and any(source_kind(s, param) == 'frames' for s in sources):
            out.extend(('%s %s' % (table, name), frame) for frame in frames_of(text))
    return out


@pytest.mark.parametrize('where,frame', played_frames(), ids=lambda x: str(x)[:70])
def test_played_frames_are_the_installed_code(where, frame):
    site = installed()
    path, number, func, code = frame
    if path.startswith(CYTHON_PREFIX):
        path = path[len('python/'):]            # tvm-ffi's Cython sources, as compiled, ship in the wheel
    else:
        path = path[len('{site}/'):]
    full = os.path.join(site, path)
    assert os.path.isfile(full), '%s: no %s' % (where, path)
    with open(full, encoding='utf-8', errors='replace') as f:
        lines = f.read().splitlines()
    assert number <= len(lines), '%s: %s has no line %d' % (where, path, number)
    if code is not None:
        assert lines[number - 1].strip() == code, '%s: %s:%d is %r' % (where, path, number, lines[number - 1].strip())
    short = func.rsplit('.', 1)[-1]
    defs = [ln for ln in lines[:number] if re.match(r'\s*(?:async\s+)?(?:c?p?def)\s+%s\b' % re.escape(short), ln)]
    assert defs, '%s: no function %s above %s:%d' % (where, func, path, number)
