"""The deployments' parameter schema (what the Prefect UI's form checks before Submit) carries every bound,
pattern, length and choice the flows' parameter models enforce, and each flow's parameters are its model's."""
from __future__ import annotations

import re

import pytest

# the JSON-schema keys of a check on one value; pydantic writes them for the model, Prefect for the flow
CHECKS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems",
          "maxItems", "pattern", "enum")


def _flows():
    from flows.ablation.ablate import AblationParams, lmforge_ablate
    from flows.dag import lmforge_dag, lmforge_train
    from flows.params import DagParams, RefreshParams, TrainOnlyParams
    from flows.refresh import lmforge_refresh

    return [(lmforge_dag, DagParams), (lmforge_train, TrainOnlyParams), (lmforge_refresh, RefreshParams),
            (lmforge_ablate, AblationParams)]


def _deployment_schema(fl) -> dict:
    """As `prefect deploy` builds it (prefect.cli.deploy: parameter_schema(flow))."""
    from prefect.utilities.callables import parameter_schema

    return parameter_schema(fl).model_dump_for_openapi()


@pytest.mark.parametrize("i", range(4))
def test_every_check_of_the_model_is_in_the_deployment_schema(i):
    fl, model = _flows()[i]
    props = _deployment_schema(fl)["properties"]
    want = model.model_json_schema()["properties"]
    missing = {(name, key): want[name][key] for name in want for key in CHECKS
               if key in want[name] and props[name].get(key) != want[name][key]}
    assert not missing, f"checked by {model.__name__} but not by the form (flows/form.py flow_params): {missing}"


@pytest.mark.parametrize("i", range(4))
def test_no_flow_states_its_parameters_by_hand(i):
    """Each flow function takes **params; its signature (so the form) is its model's fields, with their defaults."""
    import inspect

    from flows.form import FORM_ORDER

    fl, model = _flows()[i]
    code = fl.fn.__code__
    assert code.co_argcount == code.co_kwonlyargcount == 0 and code.co_flags & inspect.CO_VARKEYWORDS
    sig = inspect.signature(fl.fn).parameters
    assert set(sig) == set(model.model_fields)
    assert all(p.default == model.model_fields[n].get_default(call_default_factory=True) for n, p in sig.items())
    if model.__name__ != "AblationParams":  # the form leads with the run's name and inputs
        assert list(sig)[:2] == ["run_name", "runs_dir"] and all(n in FORM_ORDER for n in sig)


def test_nproc_and_friends_are_bounded_in_the_form():
    dag = _deployment_schema(_flows()[0][0])["properties"]
    assert (dag["nproc"]["minimum"], dag["nproc"]["maximum"]) == (1, 64)
    assert dag["stage_timeout_minutes"]["exclusiveMinimum"] == 0
    from flows.params import NAME_PATTERN

    assert dag["run_name"]["pattern"] == NAME_PATTERN and not re.match(NAME_PATTERN, "..")
    assert dag["crawl"]["minItems"] == 1
    assert dag["preset"]["enum"] == ["demo", "full", "tiny"]
    assert dag["objective"]["enum"] == ["", "mlm", "whole_word", "span", "t5_span", "causal"]  # a drop-down of what the DAG runs
    refresh = _deployment_schema(_flows()[2][0])["properties"]
    assert (refresh["replay_fraction"]["minimum"], refresh["replay_fraction"]["maximum"]) == (0, 1)


@pytest.mark.parametrize("params, bad", [({"nproc": -1}, "nproc"), ({"nproc": 65}, "nproc"),
                                         ({"stage_timeout_minutes": 0}, "stage_timeout_minutes"),
                                         ({"run_name": "a/b"}, "run_name"), ({"crawl": []}, "crawl")])
def test_the_server_and_the_flow_refuse_a_value_out_of_bounds(params, bad):
    """The server validates a run's parameters against the same schema (enforce_parameter_schema), and the flow
    against its signature before its body runs."""
    from prefect.exceptions import ParameterTypeError
    from prefect.utilities.schema_tools import ValidationError, validate

    fl = _flows()[0][0]
    schema = _deployment_schema(fl)
    validate({"nproc": 1, "run_name": "ok-1"}, schema, raise_on_error=True, ignore_required=True)
    with pytest.raises(ValidationError, match=bad):  # as prefect.server.api.deployments does for a new run
        validate(params, schema, raise_on_error=True, ignore_required=True)
    with pytest.raises(ParameterTypeError, match=bad):
        fl.validate_parameters(params)
