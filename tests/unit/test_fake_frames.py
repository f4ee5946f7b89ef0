# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every traceback frame the lab's fake SGLang prints is the installed code it names.

The fake (tests/lab/fake_sglang/sglang/_fake/tracebacks.py) prints its own frames: a scheduler's head per phase (the
launch, the model load, the CUDA graph capture, the forward, the collectives), the model's frames down to the MoE
layer, the main process's tracebacks (a scheduler that died during the launch, SIGINT on a node >= 1, a failed
warm-up). The behaviour tables' ``frames`` follow the head; tests/unit/test_played_lines.py checks their text.

Each traceback the fake can print is rendered here (every phase, every model family, every model loader, and
with each table rule's frames) and every ``File "PATH", line N, in FUNC`` frame is checked against
the lab's installed wheels (env LLMSERVE_LAB_SITE, else the lab's real SGLang 0.5.23) and their interpreter's
standard library: the file exists, its line N (stripped) is the code line printed, FUNC is the function that
encloses line N (found with ``ast``), and the caret line under the code is the one Python 3.11 prints (none when
the failing expression spans the whole line). Without the installed wheels the checks skip.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import glob
import importlib.util
import multiprocessing.connection
import os
import re
import socket
import traceback

import pytest
import yaml

from ansible_collections.llmserve.sglang.tests.unit.test_played_lines import installed, python_stdlib_and_version

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
FAKE_TRACEBACKS = os.path.join(ROOT, 'tests', 'lab', 'fake_sglang', 'sglang', '_fake', 'tracebacks.py')
TABLES = sorted(glob.glob(os.path.join(ROOT, 'tests', 'lab', 'behaviour', '*.yml'))) + [
    os.path.join(ROOT, 'tests', 'integration', 'behaviour.yml')]

# the phases and model loaders of tracebacks.build, the model families of tracebacks.model_frames
PHASES = ('device', 'baseline', 'dist_init', 'dist_url', 'load_barrier', 'peer_launch', 'peer_launch_recv', 'init',
          'load', 'capture', 'forward', 'nan_assert', 'peer_serve', 'peer_serve_recv')
LOADERS = ('default', 'modelopt', 'dummy')
MODEL_TYPES = ('Qwen3MoeForCausalLM', 'Qwen3_5MoeForConditionalGeneration', 'Qwen3_5MoeForCausalLM',
               'Glm4MoeForCausalLM', 'DeepseekV3ForCausalLM')
LAB_MODEL = 'Qwen3_5MoeForConditionalGeneration'      # the lab's checkpoint, a ModelOpt one (tests/lab/labctl.py)
WHEN_PHASES = {'load': ('load',), 'init': ('init',), 'capture': ('capture',),
               'first_forward': ('capture', 'forward'), 'after_requests': ('forward',)}

FRAME = re.compile(r'^  File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)$')
CARETS = re.compile(r'^    ( *[\^~]+)$')
CYTHON_PREFIX = 'python/tvm_ffi/'
FROZEN_RUNPY = '<frozen runpy>'
STDLIB = os.path.dirname(os.__file__)     # the standard library of this interpreter, the one that renders the fake


def fake():
    spec = importlib.util.spec_from_file_location('fake_sglang_tracebacks', FAKE_TRACEBACKS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- what the fake prints
def eof_frames():
    """The stdlib frames of a real EOFError of multiprocessing's Connection.recv, as the fake takes them."""
    a, b = socket.socketpair()
    b.close()
    conn = multiprocessing.connection.Connection(os.dup(a.fileno()))
    a.close()
    try:
        conn.recv()
    except EOFError as exc:
        lines = ''.join(traceback.format_exception(type(exc), exc, exc.__traceback__)).splitlines(True)[1:-1]
        starts = [k for k, line in enumerate(lines) if line.startswith('  File ')]
        return ''.join(lines[starts[1]:])
    finally:
        conn.close()
    raise AssertionError('recv() on a closed pipe raised no EOFError')


def table_rules():
    """(table, rule name, phase, frames, error) for every crash rule of the behaviour tables, per phase it plays."""
    out = []
    for path in TABLES:
        with open(path, encoding='utf-8') as f:
            rules = (yaml.safe_load(f) or {}).get('rules') or []
        for rule in rules:
            params = rule.get('params') or {}
            behaviour = rule.get('behaviour', rule.get('behavior', 'ready'))
            if behaviour not in ('crash', 'die_after_ready') or params.get('traceback'):
                continue
            when = 'after_requests' if behaviour == 'die_after_ready' else str(params.get('when') or 'first_forward')
            for phase in WHEN_PHASES.get(when, ()):
                out.append((os.path.relpath(path, ROOT), rule.get('name'), phase, params.get('frames'),
                            params.get('error')))
    return out


def renderings():
    """(id, function of the fake module that renders one traceback) for every traceback the fake can print."""
    out = []
    for phase in PHASES:
        models = MODEL_TYPES if phase in ('capture', 'forward') else MODEL_TYPES[:1]
        for model in models:
            for loader in (LOADERS if phase in ('init', 'load') else LOADERS[:1]):
                out.append(('build-%s-%s-%s' % (phase, model, loader),
                            lambda tb, p=phase, m=model, o=loader: tb.build(p, m, None, None, loader=o)))
    for table, name, phase, frames, error in table_rules():
        out.append(('%s-%s-%s' % (os.path.basename(table), name, phase),
                    lambda tb, p=phase, f=frames, e=error: tb.build(p, LAB_MODEL, f, e, loader='modelopt')))
    for node_rank in (0, 1):
        out.append(('scheduler_died-node%d' % node_rank, lambda tb, n=node_rank: tb.scheduler_died(0, -9, n)))
        out.append(('scheduler_died_eof-node%d' % node_rank,
                    lambda tb, n=node_rank: tb.scheduler_died_eof(0, -9, eof_frames(), n)))
    out.append(('keyboard_interrupt', lambda tb: tb.keyboard_interrupt()))
    out.append(('warmup-model_info-assert', lambda tb: tb.warmup_failed(
        "AssertionError: res=<Response [404]>, res.text='{\"detail\":\"Not Found\"}'", model_info=True)))
    out.append(('warmup-model_info-connection', lambda tb: tb.warmup_failed(
        'requests.exceptions.ConnectionError: [Errno 111] Connection refused', model_info=True)))
    out.append(('warmup-generate-assert', lambda tb: tb.warmup_failed('AssertionError: Internal Server Error')))
    return out


def frames_in(text):
    """[(path, line, func, code or None, caret line or None)] of every frame of a traceback text."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        m = FRAME.match(line)
        if not m:
            continue
        code = caret = None
        rest = lines[i + 1:i + 3]
        if rest and rest[0].startswith('    ') and not FRAME.match(rest[0]) and not CARETS.match(rest[0]):
            code = rest[0][4:]
            if len(rest) > 1 and CARETS.match(rest[1]):
                caret = rest[1]
        elif rest and CARETS.match(rest[0]):
            caret = rest[0]
        out.append((m.group('path'), int(m.group('line')), m.group('func'), code, caret))
    return out


# --------------------------------------------------------------------------- what Python 3.11 prints
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.GeneratorExp, ast.ListComp,
           ast.SetComp, ast.DictComp)
_SCOPE_NAMES = {ast.Lambda: '<lambda>', ast.GeneratorExp: '<genexpr>', ast.ListComp: '<listcomp>',
                ast.SetComp: '<setcomp>', ast.DictComp: '<dictcomp>'}


_NODES = {}


def nodes(tree):
    """Every node of a parsed file, walked once."""
    if id(tree) not in _NODES:
        _NODES[id(tree)] = (tree, list(ast.walk(tree)))
    return _NODES[id(tree)][1]


def enclosing_function(tree, number):
    """The code object's name Python gives a frame running line ``number``: the innermost def, class, lambda or
    comprehension around it, else <module>."""
    best = None
    for node in nodes(tree):
        if isinstance(node, _SCOPES) and node.lineno <= number <= node.end_lineno:
            first = min([node.lineno] + [d.lineno for d in getattr(node, 'decorator_list', [])])
            if first <= number and (best is None or (node.lineno, node.col_offset) >= (best.lineno, best.col_offset)):
                best = node
    if best is None:
        return '<module>'
    return _SCOPE_NAMES.get(type(best), getattr(best, 'name', None))


def failing_node(tree, number):
    """The node whose position Python 3.11 reports for a frame stopped at line ``number``: the test of an assert,
    a raise statement, else the outermost call that starts on the line; None when the line has none of these."""
    stmts = [n for n in nodes(tree) if isinstance(n, ast.stmt) and n.lineno <= number <= n.end_lineno]
    stmt = max(stmts, key=lambda n: (n.lineno, n.col_offset)) if stmts else None
    if isinstance(stmt, ast.Assert) and stmt.lineno == number:
        return stmt.test
    if isinstance(stmt, ast.Raise) and stmt.lineno == number:
        return stmt
    calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call) and n.lineno == number] if stmt else []
    if not calls:
        return None
    return min(calls, key=lambda n: (n.col_offset, -n.end_lineno, -n.end_col_offset))


def expected_caret(tree, lines, number):
    """The caret line Python 3.11's traceback prints under line ``number`` (StackSummary.format_frame_summary), or
    None when it prints none."""
    node = failing_node(tree, number)
    assert node is not None, 'no call, assert or raise on line %d: what Python prints under it is unknown' % number
    line = lines[number - 1]
    stripped = line.strip()
    indent = len(line) - len(line.lstrip())
    start = node.col_offset
    if node.end_lineno == number:
        end = node.end_col_offset
        assert not isinstance(node, (ast.BinOp, ast.Subscript)), 'anchored carets (~~^^) are not modelled here'
    else:
        end = len(line.rstrip())
    if end - start < len(stripped):
        return '    ' + ' ' * (start - indent) + '^' * (end - start)
    return None


# --------------------------------------------------------------------------- the installed files
def lab_stdlib(site):
    """The lab interpreter's standard library folder."""
    return python_stdlib_and_version(site)[0]


_SOURCES = {}
_PRINTED = {}


def source(path):
    if path not in _SOURCES:
        with open(path, encoding='utf-8') as f:
            text = f.read()
        _SOURCES[path] = (text.splitlines(), ast.parse(text) if path.endswith('.py') else None)
    return _SOURCES[path]


def printed(path, number):
    """(function, caret line) Python 3.11 prints for a frame at line ``number`` of a Python file."""
    if (path, number) not in _PRINTED:
        lines, tree = source(path)
        _PRINTED[path, number] = (enclosing_function(tree, number), expected_caret(tree, lines, number))
    return _PRINTED[path, number]


def installed_file(tb, site, path):
    """(file under the lab's installation, whether Python prints a code line for it) of a printed frame path."""
    if path == FROZEN_RUNPY:
        return os.path.join(lab_stdlib(site), 'runpy.py'), False
    if path.startswith(CYTHON_PREFIX):
        return os.path.join(site, path[len('python/'):]), False
    for prefix, base in ((tb.SITE + '/', site), (STDLIB + '/', lab_stdlib(site))):
        if path.startswith(prefix):
            return os.path.join(base, path[len(prefix):]), True
    raise AssertionError('%s is in neither site-packages (%s) nor the standard library (%s)'
                         % (path, tb.SITE, STDLIB))


def frame_problems(tb, site, frame):
    """What is wrong with one printed frame, [] when it is the installed code."""
    path, number, func, code, caret = frame
    full, has_code = installed_file(tb, site, path)
    if not os.path.isfile(full):
        return ['%s: no such file' % full]
    lines, tree = source(full)
    if number > len(lines):
        return ['%s has no line %d' % (full, number)]
    where = '%s:%d' % (os.path.relpath(full, site) if full.startswith(site) else full, number)
    if not has_code:
        return ['%s: Python prints no code line here, the fake prints %r' % (where, code)] if code else []
    problems = []
    if code != lines[number - 1].strip():
        problems.append('%s is %r, the fake prints %r' % (where, lines[number - 1].strip(), code))
    if tree is not None and not problems:
        real, want = printed(full, number)
        if real != func:
            problems.append('%s is in %s, the fake prints %s' % (where, real, func))
        elif want != caret:
            problems.append('%s: Python prints the caret line %r, the fake %r' % (where, want, caret))
    return problems


# --------------------------------------------------------------------------- the tests
RENDERINGS = renderings()


@pytest.mark.parametrize('name,render', RENDERINGS, ids=[r[0] for r in RENDERINGS])
def test_fake_frames_are_the_installed_code(name, render):
    site = installed()
    tb = fake()
    text = render(tb)
    frames = frames_in(text)
    assert frames, '%s: no frame in %r' % (name, text)
    problems = []
    for frame in frames:
        problems.extend(frame_problems(tb, site, frame))
    assert not problems, '%s:\n  %s' % (name, '\n  '.join(problems))


def test_every_phase_and_model_family_is_rendered():
    tb = fake()
    assert set(tb.PHASES) == set(PHASES)
    assert set(tb.LOADERS) == set(LOADERS)
    families = set(tb.model_family(m) for m in MODEL_TYPES)
    assert families == set(tb.MODEL_FAMILIES)


def test_the_nan_device_assert_names_the_kernel_line():
    site = installed()
    tb = fake()
    line = tb.nan_device_assert_lines(1)[0]
    m = re.match(r'^%s/(?P<path>\S+):(?P<line>\d+): (?P<func>\w+): ' % re.escape(tb.SITE), line)
    assert m, line
    lines, tree = source(os.path.join(site, m.group('path')))
    number = int(m.group('line'))
    assert lines[number - 1].strip().startswith('tl.device_assert(')
    assert enclosing_function(tree, number) == m.group('func')


def test_the_checks_can_fail():
    tree = ast.parse('def f():\n    x = g(1)\n    assert x == 1, "no"\n    raise ValueError(x)\n'
                     'class C:\n    def m(self):\n        return [i for i in\n                h()]\n')
    lines = ['def f():', '    x = g(1)', '    assert x == 1, "no"', '    raise ValueError(x)']
    assert enclosing_function(tree, 2) == 'f'
    assert enclosing_function(tree, 7) == '<listcomp>'
    assert enclosing_function(tree, 6) == 'm'
    assert expected_caret(tree, lines, 2) == '        ^^^^'
    assert expected_caret(tree, lines, 3) == '           ^^^^^^'
    assert expected_caret(tree, lines, 4) is None
    text = ('Traceback (most recent call last):\n  File "/x/a.py", line 2, in f\n    x = g(1)\n        ^^^^\n'
            '  File "<frozen runpy>", line 88, in _run_code\nRuntimeError: boom\n')
    assert frames_in(text) == [('/x/a.py', 2, 'f', 'x = g(1)', '        ^^^^'),
                               ('<frozen runpy>', 88, '_run_code', None, None)]
