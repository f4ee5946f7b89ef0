# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which SGLang kernel backends run on which GPU architecture: data with its sources.

Arch families are those of ``nvidia_smi.arch_family``: sm90 (Hopper: H100, H200), sm100
(datacenter Blackwell: B200, GB200), sm120 (workstation Blackwell: RTX PRO 6000, RTX 5090),
sm80/sm86/sm89 before Hopper.

Verdicts of ``classify``:
  ``ok``           nothing known against this value on this arch (or no rule at all)
  ``unsupported``  the kernels do not exist for this arch: it crashes (error unless ``force``)
  ``known_bad``    it starts but has served wrong output (garbage, NaN) on this arch (warning;
                   the planner skips it unless forced; a trial must smoke-test it)
  ``warn``         allowed, with a caution (e.g. SGLang's ``auto`` on SM120)
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

FACTS = 'shared/reference/sglang/FACTS.md (section "Which backends run where")'
# SGLang's own argument checks at start-up (ServerArgs.resolve_once), file:line of the sglang 0.5.23 wheel
SGLANG_CHECKS = 'sglang 0.5.23 srt/arg_groups/%s'

# Each rule: flag (canonical long flag), value, and one of
#   only:     the arch families it runs on (anything else -> unsupported)
#   not_on:   arch families it does not run on (-> unsupported)
#   bad_on:   arch families where it served wrong output (-> known_bad)
#   warn_on:  arch families where it deserves a warning (-> warn)
# plus reason and sources.
RULES = (
    {
        'flag': '--moe-runner-backend', 'value': 'flashinfer_trtllm', 'only': ('sm100',),
        'reason': 'flashinfer_trtllm MoE (trtllm_fp4_block_scale_moe) ships kernels for SM100 only; '
                  'on other archs it crashes at load or at the first forward',
        'sources': [FACTS, 'FlashInfer module generators: trtllm-gen fused MoE is built for sm100 only'],
    },
    {
        'flag': '--speculative-moe-runner-backend', 'value': 'flashinfer_trtllm', 'only': ('sm100',),
        'reason': 'same kernels as --moe-runner-backend flashinfer_trtllm (SM100 only)',
        'sources': [FACTS],
    },
    {
        'flag': '--moe-runner-backend', 'value': 'flashinfer_cutedsl', 'bad_on': ('sm120',),
        'reason': 'flashinfer_cutedsl MoE has served garbage (repeated "!!!!") on SM120',
        'sources': [FACTS, 'sglang issues 24321, 21132, 18954', 'flashinfer issues 2577, 2723, 3398'],
    },
    {
        'flag': '--moe-runner-backend', 'value': 'hpc_ops', 'only': ('sm90',),
        'reason': 'hpc_ops kernels are SM90 (Hopper) only', 'sources': [FACTS],
    },
    {
        'flag': '--attention-backend', 'value': 'hpc_ops', 'only': ('sm90',),
        'reason': 'hpc_ops kernels are SM90 (Hopper) only', 'sources': [FACTS],
    },
    {
        'flag': '--fp8-gemm-backend', 'value': 'flashinfer_deepgemm', 'only': ('sm90',),
        'reason': 'flashinfer_deepgemm is SM90 (Hopper) only', 'sources': [FACTS],
    },
    {
        'flag': '--attention-backend', 'value': 'trtllm_mha', 'only': ('sm100',),
        'reason': 'trtllm_mha attention is SM100 only', 'sources': [FACTS],
    },
    {
        'flag': '--attention-backend', 'value': 'trtllm_mla', 'only': ('sm100', 'sm120'),
        'reason': 'trtllm_mla attention needs Blackwell (sm100/sm120)', 'sources': [FACTS],
    },
    {
        'flag': '--attention-backend', 'value': 'fa3', 'not_on': ('sm100', 'sm120'),
        'reason': 'fa3 (FlashAttention 3) is the Hopper kernel (SGLang default on SM90); it does not run on Blackwell',
        'sources': [FACTS, 'SGLang docs, attention backends: FA3 is the default for Hopper'],
    },
    {
        'flag': '--moe-runner-backend', 'value': 'megamoe', 'only': ('sm90', 'sm100'),
        'reason': 'SGLang refuses it at start-up on other GPUs: megamoe is an alias of --moe-a2a-backend megamoe, whose '
                  'DeepGEMM kernels are built for SM90 (block-FP8 experts) and SM100 (MXFP4 / NVFP4 experts)',
        'sources': [SGLANG_CHECKS % 'mega_moe_hook.py:43 (check_mega_moe_compat; the alias: mega_moe_hook.py:271)'],
    },
    {
        'flag': '--attention-backend', 'value': 'cutedsl_mla', 'only': ('sm100',),
        'reason': 'SGLang refuses it at start-up on other GPUs ("CuteDSL MLA backend is only supported on Blackwell '
                  'GPUs (SM100)")',
        'sources': [SGLANG_CHECKS % 'overrides.py:1245 (_cutedsl_prefill_backend_fill)'],
    },
    {
        'flag': '--attention-backend', 'value': 'tokenspeed_mla', 'only': ('sm100',),
        'reason': 'the deprecated alias of cutedsl_mla, which SGLang refuses at start-up on GPUs other than SM100',
        'sources': [SGLANG_CHECKS % 'serving_hook.py:304 (the alias), overrides.py:1245'],
    },
    {
        'flag': '--moe-runner-backend', 'value': 'auto', 'warn_on': ('sm120',),
        'reason': "SGLang's auto choice has picked SM100-only backends on SM120; name a backend "
                  '(flashinfer_cutlass works for NVFP4 MoE on SM120)',
        'sources': [FACTS, 'sglang PR 39807'],
    },
    {
        'flag': '--fp4-gemm-backend', 'value': 'auto', 'warn_on': ('sm120',),
        'reason': "SGLang's auto choice is not a safe default on SM120; name a backend "
                  '(flashinfer_cudnn or flashinfer_cutlass)',
        'sources': [FACTS, 'sglang PR 39807'],
    },
)

VERDICTS = ('ok', 'warn', 'known_bad', 'unsupported')


def canonical_flag(flag):
    """``moe_runner_backend`` / ``moe-runner-backend`` / ``--moe-runner-backend`` -> ``--moe-runner-backend``."""
    text = str(flag).strip()
    if text.startswith('--'):
        return text
    return '--' + text.lstrip('-').replace('_', '-')


def canonical_arch(arch):
    """Accepts ``sm120``, ``SM_120``, ``12.0`` (compute capability)."""
    if arch is None:
        return None
    text = str(arch).strip().lower().replace('_', '')
    if text.startswith('sm'):
        return text
    # a compute capability: reuse the one mapping
    from_cap = _arch_from_cap(text)
    return from_cap or text


def _arch_from_cap(text):
    parts = text.split('.')
    if not parts[0].isdigit():
        return None
    major = int(parts[0])
    minor = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    return 'sm%d0' % major if major >= 9 else 'sm%d%d' % (major, minor)


def rules_for(flag, value):
    flag = canonical_flag(flag)
    value = None if value is None else str(value)
    return [r for r in RULES if r['flag'] == flag and r['value'] == value]


def classify(flag, value, arch):
    """-> dict(verdict, reason, sources, flag, value, arch). Unknown arch -> ok (nothing to check against)."""
    arch_c = canonical_arch(arch)
    result = {'flag': canonical_flag(flag), 'value': value, 'arch': arch_c, 'verdict': 'ok', 'reason': '', 'sources': []}
    if arch_c is None:
        return result
    worst = 0
    for rule in rules_for(flag, value):
        verdict = 'ok'
        if 'only' in rule and arch_c not in rule['only']:
            verdict = 'unsupported'
        elif arch_c in rule.get('not_on', ()):
            verdict = 'unsupported'
        elif arch_c in rule.get('bad_on', ()):
            verdict = 'known_bad'
        elif arch_c in rule.get('warn_on', ()):
            verdict = 'warn'
        rank = VERDICTS.index(verdict)
        if rank > worst:
            worst = rank
            result.update(verdict=verdict, sources=list(rule['sources']),
                          reason='%s %s on %s: %s' % (result['flag'], value, arch_c, rule['reason']))
    return result


def check(flag, value, arch):
    """-> (ok, reason). ``ok`` is False only for ``unsupported``; ``known_bad``/``warn`` give ok with a reason."""
    result = classify(flag, value, arch)
    return result['verdict'] != 'unsupported', result['reason']


def check_many(pairs, arch):
    """pairs: iterable of (flag, value) -> list of classify() results that are not ``ok``."""
    out = []
    for flag, value in pairs:
        if value is None:
            continue
        result = classify(flag, value, arch)
        if result['verdict'] != 'ok':
            out.append(result)
    return out


def supported_archs(flag, value):
    """For docs/reports: the arch families a value is limited to, or None when unlimited."""
    for rule in rules_for(flag, value):
        if 'only' in rule:
            return list(rule['only'])
    return None
