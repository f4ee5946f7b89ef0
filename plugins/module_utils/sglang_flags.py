# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""SGLang's command line: the flag table of the INSTALLED SGLang, argv building, validation.

The flag table is a list of dicts in the schema of tests/data/sglang/server-args-0.5.23.json
``options``: ``flags`` (all option strings), ``dest``, ``type`` (name or None), ``nargs``
(None, 0 for booleans, ``'+'``, ``'*'``, ``'?'`` or an int), ``takes_value``, ``choices``, ``default``, ``help``.
It is read on the target by running ``INTROSPECT_SNIPPET`` with SGLang's python (the parser SGLang
itself builds), or, failing that, by parsing ``python -m sglang.launch_server --help``.
Pure functions, stdlib only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import json
import re

from ansible_collections.llmserve.sglang.plugins.module_utils import arch_matrix

MARKER = '@@LLMSERVE_SGLANG_FLAGS@@'

# Runs on the target with SGLang's python: python -c INTROSPECT_SNIPPET
# Prints MARKER + one JSON line: {installed, version, python, source, options | error}.
INTROSPECT_SNIPPET = r'''
import argparse, json, sys
M = "@@LLMSERVE_SGLANG_FLAGS@@"
out = {"installed": False, "version": None, "python": sys.version.split()[0], "executable": sys.executable}
def emit(code):
    sys.stdout.write("\n" + M + json.dumps(out) + "\n")
    sys.stdout.flush()
    sys.exit(code)
try:
    import sglang
except Exception as exc:
    out["error"] = "import sglang failed: %s: %s" % (type(exc).__name__, exc)
    emit(0)
out["installed"] = True
out["version"] = getattr(sglang, "__version__", None)
if not out["version"]:
    try:
        from importlib.metadata import version as _v
        out["version"] = _v("sglang")
    except Exception:
        pass
def plain(value):
    try:
        json.dumps(value)
        return value
    except Exception:
        return str(value)
try:
    from sglang.srt.server_args import ServerArgs
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    options = []
    for a in parser._actions:
        if not a.option_strings:
            continue
        nargs = a.nargs
        options.append({
            "flags": list(a.option_strings), "dest": a.dest,
            "type": getattr(a.type, "__name__", None) if a.type is not None else None,
            "nargs": nargs, "takes_value": nargs != 0,
            "choices": [plain(c) for c in a.choices] if a.choices is not None else None,
            "default": plain(a.default), "help": a.help if isinstance(a.help, str) else None,
        })
    out["options"] = options
    out["source"] = "sglang.srt.server_args.ServerArgs.add_cli_args"
except Exception as exc:
    out["error"] = "ServerArgs.add_cli_args failed: %s: %s" % (type(exc).__name__, exc)
emit(0)
'''

# structured module option -> SGLang flag
STRUCTURED = (
    ('model_path', '--model-path'),
    ('served_model_name', '--served-model-name'),
    ('tp_size', '--tp-size'),
    ('quantization', '--quantization'),
    ('host', '--host'),
    ('port', '--port'),
    ('moe_runner_backend', '--moe-runner-backend'),
    ('fp4_gemm_backend', '--fp4-gemm-backend'),
    ('attention_backend', '--attention-backend'),
    ('tool_call_parser', '--tool-call-parser'),
    ('reasoning_parser', '--reasoning-parser'),
    ('nnodes', '--nnodes'),
    ('node_rank', '--node-rank'),
    ('dist_init_addr', '--dist-init-addr'),
)
BOOLEAN_STRUCTURED = (
    ('disable_custom_all_reduce', '--disable-custom-all-reduce'),
)
API_KEY_FLAG = '--api-key'
API_KEY_ENV = 'SGLANG_API_KEY'
# flags whose values the arch matrix knows about (checked wherever they come from)
ARCH_CHECKED_FLAGS = ('--moe-runner-backend', '--speculative-moe-runner-backend', '--fp4-gemm-backend',
                      '--fp8-gemm-backend', '--attention-backend', '--prefill-attention-backend',
                      '--decode-attention-backend')


class EnvRef(object):
    """An argv element that systemd substitutes at start: rendered ``${NAME}``, never quoted."""

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return '${%s}' % self.name

    def __repr__(self):
        return 'EnvRef(%r)' % self.name

    def __eq__(self, other):
        return isinstance(other, EnvRef) and other.name == self.name

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(('EnvRef', self.name))


# ---------------------------------------------------------------- introspection
def introspect_argv(python):
    return [python, '-c', INTROSPECT_SNIPPET]


def help_argv(python):
    return [python, '-m', 'sglang.launch_server', '--help']


def last_marked_json(stdout, marker):
    """The JSON after ``marker`` on the last line that has it (a snippet's own output line among whatever the
    interpreter printed), or None when there is none or it does not parse."""
    found = None
    for line in (stdout or '').splitlines():
        pos = line.find(marker)
        if pos >= 0:
            try:
                found = json.loads(line[pos + len(marker):])
            except ValueError:
                found = None
    return found


def parse_introspection(stdout):
    """The JSON line after MARKER (the last one), or None when there is none."""
    return last_marked_json(stdout, MARKER)


_HELP_OPT_RE = re.compile(r'^\s{1,8}(-{1,2}[A-Za-z0-9][^\s,]*.*)$')


def _split_invocation(text):
    """``--a A, --b A`` -> ['--a A', '--b A'] (commas inside {...} kept)."""
    parts = []
    depth = 0
    cur = ''
    for ch in text:
        if ch in '{[':
            depth += 1
        elif ch in '}]':
            depth -= 1
        if ch == ',' and depth == 0:
            parts.append(cur.strip())
            cur = ''
            continue
        cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def parse_help(text):
    """Options from argparse ``--help`` text (fallback when introspection fails).

    Type and default are unknown there (None); choices come from ``{a,b}`` metavars.
    """
    options = []
    in_options = False
    for line in (text or '').splitlines():
        if re.match(r'^\S.*:\s*$', line):
            in_options = True  # "options:" / "optional arguments:" / group titles
            continue
        if not in_options:
            continue
        match = _HELP_OPT_RE.match(line)
        if not match:
            continue
        body = match.group(1)
        # the invocation ends where two spaces start the help text
        invocation = re.split(r'\s{2,}', body, 1)[0]
        parts = _split_invocation(invocation)
        if not parts or not all(p.startswith('-') for p in parts):
            continue
        flags = []
        metavar = None
        for part in parts:
            bits = part.split(None, 1)
            flags.append(bits[0])
            if len(bits) > 1:
                metavar = bits[1]
        choices = None
        nargs = 0 if metavar is None else None
        if metavar:
            cm = re.match(r'^\[?\{([^}]*)\}', metavar)
            if cm:
                choices = [c for c in cm.group(1).split(',') if c != '']
            if '...' in metavar:
                nargs = '*' if metavar.startswith('[') else '+'
            elif metavar.startswith('['):
                nargs = '?'
        longest = max(flags, key=len)
        options.append({
            'flags': flags, 'dest': longest.lstrip('-').replace('-', '_'), 'type': None,
            'nargs': nargs, 'takes_value': nargs != 0, 'choices': choices, 'default': None, 'help': None,
        })
    return options


# ---------------------------------------------------------------- the table
class FlagTable(object):
    """Lookup over an options list (the dump schema)."""

    def __init__(self, options, version=None):
        self.options = [o for o in (options or []) if o.get('flags')]
        self.version = version
        self.by_flag = {}
        for option in self.options:
            for flag in option['flags']:
                self.by_flag[flag] = option

    def __contains__(self, flag):
        return flag in self.by_flag

    def get(self, flag):
        return self.by_flag.get(flag)

    def all_flags(self):
        return sorted(f for f in self.by_flag if f.startswith('--'))

    def where(self):
        return '(sglang %s)' % (self.version or 'version unknown')

    def suggest_flag(self, flag):
        """Closest known long flag: a unique prefix match first (argparse would have taken it), then difflib."""
        flags = self.all_flags()
        prefixed = [f for f in flags if f.startswith(flag)]
        if len(prefixed) == 1:
            return prefixed[0]
        close = difflib.get_close_matches(flag, flags, n=1, cutoff=0.6)
        if close:
            return close[0]
        # same words in another order / family renamed (nsa -> dsa): compare the tail
        tail = flag.split('-', 3)[-1]
        close = difflib.get_close_matches(tail, [f.split('-', 3)[-1] for f in flags], n=1, cutoff=0.8)
        if close:
            for f in flags:
                if f.split('-', 3)[-1] == close[0]:
                    return f
        return None

    def unknown_flag_message(self, flag, option_name):
        hint = self.suggest_flag(flag)
        text = '%s: unknown flag %s' % (option_name, flag)
        if hint:
            text += ': did you mean %s? %s' % (hint, self.where())
        else:
            text += ' %s; run `python -m sglang.launch_server --help` on the host for the accepted flags' % self.where()
        return text

    def bad_choice_message(self, flag, value, option_name):
        option = self.get(flag)
        choices = [str(c) for c in option.get('choices') or []]
        hint = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.5)
        text = '%s: %r is not a choice of %s' % (option_name, value, flag)
        if hint:
            text += ': did you mean %r?' % hint[0]
        text += ' %s; choices: %s' % (self.where(), ', '.join(choices))
        return text


def _check_type(option, value):
    kind = option.get('type')
    try:
        if kind == 'int':
            int(str(value), 0) if str(value).lower().startswith(('0x', '0o', '0b')) else int(str(value))
        elif kind == 'float':
            float(str(value))
    except ValueError:
        return False
    return True


def parse_extra_args(extra_args, table, option_name='extra_args'):
    """Walk extra_args like argparse would: -> (items, errors).

    items: list of dict(flag, option, values). Values joined as ``--flag=value`` are split.
    """
    items = []
    errors = []
    args = [str(a) for a in (extra_args or [])]
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if not token.startswith('-') or token in ('-', '--'):
            errors.append('%s: stray value %r (not after a flag that takes a value); '
                          'give each flag and its value as separate list items' % (option_name, token))
            continue
        flag, eq, inline = token.partition('=')
        option = table.get(flag)
        if option is None:
            errors.append(table.unknown_flag_message(flag, option_name))
            # skip the values that follow an unknown flag
            while i < len(args) and not args[i].startswith('--'):
                i += 1
            continue
        nargs = option.get('nargs')
        values = []
        if nargs == 0:
            if eq:
                errors.append('%s: %s takes no value (it is a boolean flag); remove "=%s"' % (option_name, flag, inline))
        elif eq:
            values = [inline]
        elif nargs is None or isinstance(nargs, int):
            count = 1 if nargs is None else nargs
            while len(values) < count and i < len(args) and not args[i].startswith('--'):
                values.append(args[i])
                i += 1
            if len(values) < count:
                errors.append('%s: %s needs %s value%s' % (option_name, flag, count, '' if count == 1 else 's'))
        elif nargs in ('+', '*', '?'):
            while i < len(args) and not args[i].startswith('--'):
                values.append(args[i])
                i += 1
                if nargs == '?':
                    break
            if nargs == '+' and not values:
                errors.append('%s: %s needs at least one value' % (option_name, flag))
        for value in values:
            if option.get('choices') is not None and value not in [str(c) for c in option['choices']]:
                errors.append(table.bad_choice_message(flag, value, option_name))
            elif not _check_type(option, value):
                errors.append('%s: %s expects a value of type %s, got %r' % (option_name, flag, option.get('type'), value))
        items.append({'flag': flag, 'option': option, 'values': values})
    return items, errors


# ---------------------------------------------------------------- validation + argv
NAME_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')


def validate(params, table, arch=None, gpu_count=None, force=False, check_flags=True):
    """All checks before any change. -> dict(errors, warnings, arch_findings, extra_items).

    params: the module's options (dict). table: FlagTable (or None when check_flags is False).
    Every error names the option and the fix.
    """
    errors = []
    warnings = []
    model_path = params.get('model_path')
    if model_path is None or not str(model_path).strip():
        errors.append('model_path: must not be empty; set it to the model folder or Hugging Face repo id')
    python = params.get('python')
    if not python or not str(python).startswith('/'):
        errors.append('python: %r is not an absolute path; systemd needs one, e.g. /root/ml-env/bin/python3' % (python,))
    port = params.get('port')
    if port is not None and not 1 <= int(port) <= 65535:
        errors.append('port: %s is out of range; use 1-65535' % port)
    served = params.get('served_model_name')
    if served is not None and ':' in str(served):
        errors.append('served_model_name: %r contains ":" which SGLang rejects; use e.g. %r'
                      % (served, str(served).replace(':', '-')))
    tp_size = params.get('tp_size')
    if tp_size is not None and int(tp_size) < 1:
        errors.append('tp_size: must be 1 or more')
    nnodes = params.get('nnodes')
    nnodes = int(nnodes) if nnodes is not None else 1
    if nnodes < 1:
        errors.append('nnodes: must be 1 or more')
        nnodes = 1
    if nnodes > 1:
        node_rank = params.get('node_rank')
        if node_rank is None or not 0 <= int(node_rank) < nnodes:
            errors.append('node_rank: %r is not a rank of %d nodes; use 0..%d (0 serves HTTP)' % (node_rank, nnodes, nnodes - 1))
        if not params.get('dist_init_addr'):
            errors.append('dist_init_addr: needed with nnodes=%d; set it to HOST:PORT of rank 0' % nnodes)
        if tp_size is not None and int(tp_size) % nnodes:
            errors.append('tp_size: %s cannot be split over %d nodes; use a multiple of %d' % (tp_size, nnodes, nnodes))
    elif params.get('node_rank') or params.get('dist_init_addr'):
        errors.append('nnodes: node_rank and dist_init_addr are for multi-node groups; set nnodes too (2 or more)')
    if tp_size is not None and gpu_count is not None and int(tp_size) > int(gpu_count) * nnodes:
        if nnodes > 1:
            errors.append('tp_size: %s over %d nodes needs %d GPUs per node but this host has %s (gpu_count); '
                          'lower tp_size' % (tp_size, nnodes, -(-int(tp_size) // nnodes), gpu_count))
        else:
            errors.append('tp_size: %s is more than the %s GPU(s) of this host (gpu_count); lower tp_size or set gpu_count'
                          % (tp_size, gpu_count))
    api_key = params.get('api_key')
    extra = [str(a) for a in (params.get('extra_args') or [])]
    for token in extra:
        if token == API_KEY_FLAG or token.startswith(API_KEY_FLAG + '='):
            errors.append('extra_args: contains %s; remove it and use the api_key option (the key goes to the 0600 '
                          'EnvironmentFile, never to the unit or logs)' % API_KEY_FLAG)
            break
    if api_key and any(api_key in token for token in extra):
        errors.append('extra_args: contains the API key value; remove it and use the api_key option')
    for token in extra:
        if '\n' in token or '\x00' in token:
            errors.append('extra_args: %r contains a newline or NUL, which a unit file cannot carry' % token)

    extra_items = []
    if check_flags and table is not None:
        for name, flag in STRUCTURED + BOOLEAN_STRUCTURED:
            value = params.get(name)
            if value is None or value is False:
                continue
            option = table.get(flag)
            if option is None:
                errors.append('%s: the installed SGLang does not accept %s %s; unset %s or upgrade SGLang'
                              % (name, flag, table.where(), name))
                continue
            if option.get('choices') is not None and value is not True and str(value) not in [str(c) for c in option['choices']]:
                errors.append(table.bad_choice_message(flag, value, name))
        if api_key and table.get(API_KEY_FLAG) is None:
            errors.append('api_key: the installed SGLang does not accept %s %s' % (API_KEY_FLAG, table.where()))
        extra_items, extra_errors = parse_extra_args(extra, table)
        errors.extend(extra_errors)
        structured_dests = {}
        for name, flag in STRUCTURED + BOOLEAN_STRUCTURED:
            option = table.get(flag)
            if option is not None and params.get(name) not in (None, False):
                structured_dests[option['dest']] = name
        seen = {}
        for item in extra_items:
            dest = item['option']['dest']
            if dest in structured_dests:
                errors.append('extra_args: %s is set by the %s option; remove it from extra_args'
                              % (item['flag'], structured_dests[dest]))
            elif dest in seen:
                warnings.append('extra_args: %s given twice; SGLang keeps the last one' % item['flag'])
            seen[dest] = True

    # arch matrix: structured backends and any arch-checked flag in extra_args
    pairs = []
    for name, flag in STRUCTURED:
        if flag in ARCH_CHECKED_FLAGS and params.get(name) is not None:
            pairs.append((flag, params.get(name), name))
    for item in extra_items:
        if item['flag'] in ARCH_CHECKED_FLAGS or (item['option'].get('flags') and
                                                  set(item['option']['flags']) & set(ARCH_CHECKED_FLAGS)):
            canonical = [f for f in item['option']['flags'] if f in ARCH_CHECKED_FLAGS][0]
            for value in item['values']:
                pairs.append((canonical, value, 'extra_args'))
    findings = []
    if arch:
        for flag, value, name in pairs:
            result = arch_matrix.classify(flag, value, arch)
            if result['verdict'] == 'ok':
                continue
            result['option'] = name
            findings.append(result)
            if result['verdict'] == 'unsupported':
                if force:
                    warnings.append('%s: %s (forced)' % (name, result['reason']))
                else:
                    errors.append('%s: %s; choose another backend, or set force=true to try it anyway'
                                  % (name, result['reason']))
            else:
                warnings.append('%s: %s' % (name, result['reason']))
    return {'errors': errors, 'warnings': warnings, 'arch_findings': findings, 'extra_items': extra_items}


def build_argv(params):
    """[python, -m, sglang.launch_server, flags...]; the API key is EnvRef('SGLANG_API_KEY').

    Booleans take no value; ``--tp-size`` (not the ``--tp`` prefix).
    """
    argv = [params['python'], '-m', 'sglang.launch_server']
    for name, flag in STRUCTURED:
        value = params.get(name)
        if value is None:
            continue
        argv.extend([flag, str(value)])
    for name, flag in BOOLEAN_STRUCTURED:
        if params.get(name):
            argv.append(flag)
    if params.get('api_key'):
        argv.extend([API_KEY_FLAG, EnvRef(API_KEY_ENV)])
    argv.extend(str(a) for a in (params.get('extra_args') or []))
    return argv


def display_argv(argv):
    """argv as plain strings (EnvRef shown as ${NAME}: the key never appears)."""
    return [str(a) for a in argv]


# what validation reads of an option (FlagTable, validate, parse_extra_args); the rest is for people
VALIDATION_FIELDS = ('flags', 'dest', 'type', 'nargs', 'choices')


def compact_options(options):
    """The flag table with only what validation reads: flags, dest, and type, nargs, choices where set.

    Validation against it gives the same errors and warnings as against the full table (tested); it is under 60 %
    of the table without help texts, which matters because the deploy hands it to every sglang_launch call.
    """
    return [dict((key, option[key]) for key in VALIDATION_FIELDS if option.get(key) is not None)
            for option in options]


_OPTIONS_HINT = '; pass gpu_info sglang.options or sglang.options_json'


def load_options(value):
    """A flag table given as a list of dicts or as its JSON text -> (list or None, error or None).

    The error names what to pass instead (gpu_info's ``sglang.options`` or ``sglang.options_json``).

    The deploy passes the table as JSON text: Ansible templates a string in one piece but a list of 500 dicts
    item by item (about 0.1 s of controller CPU for every task that passes it).
    """
    if value is None or isinstance(value, list):
        options = value
    elif isinstance(value, (str, bytes)):
        try:
            options = json.loads(value)
        except ValueError as exc:
            return None, 'is not a list of options nor its JSON text (%s)%s' % (exc, _OPTIONS_HINT)
    else:
        return None, 'must be a list of options or its JSON text, got %s%s' % (type(value).__name__, _OPTIONS_HINT)
    if options is not None and (not isinstance(options, list)
                                or not all(isinstance(o, dict) and o.get('flags') and o.get('dest') for o in options)):
        return None, 'must be a list of options, each with flags and dest' + _OPTIONS_HINT
    return options, None


def read_installed(run, python):
    """Ask the installed SGLang for its version and flag table.

    run: callable(argv) -> (rc, stdout, stderr) (``module.run_command``). First the introspection
    snippet (SGLang's own parser), then ``--help`` parsing. -> dict(installed, version, python,
    source, options, error); ``installed`` False when ``import sglang`` fails.
    """
    result = {'installed': False, 'version': None, 'python': python, 'python_version': None,
              'source': None, 'options': [], 'error': None}
    rc, out, err = run(introspect_argv(python))
    data = parse_introspection(out)
    if data is None:
        tail = (err or out or '').strip().splitlines()[-5:]
        result['error'] = 'running %s failed (rc=%s): %s' % (python, rc, ' | '.join(tail))
        return result
    result['python_version'] = data.get('python')
    result['installed'] = bool(data.get('installed'))
    result['version'] = data.get('version')
    if not result['installed']:
        result['error'] = data.get('error')
        return result
    if data.get('options'):
        result['options'] = data['options']
        result['source'] = data.get('source') or 'introspection'
        return result
    # the parser could not be built: fall back to --help
    rc, out, err = run(help_argv(python))
    options = parse_help(out) if rc == 0 else []
    if options:
        result['options'] = options
        result['source'] = 'launch_server --help'
        result['error'] = data.get('error')
    else:
        result['error'] = '%s; `%s` failed too (rc=%s): %s' % (
            data.get('error'), ' '.join(help_argv(python)), rc, ' | '.join((err or '').strip().splitlines()[-3:]))
    return result


def error_kinds(errors):
    """Report reasons for validation errors (the report's vocabulary), in order, without repeats.

    ``unknown_flag`` (a flag the installed SGLang does not accept), ``unknown_choice`` (a value not among its
    choices), ``arch_unsupported`` (the arch matrix), ``invalid_input`` (everything else).
    """
    kinds = []
    for error in errors:
        if 'unknown flag' in error or 'does not accept' in error:
            kind = 'unknown_flag'
        elif 'is not a choice of' in error:
            kind = 'unknown_choice'
        elif ' on sm' in error and 'set force=true' in error:
            kind = 'arch_unsupported'
        else:
            kind = 'invalid_input'
        if kind not in kinds:
            kinds.append(kind)
    return kinds
