"""Run await_server_ready + smoke_generate (through the `ansible` CLI) against the lab's fake SGLang, locally.

For each scenario: start tests/lab/fake_sglang on a loopback port (our own child, not reaped until the
module has returned, so its exit status stays readable in /proc), run the modules, print what they said
and how long the wait took after the event, then kill our child.  Needs ANSIBLE_COLLECTIONS_PATH to hold
llmserve.sglang (e.g. /tmp/ac).  Traffic: loopback only.

  ANSIBLE_COLLECTIONS_PATH=/tmp/ac python3 tests/bench/fake_scenarios.py [scenario ...]
"""
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ANSIBLE = os.path.join(os.path.dirname(sys.executable), 'ansible')

RULES = '''rules:
  - {name: crash, match: {env: {LAB_SCENARIO: crash}}, behaviour: crash, params: {when: first_forward,
     frames: "  File \\"{site}/flashinfer/fused_moe/core.py\\", line 6518, in trtllm_fp4_block_scale_moe\\n\\
       return get_trtllm_moe_sm100_module().trtllm_fp4_block_scale_moe(\\n",
     error: "RuntimeError: Error in function 'TrtllmGenBatchedGemmRunner' at \\
       {site}/flashinfer/data/csrc/trtllm_batched_gemm_runner.cu:218: The trtllm-gen batched GEMM cubin manifest \\
       contains no kernels runnable on sm120; this backend currently ships cubins for sm100, sm103 and sm107."}}
  - {name: killed, match: {env: {LAB_SCENARIO: killed}}, behaviour: killed, params: {at: start}}
  - {name: killed_load, match: {env: {LAB_SCENARIO: killed_load}}, behaviour: killed, params: {at: load}}
  - {name: hang, match: {env: {LAB_SCENARIO: hang}}, behaviour: hang, params: {at: load}}
  - {name: garbage, match: {env: {LAB_SCENARIO: garbage}}, behaviour: garbage, params: {garbage_text: "!"}}
  - {name: plus, match: {env: {LAB_SCENARIO: plus}}, behaviour: garbage, params: {garbage_text: "+"}}
  - {name: nan, match: {env: {LAB_SCENARIO: nan}}, behaviour: nan, params: {nan_crash: true}}
  - {name: nan_serving, match: {env: {LAB_SCENARIO: nan_serving}}, behaviour: nan, params: {nan_crash: false}}
  - {name: warmup_fail, match: {env: {LAB_SCENARIO: warmup_fail}}, behaviour: ready, params: {fail_warmup: true}}
  - {name: ready, match: {}, behaviour: ready}
'''
SCENARIOS = ['ready', 'crash', 'killed', 'killed_load', 'hang', 'garbage', 'plus', 'nan', 'nan_serving', 'warmup_fail']


def ansible(module, args):
    argstr = json.dumps(args)
    t0 = time.time()
    out = subprocess.run([ANSIBLE, 'localhost', '-m', 'llmserve.sglang.' + module, '-a', argstr, '-o'],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                         check=False, env=dict(os.environ, ANSIBLE_CALLBACK_RESULT_FORMAT='json',
                                               ANSIBLE_LOCALHOST_WARNING='false',
                                               ANSIBLE_INVENTORY_UNPARSED_WARNING='false'))
    text = out.stdout
    js = text[text.index('{'):] if '{' in text else '{}'
    try:
        return json.JSONDecoder().raw_decode(js)[0], time.time() - t0
    except ValueError:
        return {'raw': text[-2000:]}, time.time() - t0


def main():
    tmp = tempfile.mkdtemp(prefix='fakesg-')
    os.makedirs(os.path.join(tmp, 'root/etc/fakegpu'))
    with open(os.path.join(tmp, 'root/etc/fakegpu/config.json'), 'w') as f:
        f.write(subprocess.check_output([sys.executable, os.path.join(ROOT, 'tests/lab/fakes/fakegpu.py'), 'config',
                                         '--model', 'sm120', '--count', '1'], universal_newlines=True))
    rules = os.path.join(tmp, 'behaviour.yml')
    with open(rules, 'w') as f:
        f.write(RULES)
    model = os.path.join(tmp, 'model')
    os.makedirs(model)
    port = 31337
    for name in sys.argv[1:] or SCENARIOS:
        port += 1
        log = os.path.join(tmp, name + '.log')
        pypath = os.path.join(ROOT, 'tests/lab/fake_sglang') + ':' + os.path.join(ROOT, 'tests/lab/fakes')
        env = dict(os.environ, PYTHONPATH=pypath,
                   FAKEGPU_ROOT=os.path.join(tmp, 'root'), FAKE_SGLANG_BEHAVIOUR=rules, LAB_SCENARIO=name,
                   FAKE_SGLANG_LOAD_SECONDS='2', SGLANG_HEALTH_CHECK_TIMEOUT='3')
        with open(log, 'w') as lf:
            child = subprocess.Popen([sys.executable, '-m', 'sglang.launch_server', '--model-path', model,
                                      '--host', '127.0.0.1', '--port', str(port), '--served-model-name', 'fake'],
                                     stdout=lf, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            wait_args = {'log_path': log, 'pid': child.pid, 'port': port, 'timeout': 60, 'hang_timeout': 6}
            res, secs = ansible('await_server_ready', wait_args)
            print('%-12s await: status=%s reason=%s signal=%s milestone=%s said_anything=%s call=%.1fs evidence=%s' % (
                name, res.get('status'), res.get('reason'), res.get('signal'), res.get('milestone'),
                res.get('log_said_anything'), secs, (res.get('evidence') or [''])[:1]))
            if 'raw' in res or res.get('failed'):
                print(res)
            if res.get('status') == 'ready':
                bench = {'concurrency': [1, 8], 'num_prompts': 16, 'input_len': 64, 'output_len': 32}
                sm, secs = ansible('smoke_generate', {'port': port, 'served_model_name': 'fake', 'benchmark': bench})
                b = (sm.get('benchmark') or {}).get('concurrency', {})
                print('%-12s smoke: ok=%s reason=%s evidence=%s bench=%s' % (
                    name, sm.get('ok'), sm.get('reason'), sm.get('evidence', [])[:2],
                    dict((k, (v.get('completed'), v.get('output_throughput'), v.get('mean_ttft_ms'), v.get('mean_itl_ms')))
                         for k, v in b.items())))
                if 'raw' in sm or sm.get('failed'):
                    print(sm)
        finally:
            if child.poll() is None:
                os.killpg(child.pid, 9)   # our own child's session (start_new_session above)
            child.wait()


if __name__ == '__main__':
    main()
