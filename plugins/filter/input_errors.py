# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight role's input-error messages, each naming the variable to change (logic in
module_utils/_input_errors.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmserve.sglang.plugins.module_utils import _input_errors as ie


def invalid_input(errors, host, secrets=None):
    return ie.invalid_input(errors, host, None if secrets is None else list(secrets))


def launch_input_errors(result, host):
    return ie.named_errors(ie.launch_errors(dict(result or {})), host)


def sglang_python_error(sglang, python):
    return ie.sglang_python_error(dict(sglang or {}), python)


def input_stop(host, secrets=None, **checks):
    return ie.input_stop(host, secrets, **checks)


def tp_size_error(tp_size, host, gpu_count, subset):
    return ie.tp_size_error(tp_size, host, gpu_count, dict(subset or {}))


def port_in_use(plan_result, port, host, service_name):
    plan_result = dict(plan_result or {})
    return ie.port_in_use(plan_result.get('port_listeners'), plan_result.get('port_ss'), port, host, service_name)


def proxmox_target_error(node, vmid, host, hostvars):
    return ie.proxmox_target_error(node, vmid, host, hostvars)


def proxmox_node_unreachable(wait_result, node, address, host):
    return ie.proxmox_node_unreachable(dict(wait_result or {}), node, address, host)


def container_unusable(pct_status, node, vmid, host):
    return ie.container_unusable(dict(pct_status or {}), node, vmid, host)


class FilterModule(object):
    def filters(self):
        return {
            'invalid_input': invalid_input,
            'launch_input_errors': launch_input_errors,
            'sglang_python_error': sglang_python_error,
            'input_stop': input_stop,
            'tp_size_error': tp_size_error,
            'port_in_use': port_in_use,
            'proxmox_target_error': proxmox_target_error,
            'proxmox_node_unreachable': proxmox_node_unreachable,
            'container_unusable': container_unusable,
        }
