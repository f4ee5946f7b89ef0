# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight role's input errors: each message names the user's variable to change, and the fix.

- ``invalid_input(errors, host, secrets=None)``: ``HOST: invalid input, nothing was changed: E1; E2`` (the error
  texts masked with ``redact.redact_text`` when ``secrets`` is a list);
- ``launch_errors(result)`` / ``named_errors(errors, host)``: the errors of a failed ``sglang_launch`` (each starts
  with its option, ``option: text``), each option named by the variable behind it (``OPTION_VARS``);
- ``sglang_python_error(sglang, python)``: SGLang cannot be used from ``sglang_python``;
- ``input_stop(host, secrets, **checks)``: the message of the first of preflight's checks on the host's own inputs
  that fails (``STOP_ORDER``), so that one task stops on any of them;
- ``tp_size_error(tp_size, host, gpu_count, subset)``: ``sglang_tp_size`` negative or above the service's GPUs;
- ``port_in_use(listeners, ss_lines, port, host, service_name)``: the processes of another unit that listen on
  ``sglang_port``, and the message;
- ``proxmox_target_error``, ``proxmox_node_unreachable``, ``container_unusable``: a container's Proxmox node and
  vmid (``sglang_proxmox_node``, ``sglang_proxmox_vmid``).

The checks (``sglang_python_error`` and those after it) return the message, or ``''`` when there is nothing to stop
for (``port_in_use`` in its ``msg``). A value is written into a message as an Ansible template writes it: ``None``
as nothing, anything else with ``str()`` (the items of a joined list and a trimmed text always with ``str()``, as
Jinja's ``join`` and ``trim`` do). Stdlib only; private to this collection; the preflight role calls these through
the filters of ``plugins/filter/input_errors.py``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.llmserve.sglang.plugins.module_utils import redact

PREFIX = '%s: invalid input, nothing was changed: '

# sglang_launch option -> the public variable behind it (the preflight role's launch, its module_defaults)
OPTION_VARS = {
    'python': 'sglang_python',
    'model_path': 'sglang_model_path',
    'served_model_name': 'sglang_served_model_name',
    'tp_size': 'sglang_tp_size',
    'quantization': 'sglang_quantization',
    'host': 'sglang_host',
    'port': 'sglang_port',
    'api_key': 'sglang_api_key',
    'env': 'sglang_env (or sglang_known_good.env)',
    'gpu_count': 'sglang_gpus',
    'extra_args': 'sglang_extra_args (or sglang_known_good.extra_args)',
    'tool_call_parser': 'sglang_tool_call_parser',
    'reasoning_parser': 'sglang_reasoning_parser',
    'moe_runner_backend': 'sglang_known_good.moe_runner_backend',
    'fp4_gemm_backend': 'sglang_known_good.fp4_gemm_backend',
    'attention_backend': 'sglang_known_good.attention_backend',
    'service_name': 'sglang_service_name',
    'restart': 'sglang_restart',
    'restart_sec': 'sglang_restart_sec',
    'nnodes': 'sglang_group',
    'node_rank': 'sglang_node_rank',
    'dist_init_addr': 'sglang_dist_init_addr',
}

# preflight's checks of the host's own inputs, in the order they stop a deploy (input_stop), and those whose errors are
# masked (they may quote sglang_env): sglang_model_download's inputs, sglang_gpus against the host's GPUs (and the
# server's environment), SGLang in sglang_python (a message of its own), the model folder, sglang_smoke_prompts,
# sglang_metric_labels
STOP_ORDER = ('download', 'gpus', 'sglang', 'model', 'smoke', 'metrics')
MASKED = ('gpus',)
OWN_MESSAGE = ('sglang',)

# a vmid as sglang_proxmox_vmid must give it
VMID_RE = re.compile(r'^[1-9][0-9]*$')
# pct status of a running container
RUNNING_RE = re.compile(r'status:\s*running')


def _text(value):
    """``value`` as a template writes it into a message."""
    return '' if value is None else str(value)


def _as_int(value, default=0):
    """``value`` as Jinja's ``int`` filter reads it (``'42.5'`` is 42, what is no number is ``default``)."""
    try:
        return int(value, 10) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return default


def invalid_input(errors, host, secrets=None):
    """``HOST: invalid input, nothing was changed: E1; E2``; ``errors`` a list, or one text.

    With ``secrets`` (a list, even an empty one) the errors' text is masked: the values given and the secret shapes
    that ``redact.redact_text`` always masks; the host's name is not.
    """
    if isinstance(errors, str):
        errors = [errors]
    text = '; '.join(str(e) for e in errors or [])
    if secrets is not None:
        text = redact.redact_text(text, [str(s) for s in secrets])
    return PREFIX % _text(host) + text


def variable_of(option):
    """The public variable behind a ``sglang_launch`` option (the option itself when none is)."""
    return OPTION_VARS.get(option, option)


def launch_errors(result):
    """The errors of a failed ``sglang_launch`` result: its ``errors``, else its ``msg``, else ``unknown error``."""
    result = result or {}
    if 'errors' in result:
        return list(result['errors'] or [])
    return [result.get('msg', 'unknown error')]


def named_errors(errors, host):
    """``invalid_input`` of ``sglang_launch`` errors, each ``option: text`` as ``variable: text``.

    The option is what comes before the first ``:`` (an error without one is its own option); each error is
    written after a space of its own, so two spaces follow the prefix's colon and each ``;``.
    """
    named = []
    for error in errors or []:
        error = _text(error)
        option = error.partition(':')[0]
        named.append(' ' + variable_of(option) + error[len(option):])
    return PREFIX % _text(host) + '; '.join(named)


def sglang_python_error(sglang, python):
    """The message when SGLang cannot be used from ``sglang_python`` (``gpu_info``'s ``sglang``), else ``''``."""
    sglang = sglang or {}
    if sglang.get('installed') and _as_int(sglang.get('option_count')) > 0:
        return ''
    return ('sglang_python=%s: SGLang is not usable there (%s). Point sglang_python at the interpreter of the '
            'environment SGLang is installed in.' % (_text(python), _text(sglang.get('error'))))


def input_stop(host, secrets, **checks):
    """The message that stops the deploy on the first of ``checks`` that found anything, in ``STOP_ORDER``; ``''``.

    A check is its errors (a list, or one text: ``invalid_input`` of them, masked with ``secrets`` for those in
    ``MASKED``) or, for those in ``OWN_MESSAGE``, the whole message (``sglang_python_error``'s). A check left out, or
    empty, found nothing.
    """
    unknown = sorted(set(checks) - set(STOP_ORDER))
    if unknown:
        raise ValueError('input_stop: unknown check(s) %s (known: %s)' % (', '.join(unknown), ', '.join(STOP_ORDER)))
    for name in STOP_ORDER:
        found = checks.get(name)
        if not found:
            continue
        if name in OWN_MESSAGE:
            return _text(found)
        return invalid_input(found, host, list(secrets or []) if name in MASKED else None)
    return ''


def tp_size_error(tp_size, host, gpu_count, subset):
    """The message when ``sglang_tp_size`` is negative or above the service's GPU count, else ``''``.

    ``subset``: the service's share of the GPUs (filter ``gpu_subset``: ``all``, ``indices``), named in the message
    when it is not every GPU of the host.
    """
    subset = subset or {}
    if 0 <= _as_int(tp_size) <= _as_int(gpu_count):
        return ''
    every = subset.get('all')
    share = '' if every else ' for this service (sglang_gpus=%s)' % ','.join(str(i) for i in subset.get('indices'))
    return ('sglang_tp_size=%s but %s has %s GPU(s)%s: set sglang_tp_size to at most %s (0 = all %s).'
            % (_text(tp_size), _text(host), _text(gpu_count), share, _text(gpu_count),
               'GPUs' if every else 'of sglang_gpus'))


def port_in_use(listeners, ss_lines, port, host, service_name):
    """``{'foreign': [...], 'msg': ...}``: the listeners on ``sglang_port`` that are no process of the service.

    ``listeners``: ``sglang_plan``'s ``port_listeners`` (``pid``, ``cgroup``); one whose cgroup could not be read is
    gone, and one in the service's own unit (the cgroup path has ``/SERVICE.service``, the name read as a regular
    expression) may keep the port. ``msg`` is ``''`` when no other process listens.
    """
    own = re.compile('/' + _text(service_name) + '[.]service')
    foreign = [dict(listener) for listener in listeners or []
               if isinstance(listener.get('cgroup'), str) and not own.search(listener['cgroup'])]
    if not foreign:
        return {'foreign': foreign, 'msg': ''}
    msg = ('sglang_port=%s is already in use on %s by pid %s, not by %s.service (ss: %s): stop that process or choose '
           'another sglang_port. Nothing was changed.'
           % (_text(port), _text(host), ', '.join(str(listener.get('pid')) for listener in foreign),
              _text(service_name), '; '.join(str(line) for line in ss_lines or [])))
    return {'foreign': foreign, 'msg': msg}


def proxmox_target_error(node, vmid, host, inventory):
    """The message when a container's ``sglang_proxmox_node`` is no host of ``inventory`` (``hostvars``) or its
    ``sglang_proxmox_vmid`` is no positive number, else ``''``."""
    if node and node in inventory and VMID_RE.match(_text(vmid)):
        return ''
    return ('%s: sglang_proxmox_node=%s and sglang_proxmox_vmid=%s: a container needs both, the node as the name of a '
            'host of the inventory and the vmid as a positive number (pct list on the node shows them). Nothing was '
            'changed.' % (_text(host), json.dumps(node), json.dumps(vmid)))


def proxmox_node_unreachable(wait_result, node, address, host):
    """The message when ``wait_for`` got no answer on the node's ssh port (no ``state`` in its result), else ``''``."""
    wait_result = wait_result or {}
    if 'state' in wait_result:
        return ''
    return ('%s: sglang_proxmox_node=%s (%s) is unreachable (%s): fix its address in the inventory, or bring the node '
            'up. Nothing was changed.' % (_text(host), _text(node), _text(address),
                                          str(wait_result.get('msg', '')).strip()))


def container_unusable(pct_status, node, vmid, host):
    """The message when ``pct status VMID`` on the node failed (no such container) or says it is not running,
    else ``''``. The text keeps two spaces after ``HOST:`` and before ``Nothing was changed.``"""
    pct_status = pct_status or {}
    rc = pct_status.get('rc')
    stdout = str(pct_status.get('stdout'))
    if rc != 0:
        said = str(pct_status.get('stderr') or pct_status.get('stdout')).strip()
        return ('%s:  sglang_proxmox_vmid=%s is not a container of %s (pct status: %s): fix sglang_proxmox_vmid '
                '(pct list on %s shows the containers).  Nothing was changed.'
                % (_text(host), _text(vmid), _text(node), said, _text(node)))
    if RUNNING_RE.search(stdout):
        return ''
    return ('%s:  container %s on %s is not running (%s): start it (pct start %s on %s) and run again.  Nothing was '
            'changed.' % (_text(host), _text(vmid), _text(node), stdout.strip(), _text(vmid), _text(node)))
