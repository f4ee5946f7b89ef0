# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Explain a failed candidate from a table of failure signatures (data, not code).

A *signature* is a dict read from ``roles/backend_trial/files/failure_signatures.yml``::

    id: trtllm_moe_sm100_only            # short, unique
    match:                               # every key given must match (AND); the first signature that matches wins
      reason: crashed                    # a value, a list (any of), {not: value-or-list}, or null (= not known)
      arch: {not: sm100}
      moe_runner_backend: [flashinfer_trtllm, flashinfer_trtllm_routed]
      lines: ['trtllm_fp4_block_scale_moe\\(', 'no kernels runnable on sm\\d+']    # regexes: ANY matches some line
      all_lines: [...]                   # regexes: EACH matches some line
      no_lines: [...]                    # regexes: NONE matches any line
    explanation: one or two sentences
    references: [sglang issue 24321, ...]
    next_step: what to do about it
    sources:                             # optional, never shown: where each regex's text comes from
      'no kernels runnable on sm\\d+': flashinfer/data/csrc/trtllm_batched_gemm_runner.cu:216 (flashinfer-python 0.7.2)

Context keys a signature can match (see :func:`context`): ``reason``, ``status``, ``phase`` (``screen`` or
``trial``), ``arch``, ``moe_runner_backend``, ``fp4_gemm_backend``, ``attention_backend``, ``quantization``,
``milestone`` (the last start-up milestone reached), ``signal`` (number), ``signal_name`` (``KILL``),
``log_empty`` (true when the server wrote nothing), ``exit_code``, ``child_exit_code`` / ``child_signal`` (of the
first child process - a scheduler - that the log says died, await_server_ready's ``child_exit``).

Besides the table it is given, :func:`diagnose` knows a few signatures for lines of SGLang 0.5.23
(:data:`BUILTIN_SIGNATURES`, each placed before a named signature of the table; a table entry with the same id
replaces it, so moving one into the YAML needs no code change).

Advice that names a flag is checked against the installed SGLang's flag table when :func:`diagnose` gets one
(``flags``, the schema of ``sglang_flags``): a flag the table lacks is replaced by the spelling it has
(``--cuda-graph-max-bs`` -> ``--cuda-graph-max-bs-decode``) or dropped, and a deprecated spelling by the current one
(``--disable-cuda-graph`` -> ``--cuda-graph-backend-decode=disabled --cuda-graph-backend-prefill=disabled``), see
:func:`check_advice`.

Pure, stdlib only (and the collection's ``sglang_flags``); the ``diagnose`` filter plugin loads the YAML and calls
:func:`diagnose`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_flags

CONTEXT_KEYS = ('reason', 'status', 'phase', 'arch', 'moe_runner_backend', 'fp4_gemm_backend', 'attention_backend',
                'quantization', 'milestone', 'signal', 'signal_name', 'log_empty', 'exit_code', 'child_exit_code',
                'child_signal')
LINE_KEYS = ('lines', 'all_lines', 'no_lines')
SIGNATURE_KEYS = ('id', 'title', 'match', 'explanation', 'references', 'next_step', 'sources')
MAX_LINES = 400
UNMATCHED_SHOWN = 15

UNKNOWN = {
    'id': 'unknown',
    'explanation': 'No failure signature matched; the lines below are what the server and the checks said.',
    'references': [],
    'next_step': ('Read the lines below and the unit\'s journal (journalctl -u SERVICE); once understood, add a '
                  'signature to roles/backend_trial/files/failure_signatures.yml (data, no code change).'),
}


# Signatures for lines of SGLang 0.5.23 (python/sglang/srt/... of the 0.5.23 wheel, and the real run in
# tests/unit/plugins/module_utils/data/sglang-0.5.23/): (id of the table's signature it goes before, signature).
BUILTIN_SIGNATURES = (
    ('cuda_oom', {
        'id': 'gpu_memory_unbalanced',
        'title': 'Stale GPU holders on some GPUs',
        'match': {'reason': ['oom', 'crashed', 'killed'], 'lines': ['The memory capacity is unbalanced']},
        'explanation': (
            'Before loading, some GPUs had much less free memory than the others ("The memory capacity is '
            'unbalanced. Some GPUs may be occupied by other processes."): stale GPU holders on some GPUs - a '
            'previous server, a crashed rank or another process still holds their memory.'),
        'references': ['sglang 0.5.23 distributed/bootstrap.py _check_tp_memory_balance '
                       '(SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK, on by default)'],
        'next_step': (
            'Run the clean-up (the llmserve.sglang.gpu_cleanup role, or llmserve.sglang.gpu_reset) to end the stale '
            'GPU holders, check with nvidia-smi that every GPU is free, then start again.'),
    }),
    ('cuda_oom', {
        'id': 'kv_cache_no_room',
        'title': 'The weights leave no GPU memory for the KV cache',
        'match': {'reason': ['oom', 'crashed'], 'lines': ['Loaded weights leave no GPU memory for the KV cache']},
        'explanation': (
            'The weights loaded, but under the --mem-fraction-static in use nothing was left for the KV cache '
            '(the line names the smallest value that would leave room).'),
        'references': ['sglang 0.5.23 mem_cache/kv_cache_configurator.py (Loaded weights leave no GPU memory for '
                       'the KV cache)'],
        'next_step': (
            'Raise --mem-fraction-static above the value the line names, or use more GPUs (tp_size) or a smaller '
            'checkpoint; check that no stale process holds GPU memory (gpu_cleanup\'s report).'),
    }),
    ('killed_empty_log', {
        'id': 'scheduler_died_at_init',
        'title': 'A scheduler died during the launch',
        # await_server_ready's own line when it saw the rank die in /proc before SGLang said so
        'match': {'reason': ['killed', 'crashed'], 'milestone': {'not': 'ready'},
                  'lines': [r'scheduler died during initialization \(exit code',
                            r'^sglang::schedul\S* \(pid \d+\) exited \((?:signal|exit status \d)']},
        'explanation': (
            'A scheduler process died while the model loaded, without a traceback of its own ("Rank N scheduler '
            'died during initialization (exit code: ...)"), and the main process exited with status 1. Exit code -9 '
            'is SIGKILL: most often the host\'s OOM killer (every rank loads its weights at once), else a native '
            'crash; SGLang\'s hint about the OOM killer is a hint, not a finding.'),
        'references': ['sglang 0.5.23 entrypoints/engine.py _scheduler_died_error'],
        'next_step': (
            'Look for the OOM killer at that time (`journalctl -k` or `dmesg -T | grep -i -E \'out of memory|killed '
            'process\'`; systemd marks the unit Result=oom-kill when it struck the unit); add host RAM or swap, or '
            'load fewer ranks per host. Another negative code (-11 SIGSEGV, -6 SIGABRT) is a native crash: try '
            'another backend.'),
    }),
    ('killed_empty_log', {
        'id': 'scheduler_killed',
        'title': 'A scheduler was killed while serving',
        'match': {'reason': 'killed', 'lines': [r'Subprocess scheduler_\d+ \(pid=\d+\) crashed with exit code -9',
                                                r'Scheduler or DataParallelController \d+ terminated with -9',
                                                r'^sglang::schedul\S* \(pid \d+\) exited \(signal 9/KILL\)']},
        'explanation': (
            'A scheduler process (sglang::scheduler, comm sglang::schedul) was SIGKILLed while the main process '
            'lived; SGLang then tore the server down (SIGQUIT, 5 s, SIGKILL of the tree). The kernel\'s OOM killer '
            'or a kill -9 from outside does that.'),
        'references': ['sglang 0.5.23 utils/watchdog.py SubprocessWatchdog (Subprocess ... crashed with exit code)'],
        'next_step': (
            'Check `journalctl -k` / `dmesg -T` for "Out of memory: Killed process ... (sglang::schedul)" and host '
            'memory; otherwise find who sent the signal (a clean-up, a watchdog, an operator).'),
    }),
    ('hang_while_loading', {
        'id': 'hang_at_init_parallel',
        'title': 'Hang while the ranks join',
        'match': {'reason': 'hang', 'milestone': 'init_parallel'},
        'explanation': (
            'The log stopped at "Init parallel begin" with the process alive: the ranks never finished setting up '
            'torch.distributed / NCCL - a rank or node that did not start, a --dist-init-addr that is not reachable '
            'from every node, a firewall, or an NCCL initialisation that hangs.'),
        'references': ['sglang 0.5.23 distributed/bootstrap.py init_parallel_runtime (Init parallel begin.)'],
        'next_step': (
            'Check that every node of the group runs with the same --nnodes, --dist-init-addr and flags and that '
            'rank 0\'s dist-init port is reachable (llmserve.sglang.dist_init_check); on PCIe cards without P2P try '
            'NCCL_P2P_DISABLE=1.'),
    }),
    ('hang', {
        'id': 'hang_before_http',
        'title': 'Hang before the HTTP server listened',
        'match': {'reason': 'hang', 'milestone': 'engine_up'},
        'explanation': (
            'Every scheduler was up ("Engine startup timings"), then the log stopped before the HTTP server listened '
            '(no "Uvicorn running on"), with the process alive.'),
        'references': ['sglang 0.5.23 entrypoints/engine.py (Engine startup timings), http_server.py'],
        'next_step': (
            'Check that the port is free and the tokenizer loads (the log tail); raise sglang_hang_timeout if the '
            'host is slow.'),
    }),
)

# Equivalent spellings of a piece of advice across SGLang releases, newest first: the first one the installed
# flag table accepts (not deprecated, values among the choices) is the one the advice names.
FLAG_SPELLINGS = (
    ('--cuda-graph-backend-decode=disabled --cuda-graph-backend-prefill=disabled',
     '--disable-decode-cuda-graph --disable-prefill-cuda-graph', '--disable-cuda-graph'),
    ('--cuda-graph-max-bs-decode', '--cuda-graph-max-bs'),
    ('--dsa-prefill-backend', '--nsa-prefill-backend'),
    ('--dsa-decode-backend', '--nsa-decode-backend'),
)
# flags that are not the server's (argparse's own)
NOT_SERVER_FLAGS = ('--help', '--version')
_FLAG_TOKEN = re.compile(r'(?<![\w-])(--[A-Za-z0-9][\w-]*(?:\{[\w,-]+\}[\w-]*)?)(=[\w.:/-]+)?')
_DEPRECATED_HELP = re.compile(r'^\s*\(?Deprecated\b', re.I)
_DEPRECATED_USE = re.compile(r'\b[Uu]se (--[\w{},-]+(?:=[\w.-]+)?(?: <[\w-]+>)?)')


class SignatureError(ValueError):
    """A malformed signature: the message names it and the key."""


def _as_list(value):
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _norm(value):
    """Compare numbers and strings alike: 9 == '9', True == 'true'."""
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return None
    return str(value)


def value_matches(spec, value):
    """``spec`` (value, list, ``{not: ...}`` or None) against one context value."""
    if isinstance(spec, dict):
        if set(spec) != {'not'}:
            raise SignatureError('a match value that is a dict must be {not: value-or-list}, got %r' % (spec,))
        return not value_matches(spec['not'], value)
    if spec is None:
        return value is None
    return _norm(value) in [_norm(s) for s in _as_list(spec)]


def validate(signatures):
    """Check the table; return it compiled: list of dicts with ``_rx`` {key: [(pattern, regex)]}."""
    if not isinstance(signatures, list):
        raise SignatureError('signatures must be a list, got %s' % type(signatures).__name__)
    out = []
    seen = set()
    for i, sig in enumerate(signatures):
        where = 'signature %d' % i
        if not isinstance(sig, dict):
            raise SignatureError('%s must be a dict, got %r' % (where, sig))
        sid = sig.get('id')
        if not isinstance(sid, str) or not sid.strip():
            raise SignatureError('%s has no id' % where)
        where = 'signature %r' % sid
        if sid in seen or sid == 'unknown':
            raise SignatureError('%s: the id is used twice (or is the reserved "unknown")' % where)
        seen.add(sid)
        unknown = sorted(set(sig) - set(SIGNATURE_KEYS))
        if unknown:
            raise SignatureError('%s: unknown key(s) %s; allowed: %s' % (where, ', '.join(unknown), ', '.join(SIGNATURE_KEYS)))
        for key in ('explanation', 'next_step'):
            if not isinstance(sig.get(key), str) or not sig[key].strip():
                raise SignatureError('%s: %s must be a non-empty string' % (where, key))
        if not isinstance(sig.get('references', []), list):
            raise SignatureError('%s: references must be a list of strings' % where)
        match = sig.get('match') or {}
        if not isinstance(match, dict) or not match:
            raise SignatureError('%s: match must be a non-empty dict' % where)
        bad = sorted(set(match) - set(CONTEXT_KEYS) - set(LINE_KEYS))
        if bad:
            raise SignatureError('%s: unknown match key(s) %s; allowed: %s'
                                 % (where, ', '.join(bad), ', '.join(CONTEXT_KEYS + LINE_KEYS)))
        compiled = {}
        for key in LINE_KEYS:
            pats = []
            for pat in _as_list(match.get(key)):
                try:
                    pats.append((pat, re.compile(pat)))
                except (re.error, TypeError) as e:
                    raise SignatureError('%s: %s: bad regex %r: %s' % (where, key, pat, e))
            compiled[key] = pats
        for key in CONTEXT_KEYS:
            if isinstance(match.get(key), dict):
                value_matches(match[key], None)     # raises on a malformed dict
        _check_sources(where, sig.get('sources'), compiled)
        entry = dict(sig)
        entry['references'] = [str(r) for r in sig.get('references') or []]
        entry['_rx'] = compiled
        out.append(entry)
    return out


def _check_sources(where, sources, compiled):
    """``sources``: None, or a dict from some of the signature's line regexes to a source text or a list of them."""
    if sources is None:
        return
    if not isinstance(sources, dict):
        raise SignatureError('%s: sources must be a dict {regex: source or [sources]}' % where)
    patterns = set(pat for pats in compiled.values() for pat, _rx in pats)
    for pat, src in sources.items():
        if pat not in patterns:
            raise SignatureError('%s: sources names %r, which is none of its line regexes' % (where, pat))
        if not all(isinstance(x, str) and x.strip() for x in _as_list(src)) or not _as_list(src):
            raise SignatureError('%s: sources[%r] must be a non-empty string or list of strings' % (where, pat))


def _text_lines(value):
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            out.extend(_text_lines(v))
        return out
    return [ln for ln in str(value).splitlines() if ln.strip()]


def collect_lines(results):
    """The lines a signature is matched against, from module results and report entries, most telling first.

    Reads ``evidence``, ``msg``, ``errors``, failed ``checks`` (``detail``, ``text``) and ``log_tail``.
    """
    lines = []
    tails = []
    for res in results:
        if not isinstance(res, dict):
            continue
        lines.extend(_text_lines(res.get('evidence')))
        lines.extend(_text_lines(res.get('msg')))
        lines.extend(_text_lines(res.get('errors')))
        for check in res.get('checks') or []:
            if isinstance(check, dict) and check.get('ok') is False:
                lines.extend(_text_lines('%s: %s: %s' % (check.get('name'), check.get('reason'), check.get('detail'))))
                lines.extend(_text_lines(check.get('text')))
        tails.extend(_text_lines(res.get('log_tail')))
    out = []
    seen = set()
    for line in lines + tails:
        line = line.rstrip()
        if line not in seen:
            seen.add(line)
            out.append(line)
    return out[:MAX_LINES]


def context(entry, results=(), arch=None, candidate=None, phase=None, quantization=None):
    """The values signatures match, from the report entry, the module results, the GPU arch and the candidate."""
    entry = entry or {}
    ctx = dict((k, None) for k in CONTEXT_KEYS)
    ctx['reason'] = entry.get('reason')
    ctx['phase'] = phase
    ctx['arch'] = arch
    ctx['quantization'] = quantization
    for key in ('moe_runner_backend', 'fp4_gemm_backend', 'attention_backend'):
        ctx[key] = (candidate or {}).get(key)
    said = None
    for res in list(results) + [entry]:
        if not isinstance(res, dict):
            continue
        for key in ('status', 'milestone', 'signal', 'signal_name', 'exit_code'):
            if ctx[key] is None and res.get(key) is not None:
                ctx[key] = res.get(key)
        child = res.get('child_exit')
        if isinstance(child, dict) and ctx['child_exit_code'] is None and ctx['child_signal'] is None:
            ctx['child_exit_code'] = child.get('exit_code')
            ctx['child_signal'] = child.get('signal')
        if said is None and 'log_said_anything' in res:
            said = bool(res.get('log_said_anything'))
    if said is None:
        # an await result without the flag: its evidence says so
        said = not any('the log is empty' in ln for ln in collect_lines(list(results) + [entry]))
    ctx['log_empty'] = not said
    for key in ('signal', 'child_signal', 'child_exit_code'):
        if ctx[key] is not None:
            try:
                ctx[key] = int(ctx[key])
            except (TypeError, ValueError):
                pass
    return ctx


def _first_match(rx, lines):
    for line in lines:
        if rx.search(line):
            return line
    return None


def match_one(sig, ctx, lines):
    """Return the ``matched`` dict when ``sig`` (compiled) matches, else None."""
    match = sig['match']
    matched = {}
    for key in CONTEXT_KEYS:
        if key in match:
            if not value_matches(match[key], ctx.get(key)):
                return None
            matched[key] = ctx.get(key)
    rx = sig['_rx']
    found = []
    if rx['lines']:
        hit = None
        for _pat, r in rx['lines']:
            hit = _first_match(r, lines)
            if hit is not None:
                break
        if hit is None:
            return None
        found.append(hit)
    for _pat, r in rx['all_lines']:
        hit = _first_match(r, lines)
        if hit is None:
            return None
        if hit not in found:
            found.append(hit)
    for _pat, r in rx['no_lines']:
        if _first_match(r, lines) is not None:
            return None
    if found:
        matched['lines'] = found
    return matched


def with_builtins(table):
    """The compiled table with :data:`BUILTIN_SIGNATURES` inserted, each before the signature it names (at the end
    when the table lacks that one); a built-in whose id the table has already is left out."""
    out = list(table)
    ids = set(sig['id'] for sig in out)
    for before, sig in BUILTIN_SIGNATURES:
        if sig['id'] in ids:
            continue
        compiled = _BUILTIN_COMPILED[sig['id']]
        where = [i for i, s in enumerate(out) if s['id'] == before]
        out.insert(where[0] if where else len(out), compiled)
        ids.add(sig['id'])
    return out


# ---------------------------------------------------------------- advice against the installed flag table
def flag_table(flags, version=None):
    """A ``sglang_flags.FlagTable`` from a table, its options list, their JSON text or a dump
    (``{sglang_version, options}``). None for None, ``''`` or an empty table (nothing to check against: an empty
    table would drop every flag). Raises ValueError for anything else."""
    if flags is None or flags == '' or isinstance(flags, sglang_flags.FlagTable):
        return flags or None
    if isinstance(flags, dict):
        version = version or flags.get('sglang_version') or flags.get('version')
        flags = flags.get('options')
    options, error = sglang_flags.load_options(flags)
    if error:
        raise ValueError('flags %s' % error)
    if not options:
        return None
    return sglang_flags.FlagTable(options, version=version)


def _expand(flag):
    """``--a-{b,c}`` -> ['--a-b', '--a-c']; other flags -> [flag]."""
    m = re.match(r'^(.*)\{([^}]*)\}(.*)$', flag)
    if not m:
        return [flag]
    return [m.group(1) + part + m.group(3) for part in m.group(2).split(',') if part]


def _deprecated(option):
    """The option's help says it is deprecated -> its suggested spelling ('' when it names none); else None."""
    text = (option or {}).get('help') or ''
    if not _DEPRECATED_HELP.search(text) and '(Deprecated' not in text:
        return None
    m = _DEPRECATED_USE.search(text)
    if not m:
        return ''
    words = []
    for token in m.group(1).split():
        if not token.startswith('--'):
            words.append(token)     # a placeholder: "--attn-dp-size <dp-size>"
            continue
        flag, eq, value = token.partition('=')
        words.extend(one + eq + value for one in _expand(flag))
    return ' '.join(words)


def _spelling_ok(spelling, table, allow_deprecated=False):
    """Every flag of ``spelling`` is in the table (not deprecated unless allowed), every ``=value`` a choice."""
    for token in spelling.split():
        if not token.startswith('--'):
            continue
        flag, eq, value = token.partition('=')
        for one in _expand(flag):
            option = table.get(one)
            if option is None:
                return False
            if not allow_deprecated and _deprecated(option) is not None:
                return False
            choices = option.get('choices')
            if eq and choices is not None and value not in [str(c) for c in choices]:
                return False
    return True


def _flag_decision(flag, table):
    """-> (spelling or None to drop, note or None); spelling == flag keeps it."""
    label = 'sglang %s' % table.version if table.version else 'the installed SGLang'
    dropped = '%s: not a flag of %s; the advice that names it was dropped' % (flag, label)
    for group in FLAG_SPELLINGS:
        if flag not in group:       # a group whose one spelling is this bare flag
            continue
        for allow in (False, True):
            for spelling in group:
                if _spelling_ok(spelling, table, allow_deprecated=allow):
                    if spelling == flag:
                        return flag, None
                    if table.get(flag) is not None:
                        return spelling, ('%s: an older spelling; %s has %s, which the advice names instead'
                                          % (flag, label, spelling))
                    return spelling, '%s: not a flag of %s; the advice names %s instead' % (flag, label, spelling)
        return None, dropped
    expanded = _expand(flag)
    options = [table.get(one) for one in expanded]
    if all(o is not None for o in options):
        for option in options:
            better = _deprecated(option)
            if better and _spelling_ok(better, table):
                return better, '%s: deprecated in %s; the advice names %s instead' % (flag, label, better)
        return flag, None
    if len(expanded) == 1:
        longer = [f for f in table.all_flags() if f.startswith(flag + '-')]
        if len(longer) == 1 and _spelling_ok(longer[0], table):
            return longer[0], '%s: not a flag of %s; the advice names %s instead' % (flag, label, longer[0])
    return None, dropped


def _drop(text, flag):
    """Remove ``flag`` (with its ``=value``) from a list it is part of, else the sentence or clause it is in."""
    f = r'(?<![\w-])' + re.escape(flag) + r'(?:=[\w.:/-]+)?(?![\w-])'
    # ", --x" | " or --x" | "--x, " | " / --x" | "--x / " | "--x or "
    for pat in (r',\s*' + f, r'\s+(?:or|and)\s+' + f, f + r',\s*', r'\s*/\s*' + f, f + r'\s*/\s*',
                f + r'\s+(?:or|and)\s+'):
        new, count = re.subn(pat, '', text, count=1)
        if count:
            return new
    parts = re.split(r'(?<=;)\s+|(?<=\.)\s+(?=[A-Z"\'(`])', text)     # clauses; sentences ("... x" is none)
    return ' '.join(part for part in parts if not re.search(f, part))


def check_advice(text, table, keep=()):
    """Advice ``text`` with its flags checked against ``table`` (``sglang_flags.FlagTable``) -> (text, notes).

    A flag the table has (and does not mark deprecated) stays. Else the first spelling of its group in
    :data:`FLAG_SPELLINGS` that the table accepts (preferring non-deprecated ones), or the spelling the flag's own
    help suggests ("Deprecated. Use --x instead"), or the one flag of the table that extends it
    (``--cuda-graph-max-bs`` -> ``--cuda-graph-max-bs-decode``) replaces it; with none, the advice that names it is
    dropped (from its list, else its sentence). Flags in ``keep`` (those of the evidence) are left alone.
    ``notes`` says what changed, one line per flag.
    """
    if not text or table is None:
        return text, []
    decisions = {}
    notes = []
    for m in _FLAG_TOKEN.finditer(text):
        flag = m.group(1)
        if flag in decisions or flag in keep or flag in NOT_SERVER_FLAGS:
            continue
        decisions[flag] = _flag_decision(flag, table)
        if decisions[flag][1]:
            notes.append(decisions[flag][1])

    def replace(m):
        spelling = decisions.get(m.group(1), (m.group(1), None))[0]
        if spelling is None or spelling == m.group(1):
            return m.group(0)
        if m.group(2) and '=' not in spelling and ' ' not in spelling:
            return spelling + m.group(2)
        return spelling
    out = _FLAG_TOKEN.sub(replace, text)
    dropped = [flag for flag, (spelling, _note) in decisions.items() if spelling is None]
    for flag in dropped:
        for _i in range(5):         # each place that names it
            new = _drop(out, flag)
            if new == out:
                break
            out = new
    if dropped:
        out = re.sub(r' +([,;])', r'\1', re.sub(r' {2,}', ' ', out)).strip().rstrip(',;')
        if text.rstrip().endswith('.') and out and not out.endswith('.'):
            out += '.'
    return out.strip(), notes


def _evidence_flags(lines):
    found = set()
    for line in lines or ():
        for m in _FLAG_TOKEN.finditer(line):
            found.update(_expand(m.group(1)))
    return found


def diagnose(signatures, entry, results=(), arch=None, candidate=None, phase=None, quantization=None, flags=None,
             builtin=True):
    """The diagnosis of one failed report entry: ``{id, explanation, references, next_step, matched}``.

    ``signatures`` is the table (raw or from :func:`validate`); the first one that matches wins. With no match:
    ``id: unknown`` and ``lines`` (the lines that matched nothing). None when the entry did not fail.

    ``flags``: the installed SGLang's flag table (``sglang_flags.FlagTable``, its options list or JSON text as
    gpu_info returns it, or a dump ``{sglang_version, options}``); when given, ``next_step`` is checked against it
    (:func:`check_advice`; flags the matched lines name are left alone) and ``flag_notes`` says what changed.
    ``builtin``: also use :data:`BUILTIN_SIGNATURES`.
    """
    entry = entry or {}
    if entry.get('outcome') != 'failed':
        return None
    table = signatures if (signatures and '_rx' in signatures[0]) else validate(signatures or [])
    if builtin:
        table = with_builtins(table)
    flags = flag_table(flags)
    results = [r for r in results if isinstance(r, dict)]
    ctx = context(entry, results, arch, candidate, phase, quantization)
    lines = collect_lines(results + [entry])
    for sig in table:
        matched = match_one(sig, ctx, lines)
        if matched is not None:
            out = {'id': sig['id'], 'explanation': sig['explanation'].strip(),
                   'references': list(sig['references']), 'next_step': sig['next_step'].strip(), 'matched': matched}
            if sig.get('title'):
                out['title'] = sig['title']
            if flags is not None:
                out['next_step'], out['flag_notes'] = check_advice(out['next_step'], flags,
                                                                   keep=_evidence_flags(matched.get('lines')))
            return out
    out = dict(UNKNOWN)
    out['matched'] = {}
    out['context'] = dict((k, v) for k, v in ctx.items() if v is not None)
    out['lines'] = lines[:UNMATCHED_SHOWN]
    return out


_BUILTIN_COMPILED = dict((sig['id'], sig) for sig in validate([sig for _before, sig in BUILTIN_SIGNATURES]))
