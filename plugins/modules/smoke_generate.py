#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: smoke_generate
short_description: Check that an SGLang server answers with real, correct text, and optionally benchmark it
version_added: 0.1.0
description:
  - Sends fixed prompts with known answers at temperature 0 and judges each answer.
  - Catches what a 200 from the health endpoint does not, as broken FP4/MoE kernels have served it,
    repeated C(!!!!) or C(++++), all zeros, U+FFFD, NaN, as well as empty or wrong answers.
  - Optionally runs a streaming load test on C(/generate) and reports C(sglang.bench_serving)'s figures.
  - Sends requests only; changes nothing on the host.
author:
  - llmserve maintainers (@llmserve)
extends_documentation_fragment:
  - llmserve.sglang.attributes
  - llmserve.sglang.attributes.platform
  - llmserve.sglang.redact
  - llmserve.sglang.endpoint
  - llmserve.sglang.endpoint.tls
options:
  served_model_name:
    description: The C(model) field of OpenAI-style requests.
    type: str
    default: default
  timeout:
    description: Seconds each smoke request may take.
    type: float
    default: 120
  judge:
    description:
      - Judge the answers (garbage, NaN, expected answer).
      - V(false) only checks that each request is answered with HTTP 200 and a JSON body, whatever the text;
        for a server started with dummy weights (the screen), whose text is random.
    type: bool
    default: true
  watch:
    description:
      - Watch the server's systemd unit while the smoke requests run, as M(llmserve.sglang.await_server_ready)
        does (its main process, its ranks, its journal). When the server dies or logs a fatal error before its
        answers come, the checks stop there, RV(reason) is V(server_lost) and RV(server) says how it ended. A
        request still in flight is not waited for (SGLang 0.5.23 can keep a connection open for a minute after
        its scheduler failed).
      - The load test of O(benchmark) is watched the same way. When the server dies or logs a fatal error under it,
        the load test stops there, RV(benchmark.interrupted) says so and RV(server) says how the server ended.
      - Not used in check mode.
    type: dict
    suboptions:
      service_name:
        description: The unit (C(.service) is added unless it has a suffix).
        type: str
        required: true
      cursor:
        description: Where the journal was read up to (RV(llmserve.sglang.await_server_ready#module:cursor)).
        type: str
  prompts:
    description:
      - The prompts and their expected answers, replacing the built-in ones.
      - The built-ins are C(The capital city of France is) (expects C(Paris)), C(Question What is 17 + 25? Answer)
        (expects C(42)) on C(/generate), and the chat turn C(Say hello in one word.) (expects a greeting) on C(/v1/chat/completions).
    type: list
    elements: dict
    suboptions:
      name:
        description: A name for the check in RV(checks).
        type: str
      endpoint:
        description: C(/generate), C(/v1/chat/completions) or C(/v1/completions).
        type: str
      prompt:
        description: The prompt text (for C(/generate) and C(/v1/completions), or a single user turn for chat).
        type: str
      messages:
        description: Chat messages for C(/v1/chat/completions).
        type: list
        elements: dict
      max_tokens:
        description: Tokens to generate.
        type: int
        default: 32
      expect_any:
        description:
          - The answer passes when it contains one of these (case-insensitive, not inside a longer word or number).
          - An entry starting with C(re:) is a regular expression.
          - Empty means any real text passes.
        type: list
        elements: str
        default: []
      logprobs:
        description: Ask for log probabilities too (a NaN among them fails the check with C(nan)).
        type: bool
        default: false
      extra:
        description: Extra top-level fields merged into the request body.
        type: dict
        default: {}
  benchmark:
    description:
      - Run a streaming load test after the smoke checks passed (skipped when they failed).
      - Random token IDs as input (exact input length) and C(ignore_eos) (exact output length), as bench_serving's
        C(--dataset-name random-ids). The IDs are drawn from the model's own vocabulary, C([0, vocab size\)), because
        SGLang does not check them and an ID past the model's embedding table ends the server.
      - The vocabulary size is O(benchmark.vocab_size) when given, else read from the model folder on the host,
        O(benchmark.model_path) first, then the folder the server names in C(GET /model_info). It is the smaller of
        C(config.json)'s C(vocab_size) (or its language model's, C(text_config.vocab_size) and the like, for a
        multimodal model) and the number of tokens in C(tokenizer.json) without its added special tokens (what
        bench_serving uses).
      - When no size is found, the load test sends random words instead (as O(benchmark.input_mode=text)), says so in
        RV(benchmark.input) and warns; it never sends IDs that may be out of the vocabulary.
      - After a level with failed requests the server is asked C(/health_generate) once (RV(benchmark.health)); when it
        does not answer, the levels left are not run (RV(benchmark.not_run)).
    type: dict
    suboptions:
      concurrency:
        description: Concurrency levels, one run each.
        type: list
        elements: int
        default: [1, 64]
      num_prompts:
        description: Requests per level; default 4 x the level (at least 8).
        type: int
      input_len:
        description: Input tokens per request.
        type: int
        default: 1024
      output_len:
        description: Output tokens per request.
        type: int
        default: 256
      warmup:
        description: Requests sent one by one before each level, not counted.
        type: int
        default: 1
      timeout:
        description: Seconds each level may take; requests not started by then count as failed.
        type: float
        default: 600
      input_mode:
        description:
          - V(ids) sends random token IDs of the model's vocabulary, V(text) random words (about one token each).
          - V(ids) falls back to V(text) when the vocabulary size is not found (see O(benchmark)).
        type: str
        choices: [ids, text]
        default: ids
      vocab_size:
        description:
          - The model's vocabulary size; token IDs are drawn from C([0, vocab_size\)).
          - Default the size read from the model folder (see O(benchmark)). A size larger than the model's
            embedding table ends the server at the first ID past it.
        type: int
      model_path:
        description:
          - The model folder on the host (what the server was started with), read for the vocabulary size.
          - Default the folder the server names in C(GET /model_info). A path that is not absolute (a hub repo id)
            is not read.
        type: path
      seed:
        description: Seed of the random prompts.
        type: int
        default: 0
      gpu_sampling:
        description:
          - Sample GPU power draw and utilisation with C(nvidia-smi --query-gpu) while each level runs, and add
            C(power_w_mean), C(power_w_max), C(power_pct_of_limit), C(gpu_util_pct_mean) and C(gpu_samples) to its figures.
          - Skipped, with C(gpu_sample_error) saying why, when O(benchmark.nvidia_smi) is not found on the host.
        type: bool
        default: true
      sample_interval:
        description: Seconds between two GPU samples.
        type: float
        default: 0.5
      nvidia_smi:
        description: The nvidia-smi command (a name on E(PATH) or a path).
        type: str
        default: nvidia-smi
attributes:
  check_mode:
    support: full
    details: The requests are sent in check mode too (they change nothing), except the benchmark, which is skipped.
  diff_mode:
    support: none
  platform:
    platforms: posix
seealso:
  - module: llmserve.sglang.await_server_ready
'''

EXAMPLES = r'''
- name: Smoke test the trial server
  llmserve.sglang.smoke_generate:
    port: 30000
    api_key: "{{ sglang_api_key | default(omit) }}"
    served_model_name: "{{ sglang_served_model_name }}"
  register: smoke

- name: Smoke test with own prompts and a load test at 1 and 64 concurrent streams
  llmserve.sglang.smoke_generate:
    port: 30000
    prompts:
      - name: capital
        endpoint: /generate
        prompt: The capital city of Japan is
        max_tokens: 8
        expect_any: [Tokyo]
    benchmark:
      concurrency: [1, 64]
      num_prompts: 128
      input_len: 1024
      output_len: 256
  register: smoke
'''

RETURN = r'''
ok:
  description: Whether every smoke check passed.
  returned: always
  type: bool
reason:
  description:
    - The most telling failure, one of C(nan), C(garbage), C(replacement_chars), C(empty), C(http_error), C(timeout),
      C(wrong_answer), or C(server_lost) (with O(watch), when the server failed before it answered); null when ok.
  returned: always
  type: str
  sample: garbage
evidence:
  description: One line per failed check saying what was wrong.
  returned: always
  type: list
  elements: str
checks:
  description: One entry per prompt.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The check's name.
      type: str
    endpoint:
      description: The endpoint used.
      type: str
    ok:
      description: Whether it passed.
      type: bool
    reason:
      description: Why it failed.
      type: str
    detail:
      description: What was wrong, e.g. C(run of 32 x '!') or C(HTTP 500 ...).
      type: str
    text:
      description: The answer (first 500 characters).
      type: str
    status:
      description: The HTTP status.
      type: int
    seconds:
      description: Time the request took.
      type: float
server:
  description:
    - With O(watch), when the server died or logged a fatal error during the checks (or just after a check that got
      no answer) or during the load test (or just after a level with failed requests),
      M(llmserve.sglang.await_server_ready)'s result for it (C(status), C(reason), C(evidence),
      C(log_tail), C(signal), C(exit_code), C(child_exit), C(unit), ...).
  returned: when the watch saw the server fail
  type: dict
  sample: {"status": "crashed", "reason": "crashed", "evidence": ["RuntimeError: CUDA error: an illegal memory access was encountered"]}
seconds:
  description: Time the checks (and the benchmark) took.
  returned: always
  type: float
benchmark:
  description:
    - The load test; C(concurrency) maps each level (as a string) to bench_serving's figures under snake_case names
      (C(completed), C(duration_s), C(request_throughput), C(input_throughput), C(output_throughput), C(total_throughput),
      C(mean_ttft_ms), C(median_ttft_ms), C(p99_ttft_ms), C(mean_itl_ms), C(median_itl_ms), C(p99_itl_ms), C(mean_e2e_latency_ms), ...);
      C(labels) maps those names to the labels bench_serving prints.
    - With O(benchmark.gpu_sampling), each level also has C(power_w_mean) (mean draw per GPU, W), C(power_w_max),
      C(power_pct_of_limit) (sum of draws over sum of power limits, %), C(gpu_util_pct_mean), C(gpu_samples)
      (samples taken while the level's requests ran) and C(gpu_sample_errors); all GPUs of the host are sampled.
    - C(input) says how the prompts were made; C(health) and C(not_run) what followed a level with failed requests.
    - Each level also has C(failed), C(rejected) (failed requests that the server refused as bad requests, an HTTP
      4xx or a streamed C(invalid_request_error), which the load test's settings cause, not the server), C(errors)
      (up to 5 distinct ones) and C(first_error) (the error of the failed request sent first).
  returned: when O(benchmark) is set and the smoke checks passed
  type: dict
  contains:
    input:
      description:
        - C(mode) (V(ids) or V(text)), C(vocab_size) (the IDs are below it; null for text), C(source) (the option or
          the files that gave it) and C(note) (why it fell back to text; null otherwise).
      type: dict
      sample: {"mode": "ids", "vocab_size": 659, "note": null,
               "source": "/models/m/config.json vocab_size (662); /models/m/tokenizer.json model.vocab, 3 added tokens left out (659)"}
    health:
      description:
        - After the first level with failed requests, C(level), C(answers) (whether C(/health_generate) answered
          HTTP 200) and C(detail); null when every request completed.
      type: dict
      sample: {"level": "64", "answers": false, "detail": "no HTTP answer: refused"}
    not_run:
      description: The levels not run because the server stopped answering.
      type: list
      elements: str
    interrupted:
      description:
        - With O(watch), when the server failed during the load test, what ended it (RV(server) has the whole
          verdict); the levels before are kept, the one running is not.
      type: str
      sample: "the server failed (crashed) during the load test: torch.AcceleratorError: CUDA error: an illegal memory access"
  sample: {"concurrency": {"1": {"completed": 8, "output_throughput": 171.9, "mean_ttft_ms": 80.1,
                                 "power_w_mean": 330.2, "power_pct_of_limit": 55.0, "gpu_util_pct_mean": 100.0}},
           "labels": {"output_throughput": "Output token throughput (tok/s)"}}
'''

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmserve.sglang.plugins.module_utils import _readiness
from ansible_collections.llmserve.sglang.plugins.module_utils import _specs
from ansible_collections.llmserve.sglang.plugins.module_utils import _vocab
from ansible_collections.llmserve.sglang.plugins.module_utils import redact
from ansible_collections.llmserve.sglang.plugins.module_utils import smoke
from ansible_collections.llmserve.sglang.plugins.module_utils import sglang_http as sghttp
from ansible_collections.llmserve.sglang.plugins.module_utils import loadgen
from ansible_collections.llmserve.sglang.plugins.module_utils import gpu_sampler


def run_checks(base, prompts, api_key, model, timeout, validate_certs, post=sghttp.post_json, judge=True, into=None):
    checks = [] if into is None else into
    for p in prompts:
        path, body = smoke.build_request(p, model=model)
        r = post(base + path, body, api_key=api_key, timeout=timeout, validate_certs=validate_certs)
        checks.append(smoke.check_response(p, r.status, r.body, seconds=round(r.seconds, 3), error=r.error, judge=judge))
    return checks


def argument_spec():
    """The module's options: the endpoint's, the redaction's, the checks' and the benchmark's."""
    prompt_spec = dict(
        name=dict(type='str'),
        endpoint=dict(type='str'),
        prompt=dict(type='str'),
        messages=dict(type='list', elements='dict'),
        max_tokens=dict(type='int', default=32, no_log=False),
        expect_any=dict(type='list', elements='str', default=[]),
        logprobs=dict(type='bool', default=False),
        extra=dict(type='dict', default={}),
    )
    bench_spec = dict(
        concurrency=dict(type='list', elements='int', default=[1, 64]),
        num_prompts=dict(type='int'),
        input_len=dict(type='int', default=1024),
        output_len=dict(type='int', default=256),
        warmup=dict(type='int', default=1),
        timeout=dict(type='float', default=600),
        input_mode=dict(type='str', default='ids', choices=['ids', 'text']),
        vocab_size=dict(type='int'),
        model_path=dict(type='path'),
        seed=dict(type='int', default=0),
        gpu_sampling=dict(type='bool', default=True),
        sample_interval=dict(type='float', default=0.5),
        nvidia_smi=dict(type='str', default='nvidia-smi'),
    )
    return dict(
        _specs.endpoint_argument_spec(tls=True),
        redact_values=redact.argument_spec()['redact_values'],
        served_model_name=dict(type='str', default='default'),
        timeout=dict(type='float', default=120),
        judge=dict(type='bool', default=True),
        prompts=dict(type='list', elements='dict', options=prompt_spec),
        benchmark=dict(type='dict', options=bench_spec),
        watch=dict(type='dict', options=dict(service_name=dict(type='str', required=True), cursor=dict(type='str'))),
    )


def benchmark_input(module, p, bench, base):
    """How the prompts are made (_vocab.resolve): token ids of the model's vocabulary, or words when its size is not
    found (then a warning says so)."""
    if bench['input_mode'] == 'text':
        return {'mode': 'text', 'vocab_size': None, 'source': None, 'note': None}
    got = _vocab.resolve(bench['vocab_size'], [
        bench['model_path'],
        lambda: _vocab.server_model_path(base, p['api_key'], timeout=min(p['timeout'], 30),
                                         validate_certs=p['validate_certs'])])
    if got['note']:
        module.warn('benchmark: %s' % got['note'])
    return got


def server_health(p, base, level):
    """After a level with failed requests: does the server still answer /health_generate?"""
    r = sghttp.get(base + '/health_generate', api_key=p['api_key'], timeout=p['timeout'],
                   validate_certs=p['validate_certs'])
    detail = 'HTTP %s' % r.status if r.status is not None else 'no HTTP answer: %s' % r.error
    return {'level': str(level), 'answers': r.status == 200, 'detail': detail}


def _sampler(module, bench):
    """(the GPU sampler or None, why there is none or None)."""
    if not bench['gpu_sampling']:
        return None, None
    smi = module.get_bin_path(bench['nvidia_smi'])
    if not smi:
        return None, '%s not found on the host' % bench['nvidia_smi']
    return gpu_sampler.Sampler(lambda argv: module.run_command(argv, handle_exceptions=False),
                               gpu_sampler.sample_argv(smi), interval=bench['sample_interval']), None


def run_benchmark(module, p, bench, base, out=None):
    """The load test at each concurrency level of O(benchmark), with the GPUs sampled when asked and possible; the
    levels after one that lost the server are not run. ``out``: the dict to fill as the levels end (its levels so
    far are what a watch that saw the server fail keeps)."""
    out = {} if out is None else out
    out.update({'concurrency': {}, 'labels': dict(loadgen.LABELS), 'settings': {}, 'health': None, 'not_run': [],
                'input': benchmark_input(module, p, bench, base)})
    sampler, sample_error = _sampler(module, bench)
    if sampler is not None:
        out['labels'].update(gpu_sampler.LABELS)
    for level in bench['concurrency']:
        if out['health'] and not out['health']['answers']:
            out['not_run'].append(str(level))
            continue
        n = bench['num_prompts'] or max(8, 4 * level)
        fig, _results = loadgen.run_level(
            p['host'], p['port'], level, n, input_len=bench['input_len'], output_len=bench['output_len'],
            api_key=p['api_key'], warmup=bench['warmup'], timeout=bench['timeout'], seed=bench['seed'],
            mode=out['input']['mode'], vocab_size=out['input']['vocab_size'], scheme=p['scheme'],
            validate_certs=p['validate_certs'], request_timeout=max(p['timeout'], 60), monitor=sampler)
        if sampler is not None:
            fig.update(sampler.summary())
        elif sample_error:
            fig['gpu_sample_error'] = sample_error
        out['concurrency'][str(level)] = fig
        if fig.get('failed') and out['health'] is None:
            out['health'] = server_health(p, base, level)
    out['settings'] = dict((k, bench[k]) for k in argument_spec()['benchmark']['options'])
    return out


def watched_benchmark(module, p, bench, base):
    """The load test, watched as the checks are when O(watch) is set: ``(figures, verdict)``, the verdict (the
    server's failure) or None. When the watch saw the server fail, the load test's thread may still run: the
    figures are its levels so far, copied."""
    so_far = {}

    def load():
        return run_benchmark(module, p, bench, base, so_far)
    if not p['watch']:
        return load(), None
    figures, lost = _readiness.watch_work(module, watch_options(p, len(bench['concurrency']), bench['timeout']),
                                          load, smoke.benchmark_may_have_lost)
    if figures is None:
        figures = dict(so_far, concurrency=dict(so_far.get('concurrency') or {}))
    return figures, lost


def check_benchmark(module, bench):
    """Fail on benchmark settings out of range."""
    levels = bench['concurrency'] or []
    if not levels or any(c < 1 for c in levels):
        module.fail_json(msg='benchmark.concurrency must be a non-empty list of integers >= 1, got %s' % levels)
    for key in ('input_len', 'output_len'):
        if bench[key] < 1:
            module.fail_json(msg='benchmark.%s must be >= 1, got %s' % (key, bench[key]))
    if bench['vocab_size'] is not None and bench['vocab_size'] < 1:
        module.fail_json(msg='benchmark.vocab_size must be >= 1, got %s' % bench['vocab_size'])


def watch_options(p, steps, step_timeout=None):
    """await_server_ready's options for the watch of the checks or the load test: the unit, the endpoint, a bound
    over every step (a prompt, a concurrency level)."""
    opts = dict((k, p[k]) for k in _specs.endpoint_argument_spec(tls=True))
    opts.update(service_name=p['watch']['service_name'], cursor=p['watch']['cursor'],
                timeout=(step_timeout or p['timeout']) * steps + 30)
    return opts


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    p = module.params
    redact.guard(module)
    try:
        prompts = [smoke.normalize_prompt(x, i) for i, x in enumerate(p['prompts'] or smoke.DEFAULT_PROMPTS)]
    except ValueError as e:
        module.fail_json(msg='prompts: %s' % e)
    bench = p['benchmark']
    if bench is not None:
        check_benchmark(module, bench)

    base = sghttp.base_url(p['host'], p['port'], p['scheme'])
    t0 = time.time()
    checks, server = [], None

    def work():
        return run_checks(base, prompts, p['api_key'], p['served_model_name'], p['timeout'], p['validate_certs'],
                          judge=p['judge'], into=checks)
    if p['watch'] and not module.check_mode:
        server = _readiness.watch_work(module, watch_options(p, len(prompts)), work, smoke.may_have_lost)[1]
    else:
        work()
    result = smoke.result(list(checks), server)

    if bench is not None and result['ok'] and not module.check_mode:
        result = smoke.with_benchmark(result, *watched_benchmark(module, p, bench, base))
    result['seconds'] = round(time.time() - t0, 3)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
