# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Data-driven module tests: the cases of ``test_<module>.yaml`` run through the module's ``main()``.

Arguments go in as Ansible passes them; the result is the JSON the module prints (``no_log`` values masked as
Ansible masks them). Commands (``run_command``), HTTP requests (``open_url``) and, where a case names them,
module_utils functions are scripted: a call that the case does not expect, or an expected one that is not made,
fails the case. For an action plugin (the module object has ``ActionModule``) its ``run()`` is called instead
(its test lives under ``tests/unit/plugins/action``, where ansible-test gives the controller's code).
A module's test file is::

    from ansible_collections.llmserve.sglang.plugins.modules import deploy_lock
    from ansible_collections.llmserve.sglang.tests.unit.plugins.modules.modcases import module_cases
    test_deploy_lock = module_cases(deploy_lock, __file__)

and ``test_deploy_lock.yaml`` beside it is a list of cases. Every key but ``id`` is optional::

    - id: a_name                          # the pytest id
      xfail: why                          # a known bug: the case must fail (strict), until the bug is fixed
      input: {path: "${tmp}/lock"}        # the module's arguments; a list of dicts is merged in order:
                                          # input: [*common, {path: "${tmp}/other"}]
      check_mode: true
      files: {REL: TEXT | {content: TEXT, mode: "0755", age: SECONDS}, REL/: null}   # made under ${tmp} first
      processes: {NAME: {ignore_term: false}}    # sleeping python processes started first, ended after the case
      bin_paths: {NAME: PATH | null}      # what get_bin_path answers (default /usr/bin/NAME)
      patches:                            # module_utils functions replaced (wherever they are bound)
        serving_group.probe: {return: refused}     # or returns: [V1, V2], raise: [ValueError, text]
                                                   # calls: [{args: [..], kwargs: {..}}]: every call, in order
      run_command:                        # the commands expected, in order, and their answers
        - command: [/usr/bin/nvidia-smi, -L]        # an element {re: PATTERN} matches by regular expression
          kwargs: {environ_update: {A: "1"}}        # subset of run_command's keyword arguments
          rc: 0
          out: ""
          err: ""
          creates: {REL: TEXT}            # files the command writes (under ${tmp})
          repeat: true                    # may also answer the next calls of the same command (repeat: N: N or more)
          id: smi                         # with while: ID, this command must start while command ID runs
      http:                               # requests expected (open_url), in order, and their answers
        - url: http://127.0.0.1:30000/health
          method: POST                    # default: any
          body: {text: Hi}                # subset of the JSON body sent
          headers: {Authorization: Bearer k}
          status: 200                     # 4xx/5xx raise HTTPError with the body, as open_url does
          json: {ok: true}                # or text: TEXT, or error: refused | timeout | TEXT (no HTTP answer)
      unordered: true                     # run_command and http calls may come in any order
      output: {changed: true, msg: part of the message}   # a subset of the result; msg: substring(s)
      output_excludes: [s3cr3t]           # text that must appear nowhere in the result
      output_absent: [benchmark]          # keys the result must not have
      files_after: {REL: absent | present | TEXT | {content, contains, json, mode}}
      processes_after: {NAME: alive | gone}

``failed`` is expected false unless the output says otherwise, and every scripted command, request and
``calls`` entry must be used. In any string, ``${tmp}`` is the case's directory, ``${pid:NAME}`` a process' PID,
``${text:PATH}`` and ``${json:PATH#KEY}`` a file under ``tests/`` (a string that is only a token becomes its
value: a PID an int, JSON its data). In expected values a dict ``{re: PATTERN}`` matches a string by search.
A patch cannot reach a function bound as a default argument value.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import importlib
import io
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

import pytest
import yaml

from ansible.module_utils import basic
from ansible.module_utils import urls
from ansible.module_utils.six.moves import builtins
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible_collections.llmserve.sglang.tests.unit.plugins.modules.utils import set_module_args

PACKAGE = 'ansible_collections.llmserve.sglang.plugins'
TESTS = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
TOKEN_RE = re.compile(r'\$\{(tmp|pid|text|json)(?::([^}#]*))?(?:#([^}]*))?\}')
WHILE_WAIT = 5.0
SLEEPER = ('import signal, sys, time\n'
           'if sys.argv[1] == "1": signal.signal(signal.SIGTERM, signal.SIG_IGN)\n'
           'sys.stdout.write("ready\\n"); sys.stdout.flush()\n'
           'time.sleep(120)\n')


def module_cases(module, test_file):
    """The parametrized test for the cases in the YAML file named like ``test_file``."""
    path = os.path.splitext(os.path.abspath(test_file))[0] + '.yaml'
    with open(path) as handle:
        cases = yaml.safe_load(handle)
    ids = [case['id'] for case in cases]
    assert len(set(ids)) == len(ids), 'case ids repeat in %s' % path
    params = [pytest.param(case, id=case['id'], marks=[pytest.mark.xfail(reason=case['xfail'], strict=True)]
                           if case.get('xfail') else []) for case in cases]

    @pytest.mark.parametrize('case', params)
    def test_case(case, tmp_path, monkeypatch, capsys):
        run_case(module, copy.deepcopy(case), str(tmp_path), monkeypatch, capsys)
    return test_case


# ---------------------------------------------------------------- comparing

def differences(want, got, where='result'):
    """What in ``got`` differs from ``want``: dicts as subsets, lists item by item, {re: P} by search."""
    if isinstance(want, dict) and list(want) == ['re']:
        if isinstance(got, str) and re.search(want['re'], got):
            return []
        return ['%s: %r does not match /%s/' % (where, got, want['re'])]
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return ['%s: want a dict, got %r' % (where, got)]
        out = []
        for key, value in want.items():
            if key not in got:
                out.append('%s: no key %r' % (where, key))
            else:
                out.extend(differences(value, got[key], '%s.%s' % (where, key)))
        return out
    if isinstance(want, list):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return ['%s: want %d item(s) %r, got %r' % (where, len(want), want, got)]
        out = []
        for index, (w, g) in enumerate(zip(want, got)):
            out.extend(differences(w, g, '%s[%d]' % (where, index)))
        return out
    if want != got or isinstance(want, bool) != isinstance(got, bool):
        return ['%s: want %r, got %r' % (where, want, got)]
    return []


def output_differences(case, result):
    want = dict(case.get('output') or {})
    want.setdefault('failed', False)
    got = dict(result, failed=bool(result.get('failed')))
    out = []
    msg = want.pop('msg', None)
    if isinstance(msg, (str, list)):
        for part in [msg] if isinstance(msg, str) else msg:
            if part not in str(got.get('msg')):
                out.append('result.msg: %r is not in %r' % (part, got.get('msg')))
    elif msg is not None:
        want['msg'] = msg
    out.extend(differences(want, got))
    text = json.dumps(result)
    out.extend('result holds %r' % secret for secret in case.get('output_excludes') or [] if secret in text)
    out.extend('result has key %r' % key for key in case.get('output_absent') or [] if key in result)
    return out


# ---------------------------------------------------------------- ${...} tokens

def _token(match, tmp, pids):
    kind, arg, key = match.group(1), match.group(2), match.group(3)
    if kind == 'tmp':
        return tmp
    if kind == 'pid':
        return pids[arg]
    with open(os.path.join(TESTS, arg)) as handle:
        if kind == 'text':
            return handle.read()
        data = json.load(handle)
    for part in key.split('.') if key else []:
        data = data[part]
    return data


def substitute(value, tmp, pids):
    """``value`` with the ${...} tokens replaced (keys of dicts too)."""
    if isinstance(value, dict):
        return dict((substitute(k, tmp, pids), substitute(v, tmp, pids)) for k, v in value.items())
    if isinstance(value, list):
        return [substitute(v, tmp, pids) for v in value]
    if not isinstance(value, str):
        return value
    whole = TOKEN_RE.match(value)
    if whole and whole.end() == len(value):
        return _token(whole, tmp, pids)

    def text(match):
        got = _token(match, tmp, pids)
        return got if isinstance(got, str) else json.dumps(got)
    return TOKEN_RE.sub(text, value)


# ---------------------------------------------------------------- files and processes

def _mode(value):
    return int(value, 8) if isinstance(value, str) else value


def make_files(root, files):
    aged = []
    for rel, spec in (files or {}).items():
        path = os.path.join(root, rel)
        spec = spec if isinstance(spec, dict) else {'content': spec or ''}
        if rel.endswith('/'):
            if not os.path.isdir(path):
                os.makedirs(path)
        else:
            if not os.path.isdir(os.path.dirname(path)):
                os.makedirs(os.path.dirname(path))
            with open(path, 'w') as handle:
                handle.write(spec.get('content') or '')
        if 'mode' in spec:
            os.chmod(path, _mode(spec['mode']))
        if 'age' in spec:
            aged.append((path, time.time() - float(spec['age'])))
    for path, when in aged:  # after every file is made: making one changes its directory's mtime
        os.utime(path, (when, when))


def file_differences(root, expected):
    out = []
    for rel, want in (expected or {}).items():
        path = os.path.join(root, rel)
        exists = os.path.lexists(path)
        if want in ('absent', 'present'):
            if exists != (want == 'present'):
                out.append('file %s: want %s' % (rel, want))
            continue
        if not exists:
            out.append('file %s: missing' % rel)
            continue
        want = want if isinstance(want, dict) else {'content': want}
        mode = os.stat(path).st_mode & 0o7777
        if 'mode' in want and mode != _mode(want['mode']):
            out.append('file %s: mode %o, want %o' % (rel, mode, _mode(want['mode'])))
        if os.path.isdir(path):
            continue
        with open(path) as handle:
            text = handle.read()
        if 'content' in want and text != want['content']:
            out.append('file %s: content %r, want %r' % (rel, text, want['content']))
        if 'contains' in want and want['contains'] not in text:
            out.append('file %s: %r not in %r' % (rel, want['contains'], text))
        if 'json' in want:
            out.extend(differences(want['json'], json.loads(text), 'file %s' % rel))
    return out


def start_processes(specs):
    procs = {}
    try:
        for name, spec in (specs or {}).items():
            flag = '1' if (spec or {}).get('ignore_term') else '0'
            procs[name] = subprocess.Popen([sys.executable, '-c', SLEEPER, flag], stdout=subprocess.PIPE)
            assert procs[name].stdout.readline().strip() == b'ready'
    except BaseException:
        stop_processes(procs)
        raise
    return procs


def stop_processes(procs):
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()


def process_differences(procs, expected):
    if any(state == 'alive' for state in (expected or {}).values()):
        time.sleep(0.1)  # a signal sent to it would have ended it by now
    out = []
    for name, state in (expected or {}).items():
        if (procs[name].poll() is None) != (state == 'alive'):
            out.append('process %s (pid %s): want %s' % (name, procs[name].pid, state))
    return out


# ---------------------------------------------------------------- scripted calls

class Script(object):
    """Expected calls of one kind, answered in order (or in any order); thread-safe."""

    def __init__(self, kind, entries, unordered=False):
        self.kind, self.entries, self.unordered = kind, entries or [], unordered
        self.used = [0] * len(self.entries)
        self.next = 0
        self.problems = []
        self.lock = threading.Lock()
        self.started = {}

    def _event(self, name):
        with self.lock:
            return self.started.setdefault(name, threading.Event())

    def _find(self, matches):
        if self.unordered:
            free = [i for i, e in enumerate(self.entries) if (not self.used[i] or e.get('repeat')) and matches(e)]
            return free[0] if free else None
        if self.next < len(self.entries) and matches(self.entries[self.next]):
            self.next += 1
            return self.next - 1
        last = self.next - 1
        if last >= 0 and self.entries[last].get('repeat') and matches(self.entries[last]):
            return last
        return None

    def take(self, call, matches):
        """The entry that answers ``call`` (None when none does: a problem is noted)."""
        with self.lock:
            index = self._find(matches)
            if index is None:
                expected = self.entries[self.next] if self.next < len(self.entries) and not self.unordered else None
                self.problems.append('unexpected %s %r; expected %r' % (self.kind, call, expected))
                return None
            self.used[index] += 1
            entry = self.entries[index]
        if entry.get('id'):
            self._event(entry['id']).set()
        if entry.get('while') and not self._event(entry['while']).wait(WHILE_WAIT):
            self.problems.append('%s %r: %s did not start while it ran' % (self.kind, call, entry['while']))
        return entry

    def unused(self):
        """The entries not used (as often as their ``repeat: N`` asks)."""
        return ['%s expected %d time(s), made %d: %r' % (self.kind, int(e.get('repeat') or 1), self.used[i], e)
                for i, e in enumerate(self.entries) if self.used[i] < int(e.get('repeat') or 1)]


def argv_matches(want, got):
    if isinstance(want, list) and isinstance(got, list):
        return len(want) == len(got) and all(argv_matches(w, g) for w, g in zip(want, got))
    return not differences(want, got)


def fake_run_command(script, root):
    def run_command(self, args, **kwargs):
        argv = [str(a) for a in args] if isinstance(args, (list, tuple)) else args
        entry = script.take(argv, lambda e: argv_matches(e['command'], argv))
        if entry is None:
            return 127, '', 'unexpected command (modcases)'
        script.problems.extend(differences(entry.get('kwargs') or {}, kwargs, 'run_command %r kwargs' % (argv,)))
        make_files(root, entry.get('creates'))
        return entry.get('rc', 0), entry.get('out', ''), entry.get('err', '')
    return run_command


class Response(object):  # pylint: disable=too-few-public-methods
    def __init__(self, status, body):
        self.status, self.headers, self._body = status, {}, body

    def read(self, *args):
        return self._body

    def getcode(self):
        return self.status


def fake_open_url(script):
    def open_url(url, data=None, headers=None, method=None, **kwargs):
        method = method or ('POST' if data is not None else 'GET')
        entry = script.take('%s %s' % (method, url), lambda e: e['url'] == url and e.get('method', method) == method)
        if entry is None:
            raise URLError('unexpected request (modcases)')
        where = 'http %s %s' % (method, url)
        if 'body' in entry:
            script.problems.extend(differences(entry['body'], json.loads(data) if data else None, where + ' body'))
        script.problems.extend(differences(entry.get('headers') or {}, headers or {}, where + ' headers'))
        if entry.get('error'):
            error = entry['error']
            raise URLError({'refused': ConnectionRefusedError(111, 'Connection refused'),
                            'timeout': socket.timeout('timed out')}.get(error, error))
        body = json.dumps(entry['json']) if 'json' in entry else entry.get('text', '')
        body = body.encode('utf-8')
        if entry.get('status', 200) >= 400:
            raise HTTPError(url, entry['status'], 'error', {}, io.BytesIO(body))
        return Response(entry.get('status', 200), body)
    return open_url


def fake_bin_path(bin_paths):
    def get_bin_path(self, arg, required=False, opt_dirs=None):
        path = bin_paths.get(arg, '/usr/bin/%s' % arg)
        if path is None and required:
            self.fail_json(msg='Failed to find required executable "%s"' % arg)
        return path
    return get_bin_path


# ---------------------------------------------------------------- patches

class Fake(object):
    """A patched module_utils function: answers from its spec, notes its calls."""

    def __init__(self, name, spec, owner):
        self.name, self.spec, self.owner, self.calls = name, spec or {}, owner, []

    def __call__(self, *args, **kwargs):
        self.calls.append({'args': list(args), 'kwargs': kwargs})
        if 'raise' in self.spec:
            kind, text = self.spec['raise']
            raise (getattr(self.owner, kind, None) or getattr(builtins, kind))(text)
        if 'returns' in self.spec:
            answers = self.spec['returns']
            return copy.deepcopy(answers[min(len(self.calls), len(answers)) - 1])
        return copy.deepcopy(self.spec.get('return'))

    def problems(self):
        if 'calls' not in self.spec:
            return []
        return differences(self.spec['calls'], self.calls, self.name + ' calls')


def patch_everywhere(monkeypatch, original, fake, owners):
    """Replace ``original`` in ``owners`` and in every loaded module of this collection that binds it."""
    mods = list(owners) + [m for n, m in list(sys.modules.items()) if n.startswith(PACKAGE) and m is not None]
    for mod in mods:
        for attr, value in list(vars(mod).items()):
            if value is original:
                monkeypatch.setattr(mod, attr, fake)


def apply_patches(monkeypatch, module, patches):
    fakes = []
    for name, spec in (patches or {}).items():
        where, attr = name.rsplit('.', 1)
        owner = importlib.import_module('%s.module_utils.%s' % (PACKAGE, where))
        fake = Fake(name, spec, owner)
        patch_everywhere(monkeypatch, getattr(owner, attr), fake, [owner, module])
        fakes.append(fake)
    return fakes


# ---------------------------------------------------------------- one case

def module_args(case):
    """The case's input: a dict, or a list of dicts merged in order (a shared anchor, then what differs)."""
    parts = case.get('input') or {}
    args = {}
    for part in parts if isinstance(parts, list) else [parts]:
        args.update(part)
    return args


def run_main(module, case, capsys):
    args = module_args(case)
    if case.get('check_mode'):
        args['_ansible_check_mode'] = True
    with set_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    out = capsys.readouterr().out
    return json.loads(out)


class _Shell(object):  # pylint: disable=too-few-public-methods
    tmpdir = None


class _Connection(object):  # pylint: disable=too-few-public-methods
    _shell = _Shell()


def run_action(plugin, case):
    """An action plugin's run() as the task executor calls it; a raised AnsibleAction becomes its result."""
    # controller code: not importable where ansible-test runs the tests of modules (tests/unit/plugins/modules)
    from ansible.errors import AnsibleAction  # pylint: disable=import-outside-toplevel
    from ansible.parsing.dataloader import DataLoader  # pylint: disable=import-outside-toplevel
    from ansible.playbook.play_context import PlayContext  # pylint: disable=import-outside-toplevel
    from ansible.playbook.task import Task  # pylint: disable=import-outside-toplevel
    task = Task()
    task.args = module_args(case)
    task.check_mode = bool(case.get('check_mode'))
    action = plugin.ActionModule(task, _Connection(), PlayContext(), DataLoader(), None)
    try:
        result = action.run(task_vars={})
    except AnsibleAction as exc:
        result = dict(getattr(exc, 'result_contribution', None) or exc.result)
    return json.loads(json.dumps(result))


def run_case(module, case, tmp, monkeypatch, capsys):
    procs = start_processes(case.get('processes'))
    try:
        case = substitute(case, tmp, dict((name, proc.pid) for name, proc in procs.items()))
        make_files(tmp, case.get('files'))
        commands = Script('command', case.get('run_command'), case.get('unordered'))
        requests = Script('request', case.get('http'), case.get('unordered'))
        monkeypatch.setattr(basic.AnsibleModule, 'run_command', fake_run_command(commands, tmp))
        monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', fake_bin_path(case.get('bin_paths') or {}))
        patch_everywhere(monkeypatch, urls.open_url, fake_open_url(requests), [urls, module])
        fakes = apply_patches(monkeypatch, module, case.get('patches'))
        result = run_action(module, case) if hasattr(module, 'ActionModule') else run_main(module, case, capsys)
        problems = (commands.problems + commands.unused() + requests.problems + requests.unused()
                    + [p for fake in fakes for p in fake.problems()] + output_differences(case, result)
                    + file_differences(tmp, case.get('files_after'))
                    + process_differences(procs, case.get('processes_after')))
        assert not problems, '\n'.join(problems + ['result: ' + json.dumps(result, indent=1, sort_keys=True)[:20000]])
    finally:
        stop_processes(procs)
