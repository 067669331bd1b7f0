"""The ablation's Prefect form: typed choices and bounds in the deployment's schema, paths inside the data root,
custom arms checked like presets; and the bench's verdicts against the published directions."""
from __future__ import annotations

import pytest


def test_the_form_offers_the_presets_and_tasks_as_choices_and_bounds_the_numbers():
    from prefect.utilities.callables import parameter_schema

    from flows.ablation.ablate import lmforge_ablate
    from flows.ablation.arms import ARM_PRESETS
    from flows.params import NAME_PATTERN
    from pipelines.labeled.registry import SOURCES

    props = parameter_schema(lmforge_ablate).model_dump_for_openapi()
    p = props["properties"]
    assert p["arms"]["items"]["enum"] == list(ARM_PRESETS) and p["tasks"]["items"]["enum"] == list(SOURCES)
    assert p["preset"]["enum"] == ["demo", "full", "tiny"]
    assert (p["parallel_arms"]["minimum"], p["token_budget"]["minimum"], p["seeds"]["minItems"]) == (1, 0, 1)
    assert p["name"]["pattern"] == NAME_PATTERN
    arm = props["definitions"]["CustomArm"]["properties"]
    assert set(arm) == {"name", "corpus", "crawl"} and arm["name"]["pattern"] == NAME_PATTERN


@pytest.mark.parametrize("change, said", [
    ({"runs_dir": "/"}, "runs_dir '/' resolves to /, outside the data root"),
    ({"reference": "/etc/passwd"}, "reference '/etc/passwd' resolves to /etc/passwd, outside the data root"),
    ({"custom_arms": [{"name": "x", "corpus": {}, "crawl": ["/etc"]}]}, "custom_arms[x].crawl '/etc'"),
    ({"custom_arms": [{"name": "x", "corpus": {"decontaminate": {"files": ["/etc/hosts"]}}, "crawl": []}]},
     "custom_arms[x].corpus.decontaminate.files"),
    ({"custom_arms": [{"name": "x", "corpus": {"gopher_qualty": {"enabled": False}}, "crawl": []}]},
     "did you mean 'gopher_quality_enabled'"),
    ({"crawl": ["s3://AKIAEXAMPLE:hunter2@bucket/x"]}, "carries a credential"),
    # names that are no folder of their own (the outputs would land in the runs folder's parent), and a run folder
    # that is the installation's code (issue 50: the corpus stage replaced pipelines/corpus)
    ({"name": "."}, "name"), ({"name": ".."}, "name"),
    ({"custom_arms": [{"name": "..", "corpus": {}, "crawl": []}]}, "custom_arms"),
    ({"runs_dir": ".", "name": "pipelines"}, "a run's folder holds data only"),
    ({"runs_dir": "pipelines/corpus", "name": "data"}, "is inside the Python package"),
    ({"runs_dir": "runs\nx"}, "control character"),
])
def test_a_run_from_the_form_is_refused_in_one_line_before_anything_runs(checkout_root, change, said):
    root = checkout_root
    from flows.ablation.ablate import lmforge_ablate

    with pytest.raises(Exception, match=None) as e:
        lmforge_ablate.fn(**{"runs_dir": str(root / "runs"), **change})
    assert said in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert not (root / "runs").exists()


def _arm(diff_loss, task_diffs):
    d = lambda m, lo, hi: {"mean": m, "ci_low": lo, "ci_high": hi, "n": 3, "seeds_to_resolve": 9}  # noqa: E731
    return {"reference_loss": {"diff_to_baseline": d(*diff_loss)},
            "tasks": {t: {"metric": "accuracy", "by_seed": by, "diff_to_baseline": d(*x)} for t, (x, by) in task_diffs.items()}}


def test_each_published_direction_is_judged_from_the_paired_interval():
    from bench.transfer.ablate import judge

    base = {"tasks": {"vader": {"metric": "accuracy", "by_seed": {1: 0.60, 2: 0.61, 3: 0.62}},
                      "reuters": {"metric": "accuracy", "by_seed": {1: 0.5, 2: 0.5, 3: 0.5}}}}
    report = {"arms": {
        "baseline": base,
        "no-near-dedup": _arm((0.05, 0.02, 0.08), {}),
        "no-quality-rules": _arm((-0.03, -0.05, -0.01), {"vader": ((-0.01, -0.03, 0.01), {1: 0.59, 2: 0.60, 3: 0.61}),
                                                        "reuters": ((-0.1, -0.2, -0.05), {1: 0.4, 2: 0.4, 3: 0.4})})}}
    v = {(x.arm, x.measure): x.verdict for x in judge(report)}
    assert v[("no-near-dedup", "reference loss, arm - baseline")].startswith("reproduces the direction: +0.0500")
    assert v[("no-quality-rules", "reference loss, arm - baseline")].startswith("the other way: -0.0300")
    assert v[("no-quality-rules", "vader test accuracy, arm - baseline")].startswith("cannot tell")
    assert "about 9 seeds would resolve it" in v[("no-quality-rules", "vader test accuracy, arm - baseline")]
    assert v[("no-quality-rules", "reuters test accuracy, arm - baseline")].startswith("reproduces the direction")
    # FineWeb's aggregate: the mean over tasks per seed, paired: -0.055 at every seed
    agg = v[("no-quality-rules", "mean of task scores, arm - baseline")]
    assert agg.startswith("reproduces the direction: -0.0550"), agg

    # a task where every model, pretrained or from random init, scored the majority class says so
    report["arms"]["no-quality-rules"]["tasks"]["reuters"]["by_seed"] = {1: 0.5, 2: 0.5, 3: 0.5}
    report["controls"] = {"reuters": {"majority": 0.5, "scratch_by_seed": {1: 0.5, 2: 0.5, 3: 0.5}}}
    v = {(x.arm, x.measure): x.verdict for x in judge(report)}
    said = "cannot tell: every model, pretrained or not, scores the majority class (0.5000)"
    assert v[("no-quality-rules", "reuters test accuracy, arm - baseline")].startswith(said)
    assert v[("baseline", "reuters test accuracy, pretrained - random init")].startswith(said)
    report["controls"]["reuters"]["scratch_by_seed"][2] = 0.55  # one model that learnt: the interval speaks
    v = {(x.arm, x.measure): x.verdict for x in judge(report)}
    assert not v[("baseline", "reuters test accuracy, pretrained - random init")].startswith(said)


def test_each_task_takes_the_recipes_own_options_the_same_for_every_arm():
    from bench.transfer.ablate import AblateBenchConfig
    from flows.ablation.arm import finetune_options

    plan = {"opts": AblateBenchConfig(tasks=["vader", "wsj_pos"]).stage_options()}
    base = finetune_options(plan, "baseline", 1, "wsj_pos")
    arm = finetune_options(plan, "no-near-dedup", 1, "wsj_pos")
    assert (base["epochs"], base["max_length"]) == (8, 96) and finetune_options(plan, "x", 2, "vader")["max_train"] == 3000
    # the arms differ only in what the baseline adds: the random-init twin and the controls
    assert {k: v for k, v in base.items() if k not in ("init", "controls")} == \
        {k: v for k, v in arm.items() if k not in ("init", "controls")}
    assert base["init"] == ["pretrained", "scratch"] and arm["init"] == ["pretrained"] and not arm["controls"]
    # no per-task entry: the shared options alone
    assert finetune_options({"opts": {"finetune": {"epochs": 2}}}, "x", 1, "vader") == {
        "epochs": 2, "seeds": [1], "init": ["pretrained"], "controls": False}
