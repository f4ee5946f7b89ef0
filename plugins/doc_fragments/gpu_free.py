# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The options of a GPU clean-up; the argument spec is ``_specs.gpu_free_argument_spec()``.

    The texts name no other option with O(...): they are read both at a module's top level and as suboptions.
    FREE_GPUS is DOCUMENTATION's options nested under C(free_gpus), word for word (fragments are plain strings;
    tests/unit/plugins/module_utils/test_specs.py checks that the two say the same).
    """

    # llmserve.sglang.gpu_free: the options at the module's top level (gpu_reset)
    DOCUMENTATION = r'''
options:
  protected_pids:
    description: PIDs never to signal.
    type: list
    elements: int
    default: []
  protected_names:
    description: Process names (C(/proc/<pid>/comm)) never to signal, added to the built-in list.
    type: list
    elements: str
    default: []
  default_protected:
    description:
      - Also protect the built-in names (C(systemd), C(init), C(sshd), C(nvidia-persistenced), C(nv-hostengine),
        C(Xorg), ...).
    type: bool
    default: true
  term_grace:
    description: Seconds between SIGTERM and SIGKILL.
    type: float
    default: 5
  timeout:
    description: Seconds the freeing of the GPUs may take (after the unit's stop), memory wait included.
    type: float
    default: 30
  memory_threshold_mib:
    description: A GPU counts as free when its used memory is below this (MiB).
    type: int
    default: 1024
  gpus:
    description:
      - The GPUs to free, as indices or as GPU UUIDs (not both; the format of C(sglang_gpus)). Default all.
      - With a subset, only a holder whose GPUs all lie inside it is ended, and only these GPUs' memory is awaited. A
        holder of other GPUs only, or of no GPU in particular (only C(/dev/nvidiactl), C(/dev/nvidia-uvm)), is spared.
        A holder of GPUs inside and outside the subset, or a holder of the subset's GPUs that runs in another system
        service than the unit being stopped (its cgroup C(system.slice/NAME.service)), is never signalled; the module
        fails before any signal, naming its PID, its GPUs and its service, also in check mode.
      - A holder's GPUs are those C(nvidia-smi) lists for it plus the C(/dev/nvidiaN) nodes it has open (N taken as the
        GPU's index).
      - An index or UUID the host does not have fails the module before any change.
    type: list
    elements: str
  devices:
    description: Shell glob of the GPU device nodes to look at.
    type: str
    default: /dev/nvidia*
  fuser:
    description: Name or path of C(fuser) (psmisc). When missing, C(/proc/*/fd) is scanned instead.
    type: str
    default: fuser
  nvidia_smi:
    description:
      - Name or path of C(nvidia-smi) on the target.
      - A bare name is looked up on E(PATH) and the usual system directories.
    type: str
    default: nvidia-smi
  stop_timeout:
    description:
      - Seconds the unit's stop (C(systemctl stop)) may take; when it does not finish in time,
        C(systemctl kill --signal=SIGKILL) ends what the unit still runs.
    type: float
    default: 60
  kill_unit:
    description:
      - End what the unit runs with C(systemctl kill --signal=SIGKILL) first, then stop it (bounded by the stop timeout).
        Meant for a unit whose server already failed, with nothing to drain; SGLang's own clean-up after a crash
        ignores SIGTERM for up to a minute.
    type: bool
    default: false
    version_added: 0.2.0
  hard_reset:
    description:
      - When memory is still held at the end, run C(nvidia-smi --gpu-reset -i N) on those GPUs.
      - Never on shared machines (it disturbs every user of the GPU and needs all its processes gone); off by default.
    type: bool
    default: false
'''

    # llmserve.sglang.gpu_free.free_gpus: the same options as the suboptions of free_gpus (sglang_launch); the module
    # documents free_gpus's own description, type and version_added, and no suboptions
    FREE_GPUS = r'''
options:
  free_gpus:
    suboptions:
      protected_pids:
        description: PIDs never to signal.
        type: list
        elements: int
        default: []
      protected_names:
        description: Process names (C(/proc/<pid>/comm)) never to signal, added to the built-in list.
        type: list
        elements: str
        default: []
      default_protected:
        description:
          - Also protect the built-in names (C(systemd), C(init), C(sshd), C(nvidia-persistenced), C(nv-hostengine),
            C(Xorg), ...).
        type: bool
        default: true
      term_grace:
        description: Seconds between SIGTERM and SIGKILL.
        type: float
        default: 5
      timeout:
        description: Seconds the freeing of the GPUs may take (after the unit's stop), memory wait included.
        type: float
        default: 30
      memory_threshold_mib:
        description: A GPU counts as free when its used memory is below this (MiB).
        type: int
        default: 1024
      gpus:
        description:
          - The GPUs to free, as indices or as GPU UUIDs (not both; the format of C(sglang_gpus)). Default all.
          - With a subset, only a holder whose GPUs all lie inside it is ended, and only these GPUs' memory is awaited. A
            holder of other GPUs only, or of no GPU in particular (only C(/dev/nvidiactl), C(/dev/nvidia-uvm)), is spared.
            A holder of GPUs inside and outside the subset, or a holder of the subset's GPUs that runs in another system
            service than the unit being stopped (its cgroup C(system.slice/NAME.service)), is never signalled; the module
            fails before any signal, naming its PID, its GPUs and its service, also in check mode.
          - A holder's GPUs are those C(nvidia-smi) lists for it plus the C(/dev/nvidiaN) nodes it has open (N taken as the
            GPU's index).
          - An index or UUID the host does not have fails the module before any change.
        type: list
        elements: str
      devices:
        description: Shell glob of the GPU device nodes to look at.
        type: str
        default: /dev/nvidia*
      fuser:
        description: Name or path of C(fuser) (psmisc). When missing, C(/proc/*/fd) is scanned instead.
        type: str
        default: fuser
      nvidia_smi:
        description:
          - Name or path of C(nvidia-smi) on the target.
          - A bare name is looked up on E(PATH) and the usual system directories.
        type: str
        default: nvidia-smi
      stop_timeout:
        description:
          - Seconds the unit's stop (C(systemctl stop)) may take; when it does not finish in time,
            C(systemctl kill --signal=SIGKILL) ends what the unit still runs.
        type: float
        default: 60
      kill_unit:
        description:
          - End what the unit runs with C(systemctl kill --signal=SIGKILL) first, then stop it (bounded by the stop timeout).
            Meant for a unit whose server already failed, with nothing to drain; SGLang's own clean-up after a crash
            ignores SIGTERM for up to a minute.
        type: bool
        default: false
        version_added: 0.2.0
      hard_reset:
        description:
          - When memory is still held at the end, run C(nvidia-smi --gpu-reset -i N) on those GPUs.
          - Never on shared machines (it disturbs every user of the GPU and needs all its processes gone); off by default.
        type: bool
        default: false
'''
