"""A route's prompt template: fields are paths walked through the parsed JSON body only
(never attributes of Python objects), a field the body lacks is a marker, values and the
whole prompt are capped, and a template that cannot be read is refused when it is read."""

from __future__ import annotations

import json

import pytest

from hermes.adapters.template import VALUE_CHARS, Template, TemplateError, missing

BODY = {
    "action": "completed",
    "repository": {"full_name": "ann/hermes", "private": False, "stars": 3},
    "commits": [{"id": "abc123", "message": "fix the {bug}"}],
    "workflow_run": {"conclusion": None, "labels": ["ci", "nightly"]},
}


def render(text: str, body: object = BODY, cap: int = 10_000) -> str:
    return Template.read(text).render(body, cap)


def test_fields_read_keys_and_list_indexes_of_the_body():
    assert render("{repository.full_name}: {action}") == "ann/hermes: completed"
    assert render("first {commits.0.id}") == "first abc123"
    assert render("{ action }!") == "completed!"  # spaces inside the braces are not the path


def test_values_that_are_not_text_render_as_json_and_braces_in_values_stay_as_they_are():
    assert render("{repository.private} {repository.stars} {workflow_run.conclusion}") == (
        "false 3 null"
    )
    assert render("{workflow_run.labels}") == '["ci","nightly"]'
    assert json.loads(render("{repository}")) == BODY["repository"]
    assert render("{commits.0.message}") == "fix the {bug}"  # a value is never a template


def test_a_field_the_body_lacks_is_a_marker_never_an_error():
    assert render("{repository.owner.login}") == missing("repository.owner.login")
    assert render("{commits.5.id} {commits.x} {action.more}") == " ".join(
        [missing("commits.5.id"), missing("commits.x"), missing("action.more")]
    )
    assert render("{action}", body=["not", "an", "object"]) == missing("action")
    assert render("{0}", body=["a list"]) == "a list"


def test_python_format_reaches_nothing_here():
    """What format() would walk (attributes, dunders) is only a key looked up in JSON."""
    assert render("{__class__.__mro__}") == missing("__class__.__mro__")
    assert render("{action.__class__}") == missing("action.__class__")
    with pytest.raises(TemplateError):
        Template.read("{action!r}")
    with pytest.raises(TemplateError):
        Template.read("{action[0]}")


def test_doubled_braces_are_braces_and_a_lone_one_is_refused():
    assert render("{{literal}} {action}") == "{literal} completed"
    assert render("{{{action}}}") == "{completed}"
    for bad in ("{action", "action}", "{}", "{a..b}", "{{action}"):
        with pytest.raises(TemplateError):
            Template.read(bad)


def test_each_value_and_the_whole_prompt_are_capped():
    long = {"text": "x" * (VALUE_CHARS * 2)}
    one = render("{text}", body=long)
    assert len(one) == VALUE_CHARS and one.endswith(f"cut at {VALUE_CHARS} characters]")
    whole = render("{text}{text}{text}", body=long, cap=5000)
    assert len(whole) == 5000 and whole.endswith("cut at 5000 characters]")


def test_the_fields_a_template_reads_are_named():
    assert Template.read("{a.b} and {c} {{d}}").fields == ["a.b", "c"]
