"""A run started from the Prefect UI or a deployment cannot read or write outside the data root through any
parameter of any flow (issue 38; the rule is flows/data_root.py's).

The flows' parameters are enumerated from their deployment schemas and the options an override may set from the
stage configs, so a parameter or option added later is attacked too, or fails test_every_parameter_is_classified
until it is classified. Each hostile value is refused the way a deployment run refuses it: Prefect's check of the
parameters against the flow's signature, then the flow's body, whose first line validates its parameter model,
before any stage is launched; and `lmforge run`/check_params says why in one line naming the parameter.
"""
from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

from common.config import _base_type

NAMES = {"run_name", "snapshot"}
"""Folder names under a checked folder: letters, digits, '.', '_', '-' (the run folder itself is checked too)."""
NOT_PATHS = {"preset", "model", "tokenizer_model", "objective", "task", "text_column", "text_pair_column",
             "label_column", "split_column", "id_column", "tokens_column", "tags_column", "nproc", "nnodes",
             "rdzv_endpoint", "cluster", "cluster_image", "cluster_pvc", "cluster_namespace", "cluster_gpus",
             "stage_timeout_minutes", "index_wait", "decontaminate", "replay_fraction", "credentials_block", "languages"}
"""Choices, numbers, column names, a HOST:PORT, cluster object names, a Secret block's name: no file is opened by them."""
NESTED = {"overrides", "beam_args"}
"""Parameters whose values hold paths: every stage option and Beam option that names files (attacked below)."""
OPTION_NOT_PATHS = {
    "CorpusConfig": {"languages", "char_shingle_languages", "applied_steps"}, "C4Config": {"variant"},
    "GopherQualityConfig": {"stop_words", "stop_words_languages"}, "FineWebConfig": {"line_end_chars"},
    "DecontConfig": {"splits", "text_column", "split_column", "id_column", "mode"}, "TokenizerConfig": {"model"},
    "ShardsConfig": {"packing"}, "MaskConfig": {"objective", "count"},
    "PretrainConfig": {"model", "embeddings", "position_init", "schedule", "optimizer", "compile_mode", "kernel_tuning", "attention", "profile_steps"},
    "FinetuneConfig": {"task", "text_column", "text_pair_column", "label_column", "split_column", "id_column",
                       "tokens_column", "tags_column", "init", "select_metric"},
    "EvaluateConfig": {"name", "task_note", "not_run", "probe_languages", "skip", "split"}, "CompressConfig": {"scheme"}}
"""Stage options with text values that name no file (each config's string options not declared `path=True`)."""


def _flows():
    from flows.dag import lmforge_dag, lmforge_train
    from flows.refresh import lmforge_refresh

    return {"dag": lmforge_dag, "train": lmforge_train, "refresh": lmforge_refresh}


def _parameters(flow: str) -> list[str]:
    """The flow's parameters as the deployment's form shows them."""
    from prefect.utilities.callables import parameter_schema

    return list(parameter_schema(_flows()[flow]).model_dump()["properties"])


def _options():
    """(stage, [option, nested option...], field, type) of every option an override may set (the flow wires the rest)."""
    from flows.params import WIRED, stage_config

    def walk(cls, where):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if dataclasses.is_dataclass(hints[f.name]):
                yield from walk(hints[f.name], [*where, f.name])
            elif f.init and _base_type(hints[f.name])[0] is str:
                yield [*where, f.name], f, cls, hints[f.name]

    for stage in WIRED:
        for names, f, cls, tp in walk(stage_config(stage), []):
            if names[0] not in WIRED[stage]:
                yield stage, names, f, cls, tp


@pytest.fixture
def root(tmp_path, monkeypatch):
    """A worker whose data root is tmp/root (its working directory), with a home and a secret outside it and,
    inside it, a symlink `link` to the outside and a symlinked run folder `runs/evil`."""
    root, outside, home = (tmp_path / d for d in ("root", "outside", "home"))
    for d in (root / "runs", outside, home):
        d.mkdir(parents=True)
    (outside / "secret").write_text("not yours\n")
    (root / "hosts").write_text("localhost slots=1\n")
    (root / "link").symlink_to(outside)
    (root / "runs" / "evil").symlink_to(outside)
    monkeypatch.setenv("LMFORGE_DATA_ROOT", str(root))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(root)
    return root


def hostile(root: Path) -> dict[str, str]:
    """Values that would reach a file outside the data root if a stage opened them."""
    outside = root.parent / "outside"
    return {"absolute": "/etc", "absolute file": "/etc/passwd", "elsewhere": str(outside / "elsewhere"),
            "dotdot": f"{root}/../../etc/passwd", "relative dotdot": "../outside/secret",
            "symlink": "link/secret", "symlink a glob matches": "l?nk/secret", "dotdot after a glob": "*/../../outside",
            "file url": "file:///etc/passwd", "file url elsewhere": f"file://{outside}/secret",
            "fsspec local url": "local:///etc/passwd", "fsspec chain": "simplecache::file:///etc/passwd",
            "http url": "http://169.254.169.254/latest/meta-data", "home": "~/secret",
            "an option": "--output=/etc"}


def refused(flow: str, params: dict, monkeypatch) -> str:
    """Run `flow` as a deployment run would with `params`; assert it stops before any stage; return the line
    check_params (and `lmforge run`) gives."""
    from prefect.exceptions import ParameterTypeError
    from pydantic import ValidationError

    import flows.dag as dag
    import flows.refresh as refresh
    from flows.params import check_params

    launched = []
    monkeypatch.setattr(dag, "launch_stage", lambda *a, **k: launched.append(a))
    monkeypatch.setattr(refresh, "snapshot_task", lambda *a, **k: launched.append(a))
    fl = _flows()[flow]
    try:
        given = fl.validate_parameters(params)  # Prefect's check on the worker (and the server's, by the schema)
    except ParameterTypeError:
        given = None
    if given is not None:
        with pytest.raises(ValidationError):
            fl.fn(**given)
    assert not launched
    line = check_params(flow, params)
    assert line and "\n" not in line, line
    return line


def test_every_parameter_is_classified():
    """A new parameter must be a path (PATH_PARAMS: checked against the root), a name, or named here as none."""
    from flows.params import PATH_PARAMS

    for flow in _flows():
        unclassified = [p for p in _parameters(flow) if p not in {*PATH_PARAMS, *NAMES, *NOT_PATHS, *NESTED}]
        assert not unclassified, f"{flow}: classify {unclassified} (a path goes in flows.params.PATH_PARAMS)"
    unclassified = {(cls.__name__, names[-1]) for _, names, f, cls, _ in _options()
                    if not f.metadata.get("path") and names[-1] not in OPTION_NOT_PATHS.get(cls.__name__, ())}
    assert not unclassified, f"declare these options opt(..., path=True) or list them in OPTION_NOT_PATHS: {unclassified}"


@pytest.mark.parametrize("flow", ["dag", "train", "refresh"])
def test_no_path_parameter_reaches_outside_the_root(flow, root, monkeypatch):
    from flows.params import PATH_PARAMS

    params = [p for p in _parameters(flow) if p in PATH_PARAMS]
    assert {"crawl", "labeled", "init_from", "dedup_index", "runs_dir", "cluster_mount", "hostfile"} & set(params)
    for name in params:
        for attack, value in hostile(root).items():
            line = refused(flow, {name: [value] if name == "crawl" else value}, monkeypatch)
            assert line.startswith(f"{name}: {name} "), (name, attack, line)


@pytest.mark.parametrize("flow", ["dag", "train", "refresh"])
def test_names_and_the_run_folder_stay_inside(flow, root, monkeypatch):
    """run_name and snapshot are folder names; the run folder they make is checked too (runs/evil -> outside)."""
    for name in NAMES & set(_parameters(flow)):
        for value in ("..", "../outside", "a/b", "/etc", "~", "--output=x"):
            assert name in refused(flow, {name: value}, monkeypatch)
    line = refused(flow, {"runs_dir": "runs", "run_name": "evil"}, monkeypatch)
    assert "run_name 'runs/evil' resolves to" in line and "outside the data root" in line


@pytest.mark.parametrize("stage", ["corpus", "tokenizer", "shards", "pretrain", "finetune", "distill", "evaluate",
                                   "student_finetune", "compress", "card"])
def test_no_stage_option_reaches_outside_the_root(stage, root, monkeypatch):
    """Every option an override may set that names files (the corpus' decontaminate files and URL lists, pretrain's
    deepspeed_config, finetune's teacher, the card's texts, ...) is checked like a parameter; the others may not
    start with '-' (a list item would become an option of the stage: init: ["pretrained", "--output=/etc"])."""
    from flows.params import WIRED

    assert stage in WIRED
    for _, names, f, _, tp in (o for o in _options() if o[0] == stage):
        is_list = _base_type(tp)[1]
        values = hostile(root).values() if f.metadata.get("path") else ["--output=/elsewhere"]
        for value in values:
            override = [value] if is_list else value
            for key in reversed(names):
                override = {key: override}
            line = refused("dag", {"overrides": {stage: override}}, monkeypatch)
            assert line.startswith(f"overrides: overrides[{stage!r}].{'.'.join(names)} "), line


def test_overrides_cannot_smuggle_a_path_past_the_walk(root, monkeypatch):
    """A nested family given as a value (`--decontaminate` is the files' flag), an option argparse would take by
    its prefix, an object for a plain option, and inputs the flow wires for evaluate."""
    for override, says in (({"corpus": {"decontaminate": "/etc/passwd"}}, "must be an object of DecontConfig"),
                           ({"corpus": {"decontaminate": {"file": ["/etc/passwd"]}}}, "not an option of DecontConfig"),
                           ({"finetune": {"teacher": {"x": "/etc"}}}, "must be a value or a list"),
                           ({"evaluate": {"previous": "runs/other"}}, "may not set previous")):
        assert says in refused("dag", {"overrides": override}, monkeypatch)


def test_beam_options_that_name_files_stay_inside(root, monkeypatch):
    from flows.data_root import BEAM_PATH_SUFFIXES
    from pipelines.beam_options import beam_flags

    flags = sorted(f for f in beam_flags([]) if f.endswith(BEAM_PATH_SUFFIXES))
    assert {"--temp_location", "--staging_location", "--requirements_file", "--setup_file", "--extra_package",
            "--sdk_location", "--prism_location", "--flink_job_server_jar", "--artifacts_dir"} <= set(flags)
    for value in hostile(root).values():  # every spelling on one flag (a Beam check costs 50 ms), one on each flag
        line = refused("dag", {"beam_args": [f"--requirements_file={value}"]}, monkeypatch)
        assert line.startswith("beam_args: beam_args --requirements_file "), line
    for flag in flags:
        assert f"beam_args {flag} '/etc'" in refused("refresh", {"beam_args": [flag, "/etc"]}, monkeypatch)


def test_paths_inside_the_root_and_object_stores_pass(root):
    """The refusals above are the rule's, not everything's: inside the root passes, and so do object-store
    URLs (s3://, gs://: no file on the worker), except for the hostfile, which the worker opens as a plain file."""
    from flows.params import PATH_PARAMS, check_params

    for flow in _flows():
        for name in set(_parameters(flow)) & set(PATH_PARAMS):
            for value in ("hosts", f"{root}/hosts", f"file://{root}/hosts", "s3://bucket/x", "gs://bucket/x/*.warc.gz"):
                if name == "hostfile" and "://" in value:
                    continue
                assert check_params(flow, {name: [value] if name == "crawl" else value}) is None, (flow, name, value)
    assert check_params("dag", {"beam_args": ["--temp_location=gs://b/tmp", "--sdk_location=container"],
                                "overrides": {"corpus": {"decontaminate": {"files": ["s3://b/eval.jsonl", "hosts"]}},
                                              "pretrain": {"deepspeed_config": ""}}}) is None


@pytest.mark.parametrize("flow", ["dag", "train", "refresh"])
def test_a_run_folder_that_holds_code_is_refused(flow, root, monkeypatch):
    """Issue 50: with the checkout as the data root, `runs_dir=.` and `run_name=pipelines` let the corpus stage
    replace pipelines/corpus. A run folder that is a package, a project or a repository, or lies inside a package,
    is refused; one a run wrote before (DeepSpeed's zero_to_fp32.py beside its checkpoints) is not."""
    import subprocess

    from flows.params import check_params

    (root / "pkg" / "corpus" / "data").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "proj").mkdir()
    (root / "proj" / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (root / "repo" / "docs").mkdir(parents=True)
    (root / "repo" / "docs" / "a.txt").write_text("tracked\n")
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", str(root / "repo")], check=True)
    subprocess.run([*git, "-C", str(root / "repo"), "add", "docs/a.txt"], check=True)  # docs/ itself holds no marker
    for runs_dir, run_name, said in ((".", "pkg", "is code"), ("pkg", "corpus", "inside the Python package"),
                                     ("pkg/corpus", "data", "inside the Python package"), (".", "proj", "is code"),
                                     ("repo", "docs", "a file git tracks")):
        line = refused(flow, {"runs_dir": runs_dir, "run_name": run_name}, monkeypatch)
        assert said in line and "run_name" in line, (runs_dir, run_name, line)
    (root / "runs" / "old" / "pretrain" / "checkpoints").mkdir(parents=True)
    (root / "runs" / "old" / "pretrain" / "checkpoints" / "zero_to_fp32.py").write_text("# DeepSpeed's\n")
    assert check_params(flow, {"runs_dir": "runs", "run_name": "old"}) is None


@pytest.mark.parametrize("flow", ["dag", "train", "refresh"])
def test_a_control_character_in_any_value_is_refused(flow, root, monkeypatch):
    """A newline in a path would end a line of a launch script or a manifest's log; refused in every parameter,
    lists and override dictionaries (keys too) included."""
    for params in ({"runs_dir": "runs\nx"}, {"labeled": "a\x00b"}, {"crawl": ["ok", "x\ry"]},
                   {"overrides": {"pretrain": {"steps": 5, "model": "bert\x1b[2J"}}},
                   {"overrides": {"pretrain\n": {"steps": 5}}}):
        if not set(params) <= set(_parameters(flow)):
            continue  # train reads no crawl
        line = refused(flow, params, monkeypatch)
        assert "control character" in line, (params, line)


def test_the_cluster_image_is_one_the_worker_allows(root, monkeypatch):
    """The form's cluster_image is free text; the worker's LMFORGE_CLUSTER_IMAGES (globs) says which images its runs
    may start (unset: the default alone). `lmforge run` typing one allows it for that run."""
    from flows.params import IMAGES_ENV, check_params, trust_image

    k8s = {"cluster": "k8s", "nnodes": 2, "runs_dir": "runs"}
    monkeypatch.delenv(IMAGES_ENV, raising=False)
    assert check_params("train", {**k8s, "cluster_image": "lmforge:0.1.0"}) is None
    line = refused("train", {**k8s, "cluster_image": "evil.example.com/miner:latest"}, monkeypatch)
    assert "not among the images this worker runs" in line and IMAGES_ENV in line
    assert "image reference" in refused("train", {**k8s, "cluster_image": "x --privileged"}, monkeypatch)
    monkeypatch.setenv(IMAGES_ENV, "registry.example.com/lmforge:*, registry.example.com/lmforge@sha256:*")
    assert check_params("train", {**k8s, "cluster_image": "registry.example.com/lmforge:v2"}) is None
    assert "not among" in refused("train", {**k8s, "cluster_image": "lmforge:0.1.0"}, monkeypatch)
    assert "not among" in refused("train", {**k8s, "cluster_image": "registry.example.com/lmforge2:v2"}, monkeypatch)
    monkeypatch.delenv(IMAGES_ENV)
    trust_image("registry.example.com/mine:1")
    assert check_params("train", {**k8s, "cluster_image": "registry.example.com/mine:1"}) is None


def test_a_flows_stages_ask_no_model_hub(root, monkeypatch, tmp_path):
    """`init_from=someorg/somemodel` that is no folder under the root must not make the worker fetch a hub's files:
    every stage a flow launches runs with the hub libraries offline."""
    import flows.stages.runner as runner

    seen = {}
    monkeypatch.setattr(runner, "run_logged", lambda cmd, log, stage, **k: seen.update(k["env"]) or 0)
    runner.launch_stage("tokenizer", {"from_model": "someorg/somemodel"}, tmp_path / "out", tmp_path / "logs",
                        cache=False)
    assert {k: seen[k] for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")} == \
        {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def test_without_a_configured_root_a_run_reaches_the_runs_and_samples_folders_not_the_checkout(monkeypatch):
    """Issue 50: the default data root (LMFORGE_DATA_ROOT unset) is the working directory's `runs` and `samples`
    folders; the checkout itself, its code and configuration, is outside it. The flows' defaults pass."""
    from flows.data_root import DATA_ROOT_ENV, data_roots
    from flows.params import check_params

    checkout = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(checkout)
    monkeypatch.delenv(DATA_ROOT_ENV, raising=False)
    assert data_roots() == [checkout / "runs", checkout / "samples"]
    for flow in ("dag", "train", "refresh"):
        assert check_params(flow, {}) is None, flow  # runs/ and samples/crawl: the defaults
    assert check_params("dag", {"crawl": ["samples/crawl/news-000.warc.gz"], "runs_dir": "runs/mine"}) is None
    for value in ("pyproject.toml", "pipelines/corpus/data", ".", "runs/../flows"):
        line = check_params("dag", {"crawl": [value]})
        assert line and "outside the data root" in line and f"{checkout / 'runs'}, {checkout / 'samples'}" in line, line
    assert "outside the data root" in check_params("train", {"init_from": "tests/data"})
