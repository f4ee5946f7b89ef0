# -*- coding: utf-8 -*-
# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The AWX survey and job template of the deploy agree with the roles' argument specs (no lab needed)."""

from __future__ import absolute_import, division, print_function

import glob
import json
import os

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(os.path.dirname(HERE))
AWX = os.path.join(CHECKOUT, "extensions", "awx")
SURVEY_TYPES = ("text", "textarea", "password", "integer", "float", "multiplechoice", "multiselect")
# survey type -> argument spec types it may stand for
TYPE_MAP = {"text": ("str", "path"), "textarea": ("str",), "password": ("str",), "integer": ("int",),
            "float": ("float",), "multiplechoice": ("str",), "multiselect": ("list",)}
WANTED = ("sglang_model_path", "sglang_served_model_name", "sglang_service_name", "sglang_tp_size",
          "sglang_quantization", "sglang_port", "sglang_api_key", "sglang_selection", "sglang_ready_timeout",
          "sglang_tool_call_parser", "sglang_reasoning_parser")


def load_json(name):
    with open(os.path.join(AWX, name), encoding="utf-8") as handle:
        return json.load(handle)


def role_options():
    """variable -> (role, option spec) over every role's meta/argument_specs.yml (entry point main)."""
    found = {}
    for path in sorted(glob.glob(os.path.join(CHECKOUT, "roles", "*", "meta", "argument_specs.yml"))):
        role = path.split(os.sep)[-3]
        with open(path, encoding="utf-8") as handle:
            specs = yaml.safe_load(handle)["argument_specs"]
        for entry in specs.values():
            for name, opt in (entry.get("options") or {}).items():
                found.setdefault(name, (role, opt))
    return found


SURVEY = load_json("deploy_survey.json")
OPTIONS = role_options()


def test_survey_shape():
    assert set(SURVEY) >= {"name", "description", "spec"}
    assert SURVEY["name"] and SURVEY["description"]
    names = [q["variable"] for q in SURVEY["spec"]]
    assert len(names) == len(set(names)), "a variable is asked twice"
    assert set(WANTED) <= set(names)
    for question in SURVEY["spec"]:
        assert {"question_name", "variable", "type", "required", "default"} <= set(question), question
        assert question["type"] in SURVEY_TYPES, question
        assert isinstance(question["required"], bool)


@pytest.mark.parametrize("question", SURVEY["spec"], ids=lambda q: q["variable"])
def test_question_matches_argument_spec(question):
    var = question["variable"]
    assert var in OPTIONS, "%s is not declared in any roles/*/meta/argument_specs.yml" % var
    role, opt = OPTIONS[var]
    spec_type = opt.get("type", "str")
    assert spec_type in TYPE_MAP[question["type"]], "%s: survey %s vs %s spec type %s" % (
        var, question["type"], role, spec_type)
    # flat variables only: no dict/list/bool (a survey cannot carry them faithfully)
    assert spec_type in ("str", "path", "int", "float")
    # secrets are password fields, password fields are secrets
    assert (question["type"] == "password") == bool(opt.get("no_log")), var
    # choices equal
    if question["type"] in ("multiplechoice", "multiselect"):
        assert list(question["choices"]) == list(opt["choices"]), var
    else:
        assert "choices" not in opt, "%s has choices in %s: use multiplechoice" % (var, role)
    # required in the spec -> required in the survey; defaults equal the spec defaults
    if opt.get("required"):
        assert question["required"], var
    else:
        assert question["default"] == opt.get("default"), "%s: survey default %r, spec default %r" % (
            var, question["default"], opt.get("default"))
    if question["type"] in ("integer", "float"):
        assert isinstance(question["default"], (int, float))
        assert question["min"] <= question["default"] <= question["max"], var
    if var == "sglang_port":
        assert (question["min"], question["max"]) == (1, 65535)


def test_api_key_is_a_password_with_no_default():
    question = [q for q in SURVEY["spec"] if q["variable"] == "sglang_api_key"][0]
    assert question["type"] == "password" and question["default"] == ""


def test_job_template():
    template = load_json("deploy_job_template.json")
    assert template["playbook"] == "playbooks/deploy.yml"
    assert os.path.isfile(os.path.join(CHECKOUT, template["playbook"]))
    assert template["survey_enabled"] is True
    assert template["job_type"] == "run"
    # no secret travels in the template itself
    assert "sglang_api_key" not in json.dumps(template.get("extra_vars", ""))
