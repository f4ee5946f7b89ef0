# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""systemd: ExecStart quoting (systemd's rules, not the shell's), unit and EnvironmentFile rendering,
and a tokenizer that reads an ExecStart back the way systemd does (used by the tests to prove the
round trip, checked against ``systemd-analyze verify``).

systemd's rules (systemd.service(5) "Command lines", systemd.syntax(7), systemd.unit(5) "Specifiers"):
- ``%`` starts a specifier: a literal ``%`` is ``%%``.
- ``$`` starts a variable (``${NAME}`` one word, ``$NAME`` alone split on whitespace): a literal ``$`` is ``$$``.
- words are split on whitespace; single or double quotes group; backslash escapes (C style) inside and outside quotes.
- a line ending in ``\\`` continues on the next line (the backslash becomes a space).
Pure functions, stdlib only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.llmserve.sglang.plugins.module_utils.sglang_flags import EnvRef

ENV_NAME_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')
_SAFE_RE = re.compile(r'^[A-Za-z0-9_@+=:,./-]+$')
SECRET_NAME_RE = re.compile(r'(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)', re.IGNORECASE)
MASK = '********'
HEADER = ('# Ansible managed: written by llmserve.sglang.%s; local changes are overwritten.\n'
          '# Do not edit: change the playbook variables instead.\n')


class UnitError(ValueError):
    pass


# ---------------------------------------------------------------- quoting
def quote_arg(arg):
    """One argv element -> its ExecStart form. EnvRef -> ``${NAME}`` (substituted by systemd, one word)."""
    if isinstance(arg, EnvRef):
        return '${%s}' % arg.name
    text = str(arg)
    if '\n' in text or '\r' in text or '\x00' in text:
        raise UnitError('argument %r contains a newline or NUL, which ExecStart cannot carry' % text)
    text_sd = text.replace('%', '%%').replace('$', '$$')
    if text and _SAFE_RE.match(text):
        return text_sd
    out = []
    for ch in text_sd:
        if ch == '\\':
            out.append('\\\\')
        elif ch == '"':
            out.append('\\"')
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append('\\x%02x' % ord(ch))
        else:
            out.append(ch)
    return '"%s"' % ''.join(out)


def render_exec_start(argv, wrap=True):
    """ExecStart value. With wrap, each flag starts a continuation line (readable ``systemctl cat``)."""
    if not argv:
        raise UnitError('empty argv')
    quoted = [quote_arg(a) for a in argv]
    if not wrap:
        return ' '.join(quoted)
    lines = []
    current = []
    for raw, q in zip(argv, quoted):
        if isinstance(raw, str) and raw.startswith('--') and current:
            lines.append(' '.join(current))
            current = []
        current.append(q)
    lines.append(' '.join(current))
    return ' \\\n    '.join(lines)


# ---------------------------------------------------------------- reading back (systemd's way)
_SIMPLE_ESCAPES = {'a': '\a', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'v': '\v',
                   '\\': '\\', '"': '"', "'": "'", 's': ' '}


def join_continuations(text):
    """systemd.syntax(7): a line ending in a backslash continues; the backslash becomes a space."""
    out = []
    for line in text.split('\n'):
        if line.endswith('\\'):
            out.append(line[:-1] + ' ')
        else:
            out.append(line + '\n')
    return ''.join(out).rstrip('\n')


def expand_specifiers(text, specifiers=None):
    """``%%`` -> ``%``; other ``%x`` from ``specifiers`` (dict), unknown -> UnitError (systemd rejects them)."""
    specifiers = specifiers or {}
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == '%':
            if i + 1 >= len(text):
                raise UnitError('lone %% at the end of %r' % text)
            nxt = text[i + 1]
            if nxt == '%':
                out.append('%')
            elif nxt in specifiers:
                out.append(specifiers[nxt])
            else:
                raise UnitError('unknown specifier %%%s in %r' % (nxt, text))
            i += 2
            continue
        out.append(ch)
        i += 1
    return ''.join(out)


def _unescape(text, i):
    """C unescape at text[i] (just after a backslash) -> (string, new index). Unknown escapes kept (RELAX)."""
    if i >= len(text):
        raise UnitError('trailing backslash')
    ch = text[i]
    if ch in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[ch], i + 1
    if ch == 'x' and re.match(r'^[0-9a-fA-F]{2}$', text[i + 1:i + 3]):
        value = int(text[i + 1:i + 3], 16)
        if value == 0:
            raise UnitError('\\x00 is not allowed')
        return chr(value), i + 3
    if ch in '01234567' and re.match(r'^[0-7]{3}$', text[i:i + 3]):
        return chr(int(text[i:i + 3], 8)), i + 3
    if ch == 'u' and re.match(r'^[0-9a-fA-F]{4}$', text[i + 1:i + 5]):
        return chr(int(text[i + 1:i + 5], 16)), i + 5
    if ch == 'U' and re.match(r'^[0-9a-fA-F]{8}$', text[i + 1:i + 9]):
        return chr(int(text[i + 1:i + 9], 16)), i + 9
    return '\\' + ch, i + 1


def split_words(text):
    """systemd's extract_first_word(UNQUOTE|CUNESCAPE|CUNESCAPE_RELAX) applied until the end."""
    words = []
    i = 0
    n = len(text)
    while True:
        while i < n and text[i] in ' \t\n\r':
            i += 1
        if i >= n:
            return words
        word = []
        quote = None
        while i < n:
            ch = text[i]
            if quote:
                if ch == quote:
                    quote = None
                    i += 1
                elif ch == '\\':
                    piece, i = _unescape(text, i + 1)
                    word.append(piece)
                else:
                    word.append(ch)
                    i += 1
                continue
            if ch in ' \t\n\r':
                break
            if ch in '"\'':
                quote = ch
                i += 1
            elif ch == '\\':
                piece, i = _unescape(text, i + 1)
                word.append(piece)
            else:
                word.append(ch)
                i += 1
        if quote:
            raise UnitError('unbalanced quoting in %r' % text)
        words.append(''.join(word))


def substitute_env(words, env):
    """Exec-time variable substitution: ``$$`` -> ``$``, ``${NAME}`` -> value (one word), a word that is
    exactly ``$NAME`` -> the value split on whitespace. Unset variables become empty."""
    out = []
    for word in words:
        whole = re.match(r'^\$([A-Za-z_][A-Za-z0-9_]*)$', word)
        if whole:
            out.extend((env.get(whole.group(1)) or '').split())
            continue
        res = []
        i = 0
        while i < len(word):
            if word.startswith('$$', i):
                res.append('$')
                i += 2
            elif word.startswith('${', i):
                end = word.find('}', i)
                if end < 0:
                    res.append(word[i:])
                    break
                res.append(env.get(word[i + 2:end], ''))
                i = end + 1
            else:
                res.append(word[i])
                i += 1
        out.append(''.join(res))
    return out


def parse_exec_start(value, env=None, specifiers=None):
    """An ExecStart value as written in the unit -> the argv the process gets."""
    text = join_continuations(value)
    text = expand_specifiers(text, specifiers)
    words = split_words(text)
    if words and words[0][:1] in '-@:+!':
        words[0] = words[0].lstrip('-@:+!')
    return substitute_env(words, env or {})


def _logical_lines(unit_text):
    """Yield ``(section, line)`` for each logical line of a unit file, in order: a line ending in a backslash is
    joined with the next (newline kept), a comment never continues (systemd.syntax(7)); a section header yields its
    own section."""
    current = None
    lines = unit_text.split('\n')
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        stripped = line.strip()
        if stripped.startswith('#') or stripped.startswith(';'):
            yield current, line
            continue
        while line.endswith('\\') and i < len(lines):
            line = line + '\n' + lines[i]
            i += 1
        if stripped.startswith('[') and stripped.endswith(']'):
            current = stripped[1:-1]
        yield current, line


def read_unit_value(unit_text, key, section='Service'):
    """The value of ``key`` in ``[section]`` with continuations joined (first occurrence)."""
    for current, line in _logical_lines(unit_text):
        stripped = line.lstrip()
        if current != section or not stripped or stripped[0] in '#;[' or '=' not in stripped:
            continue
        name, dummy, value = stripped.partition('=')
        if name.strip() == key:
            value = value.lstrip()
            return value if '\n' in value else value.rstrip()
    return None


# ---------------------------------------------------------------- env file
def env_quote(value):
    """EnvironmentFile value: double quotes, escape \\ " ` $ (systemd's parse_env_file)."""
    text = str(value)
    if '\n' in text or '\x00' in text:
        raise UnitError('environment value contains a newline or NUL')
    for ch in '\\"`$':
        text = text.replace(ch, '\\' + ch)
    return '"%s"' % text


def env_unquote(text):
    """Inverse of env_quote for one value (for tests and diffs)."""
    text = text.strip()
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        body = text[1:-1]
        out = []
        i = 0
        while i < len(body):
            if body[i] == '\\' and i + 1 < len(body) and body[i + 1] in '\\"`$':
                out.append(body[i + 1])
                i += 2
            else:
                out.append(body[i])
                i += 1
        return ''.join(out)
    if len(text) >= 2 and text[0] == "'" and text[-1] == "'":
        return text[1:-1]
    return text


def validate_env(env, option='env', reserved=()):
    errors = []
    for name in sorted((env or {}).keys()):
        value = env[name]
        if not ENV_NAME_RE.match(str(name)):
            errors.append('%s: variable name %r is invalid; names must match ^[A-Za-z_][A-Za-z0-9_]*$' % (option, name))
        elif name in reserved:
            errors.append('%s: %s is set by the module (use the api_key option)' % (option, name))
        if value is None:
            errors.append('%s: %s has no value; give a string (use "" for empty)' % (option, name))
        elif '\n' in str(value) or '\x00' in str(value):
            errors.append('%s: the value of %s contains a newline or NUL, which an EnvironmentFile cannot carry' % (option, name))
    return errors


def _bool_env(value):
    if value is True:
        return '1'
    if value is False:
        return '0'
    return value


def render_env_file(env, api_key=None, api_key_env='SGLANG_API_KEY', module='sglang_launch', mask=False):
    """0600 EnvironmentFile content, sorted; with mask, secrets (the key, *TOKEN*, *SECRET*...) shown as ********."""
    lines = [HEADER % module]
    items = dict((k, _bool_env(v)) for k, v in (env or {}).items())
    if api_key:
        items[api_key_env] = api_key
    for name in sorted(items):
        value = items[name]
        if mask and (name == api_key_env or SECRET_NAME_RE.search(name)):
            value = MASK
        lines.append('%s=%s\n' % (name, env_quote(value)))
    return ''.join(lines)


def parse_env_file(text):
    env = {}
    for line in (text or '').splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in '#;' or '=' not in stripped:
            continue
        name, dummy, value = stripped.partition('=')
        env[name.strip()] = env_unquote(value)
    return env


# ---------------------------------------------------------------- unit
def _plain(value, what):
    text = str(value)
    if '\n' in text or '\r' in text:
        raise UnitError('%s must be one line' % what)
    return text


def unit_path_value(path):
    """A path in a unit setting (WorkingDirectory=, EnvironmentFile=): specifiers escaped, spaces allowed as is."""
    return _plain(path, 'path').replace('%', '%%')


def render_unit(argv, service_name, env_path, description=None, restart='no', restart_sec=5,
                timeout_stop_sec=30, limit_nofile=1048576, working_directory='/', user=None,
                module='sglang_launch', wanted_by='multi-user.target', log_filter_patterns=()):
    """The unit file text. Deterministic (no timestamps) so that an unchanged config is not rewritten.

    KillMode=mixed: on stop, SIGTERM goes to the main process only (SGLang drains and takes its
    tensor-parallel workers down itself); whatever is left of the group gets SIGKILL after
    TimeoutStopSec, so a stop is bounded.
    """
    description = _plain(description or 'SGLang server %s' % service_name, 'description')
    lines = [
        HEADER % module,
        '[Unit]\n',
        'Description=%s\n' % description.replace('%', '%%'),
        'Wants=network-online.target\n',
        'After=network-online.target\n',
        '\n',
        '[Service]\n',
        'Type=simple\n',
    ]
    if user:
        lines.append('User=%s\n' % _plain(user, 'user'))
    lines.extend([
        'WorkingDirectory=%s\n' % unit_path_value(working_directory or '/'),
        'Environment=PYTHONUNBUFFERED=1\n',
        'EnvironmentFile=%s\n' % unit_path_value(env_path),
        'ExecStart=%s\n' % render_exec_start(argv),
        'KillMode=mixed\n',
        'KillSignal=SIGTERM\n',
        'SendSIGKILL=yes\n',
        'TimeoutStopSec=%s\n' % int(timeout_stop_sec),
        'Restart=%s\n' % restart,
    ])
    if restart != 'no':
        lines.append('RestartSec=%s\n' % int(restart_sec))
    for pattern in log_filter_patterns or ():
        lines.append('LogFilterPatterns=%s\n' % _plain(pattern, 'log_filter_patterns').replace('%', '%%'))
    lines.extend([
        'LimitNOFILE=%s\n' % limit_nofile,
        'SyslogIdentifier=%s\n' % _plain(service_name, 'service_name'),
        '\n',
        '[Install]\n',
        'WantedBy=%s\n' % wanted_by,
    ])
    return ''.join(lines)


# SGLang logs every server argument at start-up (``server_args={... 'api_key': 'VALUE', ...}``). This deny pattern
# (PCRE2, matched against the journal's MESSAGE=) keeps that line out of the journal when a key is set, and only
# then: with no key the line reads ``'api_key': None`` and stays. ``\x27`` is the quote, so the setting has neither
# quotes nor spaces for systemd's parser.
SECRET_LOG_FILTER = r'~api_key.:.\x27'
# the first systemd with LogFilterPatterns= (systemd.exec(5)); older ones ignore the setting with a warning
LOG_FILTER_MIN_SYSTEMD = 253
_SYSTEMD_VERSION_RE = re.compile(r'^systemd\s+(\d+)\b')


def systemd_version(text):
    """The major version from ``systemctl --version`` (``systemd 252 (252.39-1~deb12u1)``), or None."""
    m = _SYSTEMD_VERSION_RE.match((text or '').strip())
    return int(m.group(1)) if m else None


def log_filter_patterns(version, api_key_set):
    """``LogFilterPatterns=`` values for the unit: the secret line's deny pattern where systemd has the setting and
    a key is set; none otherwise (the README says what is left to do on older hosts)."""
    if api_key_set and version is not None and version >= LOG_FILTER_MIN_SYSTEMD:
        return [SECRET_LOG_FILTER]
    return []


RESTART_CHOICES = ('no', 'on-failure', 'on-abnormal', 'on-abort', 'always')
SERVICE_NAME_RE = re.compile(r'^[A-Za-z0-9:_.\\-]+$')
# [Service] settings systemd applies to the running service after a daemon-reload (what it does when the process
# exits next): changing only these needs no restart.
RELOAD_ONLY_SETTINGS = ('Restart', 'RestartSec')


def _settings_but(unit_text, skip, section='Service'):
    """The unit's logical lines (continuations joined, comments and blank lines kept, in order), without the
    ``skip`` settings of ``[section]``."""
    out = []
    for current, line in _logical_lines(unit_text):
        stripped = line.strip()
        if (current == section and stripped[:1] not in ('#', ';', '[') and '=' in stripped
                and stripped.partition('=')[0].strip() in skip):
            continue
        out.append(line)
    return out


def unit_change(old_text, new_text):
    """What replacing unit ``old_text`` by ``new_text`` asks of a running service.

    -> ``'none'`` (same text), ``'reload'`` (only ``Restart=`` / ``RestartSec=`` of ``[Service]`` differ:
    ``systemctl daemon-reload`` applies them to the running process, which goes on, same InvocationID) or
    ``'restart'`` (anything else differs, or there was no unit before). Pure.
    """
    if old_text == new_text:
        return 'none'
    if old_text is None or new_text is None:
        return 'restart'
    if _settings_but(old_text, RELOAD_ONLY_SETTINGS) == _settings_but(new_text, RELOAD_ONLY_SETTINGS):
        return 'reload'
    return 'restart'


def only_restart_policy_changed(old_text, new_text):
    """True when the two unit texts differ in ``Restart=`` / ``RestartSec=`` only (see unit_change)."""
    return unit_change(old_text, new_text) == 'reload'


def normalize_restart(value):
    """YAML turns an unquoted ``no`` into False: accept it."""
    if value is None or value is False or str(value).lower() in ('false', 'no'):
        return 'no'
    if value is True or str(value).lower() == 'true':
        return 'always'
    return str(value)


def validate_service_name(name):
    """-> error text or None. A bare name (``sglang-qwen``), no ``.service``, no slash."""
    if not name:
        return 'service_name: must not be empty; e.g. sglang'
    if name.endswith('.service'):
        return 'service_name: give it without ".service" (e.g. %s)' % name[:-len('.service')]
    if not SERVICE_NAME_RE.match(name) or len(name) > 200:
        return ('service_name: %r is not a valid unit name; use letters, digits, "-", "_", "." and ":" only' % name)
    return None
