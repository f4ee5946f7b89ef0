# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Install a pinned SGLang into the venv of ``sglang_python``: the decisions, as pure functions.

- ``validate`` checks the inputs; every error names the variable and the fix.
- ``requirement`` and ``installer_argv`` build the pip / uv argv lists (never a shell string): a dry run first
  (``pip install --dry-run``: resolves the pinned version and every dependency from the index, downloads, changes
  nothing), then the install itself.
- ``INSPECT_SNIPPET`` runs with ``sglang_python`` and says what is installed (the version, and for every wanted
  extra the requirements that are not satisfied); ``parse_inspect`` reads its output and ``compare`` says whether
  anything must be installed (nothing when the version matches and every wanted extra is satisfied).
- ``min_driver`` gives the NVIDIA driver the wheels' CUDA needs, ``driver_ok`` compares it with the host's.
- ``parse_dry_run`` reads pip's ``--report`` JSON (or uv's ``Would install`` lines): what would be installed.
- ``error_message`` turns a failed pip / uv run into one line that says what went wrong (no such version, index
  unreachable) and what to do.

Stdlib only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_flags

MARKER = '@@LLMSERVE_SGLANG_INSTALL@@'

# PEP 440 release versions as sites pin them (0.5.23, 0.5.23.post1, 0.6.0rc1, 0.5.10.dev3); no ranges, no wildcards
VERSION_RE = re.compile(r'^[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?$')
EXTRA_RE = re.compile(r'^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$')
URL_RE = re.compile(r'^(https?|file)://[^\s]+$')
INSTALLERS = ('auto', 'pip', 'uv')

# The CUDA the sglang wheels (and the torch they pin) are built for, by sglang version: the first row whose
# version is at most the wanted one wins. Sources: sglang's pyproject (torch / sglang-kernel pins) and its
# release notes; 0.5.20 moved to CUDA 13.
WHEEL_CUDA = (
    ((0, 5, 20), 13),
    ((0, 0), 12),
)
# Minimum Linux driver for a CUDA major version (NVIDIA CUDA toolkit release notes, "CUDA Toolkit and
# Corresponding Driver Versions"; 12.x with minor version compatibility).
CUDA_MIN_DRIVER = {13: '580.65.06', 12: '525.60.13'}

# Runs on the target with sglang_python: python -c INSPECT_SNIPPET EXTRAS_JSON KERNEL_MODULE
# Prints MARKER + one JSON line: {python, installed, version, missing: {extra: [requirement, ...]}, kernel_error}.
INSPECT_SNIPPET = r'''
import json, re, sys
M = "@@LLMSERVE_SGLANG_INSTALL@@"
extras = json.loads(sys.argv[1]) if len(sys.argv) > 1 else []
kernel = sys.argv[2] if len(sys.argv) > 2 else ""
out = {"python": "%d.%d.%d" % sys.version_info[:3], "installed": False, "version": None, "missing": {},
       "kernel_error": None, "unknown_extras": []}
def emit():
    sys.stdout.write("\n" + M + json.dumps(out) + "\n")
    sys.stdout.flush()
    sys.exit(0)
try:
    import importlib.metadata as md
except ImportError:
    emit()
try:
    dist = md.distribution("sglang")
except Exception:
    emit()
out["installed"] = True
out["version"] = dist.version
try:
    from packaging.requirements import Requirement
except ImportError:
    try:
        from pip._vendor.packaging.requirements import Requirement
    except ImportError:
        Requirement = None
def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()
def satisfied(req):
    try:
        have = md.version(req.name)
    except Exception:
        return False
    return not req.specifier or req.specifier.contains(have, prereleases=True)
reqs = list(dist.requires or [])
provided = set(norm(e) for e in (dist.metadata.get_all("Provides-Extra") or []))
def missing_for(extra, seen):
    found = []
    if extra in seen:
        return found
    seen.add(extra)
    for text in reqs:
        if Requirement is None:
            m = re.search(r"extra\s*==\s*[\"']([^\"']+)[\"']", text)
            if m and norm(m.group(1)) == extra:
                name = re.split(r"[\s\[<>=!~;(]", text.strip(), 1)[0]
                try:
                    md.version(name)
                except Exception:
                    found.append(text.split(";")[0].strip())
            continue
        try:
            req = Requirement(text)
        except Exception:
            continue
        if req.marker is None or not req.marker.evaluate({"extra": extra}):
            continue
        if req.marker.evaluate({"extra": ""}):
            continue
        if norm(req.name) == "sglang":
            for sub in req.extras:
                found.extend(missing_for(norm(sub), seen))
        elif not satisfied(req):
            found.append(str(req).split(";")[0].strip())
    return found
for extra in extras:
    if provided and norm(extra) not in provided:
        out["unknown_extras"].append(extra)
    out["missing"][extra] = missing_for(norm(extra), set())
if kernel:
    try:
        __import__(kernel)
    except BaseException as exc:
        out["kernel_error"] = "import %s failed: %s: %s" % (kernel, type(exc).__name__, str(exc)[:300])
emit()
'''


def _version_tuple(text):
    """'0.5.23.post1' -> (0, 5, 23); the release part only."""
    parts = []
    for piece in str(text).split('.'):
        digits = re.match(r'^[0-9]+', piece)
        if not digits:
            break
        parts.append(int(digits.group(0)))
        if digits.group(0) != piece:
            break
    return tuple(parts)


def validate(params):
    """-> list of errors, each naming the variable and the fix. ``params``: the module's options."""
    errors = []
    version = str(params.get('version') or '').strip()
    if not version:
        errors.append('sglang_version is empty: set the SGLang release to install, for example sglang_version: 0.5.23')
    elif not VERSION_RE.match(version):
        errors.append('sglang_version=%s is not a pinned release: give one version such as 0.5.23 or 0.5.23.post1 '
                      '(no ranges, no wildcards, no leading ==)' % version)
    extras = params.get('extras') or []
    bad = [e for e in extras if not EXTRA_RE.match(str(e))]
    if bad:
        errors.append('sglang_extras has %s: an extra is a name such as all or tracing (letters, digits, . _ -)'
                      % ', '.join(repr(e) for e in bad))
    python = str(params.get('python') or '')
    if not python.startswith('/') or '/bin/' not in python:
        errors.append('sglang_python=%s: give the absolute path of the python in the venv to install into, '
                      'for example /opt/sglang/bin/python3' % python)
    index = str(params.get('index_url') or '').strip()
    if index and not (URL_RE.match(index) or index.startswith('/')):
        errors.append('sglang_pip_index_url=%s: give the URL of a package index (https://host/simple), '
                      'or the absolute path of a wheelhouse folder on the host' % redact_url(index))
    if params.get('installer', 'auto') not in INSTALLERS:
        errors.append('sglang_installer=%s: choose one of %s' % (params.get('installer'), ', '.join(INSTALLERS)))
    free = params.get('min_free_gb')
    if free is not None and (not isinstance(free, (int, float)) or free < 0):
        errors.append('sglang_install_min_free_gb=%s: give a number of GiB, 0 or more' % free)
    driver = str(params.get('min_driver') or '').strip()
    if driver and not re.match(r'^[0-9]+(\.[0-9]+)*$', driver):
        errors.append('sglang_install_min_driver=%s: give a driver version such as 580.65.06, or leave it empty '
                      'to take it from the wheels\' CUDA' % driver)
    return errors


def redact_url(url):
    """'https://user:token@host/simple' -> 'https://user:********@host/simple' (messages never show a password)."""
    return re.sub(r'^([a-z+]+://)([^/@:]+):([^/@]+)@', r'\1\2:********@', str(url))


def url_password(url):
    """The password (or token) in an index URL, '' when there is none."""
    match = re.match(r'^[a-z+]+://[^/@:]*:([^/@]+)@', str(url or ''))
    return match.group(1) if match else ''


def requirement(version, extras=None):
    """('0.5.23', ['all']) -> 'sglang[all]==0.5.23'."""
    extras = sorted(set(str(e) for e in (extras or [])))
    return 'sglang%s==%s' % ('[%s]' % ','.join(extras) if extras else '', version)


def installer_env(installer, index_url='', isolated=False, devnull='/dev/null'):
    """The environment of a pip / uv run: the index URL goes here, not into the argv (a URL with a token would show
    in the host's process list). isolated: the host's pip configuration files are not read."""
    env = {}
    if installer == 'pip':
        if isolated:
            env['PIP_CONFIG_FILE'] = devnull
        if index_url and not index_url.startswith('/'):
            env['PIP_INDEX_URL'] = index_url
            env['PIP_EXTRA_INDEX_URL'] = ''
            if index_url.startswith('http://'):
                # plain http: pip ignores the index unless its host is trusted; the site chose it by giving the URL
                env['PIP_TRUSTED_HOST'] = _host(index_url)
    elif index_url and not index_url.startswith('/'):
        env['UV_INDEX_URL'] = index_url
        if index_url.startswith('http://'):
            env['UV_INSECURE_HOST'] = _host(index_url)
    return env


def _host(url):
    return re.sub(r'^[a-z+]+://([^/@]*@)?', '', url).split('/')[0].split(':')[0]


def installer_argv(installer, python, spec, index_url='', extra_args=None, dry_run=False, report=None,
                   isolated=False, uv='uv'):
    """The argv of one pip / uv run into the venv of ``python`` (the index URL itself: ``installer_env``).

    installer: 'pip' or 'uv'. index_url: an absolute path is a wheelhouse folder (``--no-index --find-links``).
    dry_run: resolve and download only (pip writes its JSON ``report`` file). isolated: uv ``--no-config``."""
    if installer == 'uv':
        argv = [uv, 'pip', 'install', '--python', python]
        if isolated:
            argv.append('--no-config')
        if dry_run:
            argv.append('--dry-run')
    else:
        argv = [python, '-m', 'pip', 'install', '--disable-pip-version-check', '--no-input']
        if dry_run:
            argv += ['--dry-run', '--quiet']
            if report:
                argv += ['--report', report]
    if index_url and index_url.startswith('/'):
        # a wheelhouse folder on the host: only its wheels, no index
        argv += ['--no-index', '--find-links', index_url]
    argv += [str(a) for a in (extra_args or [])]
    argv.append(spec)
    return argv


def inspect_argv(python, extras=None, kernel=''):
    return [python, '-c', INSPECT_SNIPPET, json.dumps(sorted(set(extras or []))), kernel or '']


def parse_inspect(stdout):
    """The JSON line after MARKER (the last one), or None when there is none."""
    return sglang_flags.last_marked_json(stdout, MARKER)


def compare(state, version, extras=None):
    """-> (needed, why). ``state``: parse_inspect's dict, or None when the venv has no python yet."""
    if not state:
        return True, 'no venv yet'
    if not state.get('installed'):
        return True, 'sglang is not installed'
    if state.get('version') != version:
        return True, 'sglang %s is installed, %s is wanted' % (state.get('version'), version)
    missing = dict((e, r) for e, r in (state.get('missing') or {}).items() if r and e in (extras or []))
    if missing:
        return True, 'sglang %s is installed without %s' % (version, '; '.join(
            'extra %s (%s)' % (e, ', '.join(r[:3])) for e, r in sorted(missing.items())))
    return False, 'sglang %s is installed%s' % (
        version, ' with %s' % ', '.join(sorted(extras)) if extras else '')


def python_ok(python_version, minimum=(3, 11)):
    """'3.11.2' -> True; None (unknown) -> False."""
    got = _version_tuple(python_version or '')
    return len(got) >= 2 and got[:2] >= tuple(minimum)


def wheel_cuda(version):
    """The CUDA major version the sglang ``version`` wheels are built for."""
    got = _version_tuple(version)
    for first, cuda in WHEEL_CUDA:
        if got >= first:
            return cuda
    return WHEEL_CUDA[-1][1]


def min_driver(version, override=''):
    """The minimum driver for sglang ``version`` (``override`` wins when given)."""
    if override:
        return str(override)
    return CUDA_MIN_DRIVER[wheel_cuda(version)]


def driver_ok(have, need):
    """'580.159.04' >= '580.65.06' -> True; an unknown driver (None, '') -> False."""
    if not have:
        return False
    return _version_tuple(have) >= _version_tuple(need)


def parse_dry_run(installer, report_text='', stdout=''):
    """-> list of {'name', 'version'} that the install would put in (pip's --report JSON, uv's lines)."""
    items = []
    if installer == 'pip':
        try:
            data = json.loads(report_text or '{}')
        except ValueError:
            return items
        for entry in data.get('install') or []:
            meta = entry.get('metadata') or {}
            if meta.get('name'):
                items.append({'name': meta['name'], 'version': meta.get('version')})
        return items
    for line in (stdout or '').splitlines():
        match = re.match(r'^\s*\+\s*([A-Za-z0-9._-]+)==(\S+)', line)
        if match:
            items.append({'name': match.group(1), 'version': match.group(2)})
    return items


NETWORK_RE = re.compile(r'(Connection refused|Failed to establish a new connection|Max retries exceeded|'
                        r'Name or service not known|Temporary failure in name resolution|timed out|'
                        r'Network is unreachable|No route to host|error sending request|Failed to fetch|'
                        r'connection error)', re.I)
MISSING_RE = re.compile(r'(No matching distribution found for|Could not find a version that satisfies|'
                        r'no version of sglang|Because sglang==\S+ was not found|not found in the package registry)',
                        re.I)
ERROR_RE = re.compile(r'^(ERROR|error|\s*(×|╰─▶|Caused by))')
EVIDENCE_RE = re.compile(r'^(ERROR|error|WARNING: Retrying|Could not fetch URL|\s*(×|╰─▶|Caused by))')


def needs_probe(stdout, stderr, index_url):
    """True when pip found no version at all on an http(s) index and said nothing about the network: pip logs a
    page it could not fetch only at debug level, so the module then asks the index itself (``probe_url``)."""
    text = '%s\n%s' % (stdout or '', stderr or '')
    return (bool(re.match(r'^https?://', index_url or '')) and '(from versions: none)' in text
            and not NETWORK_RE.search(text))


def probe_url(index_url):
    """The index's page of the sglang project (PEP 503)."""
    return index_url.rstrip('/') + '/sglang/'


def error_message(rc, stdout, stderr, spec, index_url='', dry_run=True, unreachable=''):
    """One line for a failed pip / uv run: what went wrong and what to do. dry_run: the run was the dry run (so
    nothing was installed), else the install itself (which may have changed part of the venv). unreachable: the
    error of the module's own request to the index, when it made one and it failed."""
    if unreachable:
        stderr = '%s\n%s' % (stderr or '', 'connection error: %s' % unreachable)
    if not dry_run:
        return ('installing %s failed after its dry run passed (rc=%s: %s): the venv may hold part of it; fix the '
                'cause and run the install again' % (spec, rc, ' | '.join(redact_url(line)[:300] for line in [
                    x.strip() for x in ('%s\n%s' % (stdout or '', stderr or '')).splitlines() if x.strip()][-3:])))
    text = '%s\n%s' % (stdout or '', stderr or '')
    where = redact_url(index_url) if index_url else "pip's configured index (PyPI by default)"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    evidence = ([line for line in lines if ERROR_RE.match(line)] or [line for line in lines if EVIDENCE_RE.match(line)]
                or lines)
    host = _host(index_url) if index_url and not index_url.startswith('/') else ''
    # a network error about the given index (a line that names another location is about another index)
    network = [line for line in lines if NETWORK_RE.search(line)
               and (not host or host in line or ('://' not in line and "host='" not in line))]
    tail = ' | '.join(redact_url(line)[:300] for line in evidence[-3:])
    if network:
        return ('the package index %s cannot be reached (%s): check sglang_pip_index_url and the network; '
                'nothing was installed, the venv is as it was' % (where, redact_url(network[-1])[:300]))
    if MISSING_RE.search(text):
        return ('%s is not on %s (%s): check sglang_version (and sglang_extras) against the index; nothing was '
                'installed, the venv is as it was' % (spec, where, tail))
    return 'installing %s failed (rc=%s): %s' % (spec, rc, tail)
