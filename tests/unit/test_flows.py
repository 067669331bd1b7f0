"""The flows' parameters, deployments and wiring, without running a stage (the launcher is recorded)."""
from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("prefect_api")  # the flows run in this process talk to the session's server


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("LMFORGE_DATA_ROOT", f"{ROOT}:{tmp_path}")
    return tmp_path


def _flows():
    from flows.ablation.ablate import AblationParams, lmforge_ablate
    from flows.dag import lmforge_dag, lmforge_train
    from flows.params import DagParams, RefreshParams, TrainOnlyParams
    from flows.refresh import lmforge_refresh

    return [(lmforge_dag, DagParams), (lmforge_train, TrainOnlyParams), (lmforge_refresh, RefreshParams),
            (lmforge_ablate, AblationParams)]


@pytest.mark.parametrize("i", range(4))
def test_flow_signature_is_its_params_model_flat(i):
    """One Prefect parameter per field, same defaults, described in the UI's form."""
    from prefect.utilities.callables import parameter_schema

    fl, model = _flows()[i]
    sig = inspect.signature(fl.fn)
    assert set(sig.parameters) == set(model.model_fields)
    for name, prm in sig.parameters.items():  # the field's own default: the demo's task is DagParams' to give, from
        declared = model.model_fields[name].get_default(call_default_factory=True)  # the demo crawl alone
        assert prm.default == declared, name
    props = parameter_schema(fl).model_dump()["properties"]
    assert all(props[n].get("description") for n in model.model_fields), [n for n in model.model_fields
                                                                          if not props[n].get("description")]


def test_every_deployment_validates_against_its_flow(root):
    import importlib

    spec = yaml.safe_load((ROOT / "infra" / "prefect" / "prefect.yaml").read_text())
    names = {d["name"] for d in spec["deployments"]}
    assert names == {"demo", "train", "weekly-refresh", "ablate"}
    for d in spec["deployments"]:
        path, func = d["entrypoint"].split(":")
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        fl = getattr(module, func)
        params = fl.validate_parameters(d["parameters"])  # Prefect's own check of a run's parameters
        model = {m.__name__: m for _, m in _flows()}[{"lmforge_dag": "DagParams", "lmforge_train": "TrainOnlyParams",
                                                      "lmforge_refresh": "RefreshParams",
                                                      "lmforge_ablate": "AblationParams"}[func]]
        model(**params)  # and lmforge's (names, paths inside the data root, overrides)
        if func == "lmforge_ablate":
            from flows.ablation.ablate import AblationConfig, check_form

            full = model(**params).model_dump()
            check_form(full)  # paths inside the data root
            AblationConfig(**{k: v for k, v in full.items() if k != "custom_arms"})  # the arms, the reference file
    refresh = next(d for d in spec["deployments"] if d["name"] == "weekly-refresh")
    assert refresh["concurrency_limit"] == {"limit": 1, "collision_strategy": "ENQUEUE"}
    step = spec["pull"][0]
    assert list(step) == ["flows.deploy.pull_step.lmforge_home"]


def test_pull_step_finds_the_checkout_or_says_what_to_set(tmp_path, monkeypatch):
    from flows.deploy.pull_step import lmforge_home

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LMFORGE_HOME", raising=False)
    assert lmforge_home() == {"directory": str(ROOT)} and Path.cwd() == ROOT
    monkeypatch.setenv("LMFORGE_HOME", str(tmp_path))
    with pytest.raises(RuntimeError, match=r"is not an lmforge checkout.*Set LMFORGE_HOME"):
        lmforge_home()


@pytest.mark.parametrize("bad, match", [
    ({"run_name": ""}, "run_name"),
    ({"run_name": ".."}, "run_name\n  String should match pattern"),
    ({"run_name": "a/b"}, "run_name"),
    ({"runs_dir": "/"}, "outside the data root"),
    ({"runs_dir": "../elsewhere"}, "outside the data root"),
    ({"crawl": ["/etc/*"]}, "outside the data root"),
    ({"dedup_index": "/tmp/../etc"}, "outside the data root"),
    ({"labeled": "/etc/passwd"}, "outside the data root"),
    ({"overrides": {"corpus": {"output": "x"}}}, "may not set output"),
    ({"overrides": {"corpus": {"index": "x"}}}, "may not set index"),
    ({"overrides": {"shards": {"corpus": "x"}}}, "may not set corpus"),
    ({"overrides": {"pretrain": {"stepz": 5}}}, "stepz not an option of `lmforge pretrain`"),
    ({"overrides": {"corpus": {"direct_running_mode": "multi_threading"}}}, "Beam options go in beam_args"),
    ({"overrides": {"nope": {}}}, "unknown stage"),
    ({"beam_args": ["--direct-num-workers=2"]}, "did you mean --direct_num_workers?"),
    ({"beam_args": ["--no_such_beam_option=1"]}, "not a Beam pipeline option"),
    ({"nnodes": 2}, "need --rdzv-endpoint HOST:PORT"),
    ({"nnodes": 0}, "nnodes"),
])
def test_unsafe_or_unknown_parameters_are_refused(root, bad, match):
    from pydantic import ValidationError

    from flows.params import DagParams

    with pytest.raises(ValidationError, match=match):
        DagParams(**bad)


def test_paths_typed_on_lmforge_run_are_the_users_own(root, tmp_path, monkeypatch):
    """The data root guards a shared worker from a deployment's or the form's parameters; a path typed
    on the command line (`lmforge run --runs-dir /data/runs`) is allowed, the others still are not."""
    from flows.data_root import trust_paths
    from flows.params import check_params

    monkeypatch.setenv("LMFORGE_DATA_ROOT", str(ROOT))
    elsewhere = tmp_path / "elsewhere" / "runs"
    problem = check_params("dag", {"runs_dir": str(elsewhere)})
    assert problem.startswith("runs_dir: runs_dir") and "outside the data root" in problem and "LMFORGE_DATA_ROOT" in problem
    assert "\n" not in problem
    trust_paths([str(elsewhere), "vader"])
    assert check_params("dag", {"runs_dir": str(elsewhere)}) is None
    assert "outside the data root" in check_params("dag", {"runs_dir": str(tmp_path / "other")})


def test_lmforge_run_refuses_bad_parameters_in_one_line(root, capsys):
    from lmforge.cli import main

    for argv, says in ((["--param", "presett=tiny"], "presett is not a parameter of the dag flow; did you mean preset?"),
                       (["--param", "preset=huge"], "preset: Input should be 'demo', 'full' or 'tiny'"),
                       (["--flow", "train", "--param", "nnodes=0"], "nnodes")):
        with pytest.raises(SystemExit) as e:
            main(["run", *argv])
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.count("\n") == 1 and says in err, err


def test_choices_reach_the_stages(root):
    from flows.params import DagParams

    p = DagParams(tokenizer_model="bpe", objective="span", model="bert_mini", text_column="t", label_column="y",
                  beam_args=["--direct_num_workers", "1"], overrides={"pretrain": {"steps": 5}})
    o = p.stage_options()
    assert o["tokenizer"]["model"] == "bpe" and o["shards"]["mask_objective"] == "span"
    assert o["pretrain"]["model"] == "bert_mini" and o["pretrain"]["steps"] == 5
    assert o["finetune"]["text_column"] == "t" and o["finetune"]["label_column"] == "y"


def test_the_objective_chooses_the_model_and_its_tokenizer(root, capsys):
    """`objective` offers every registered objective; causal trains its decoder on byte-level BPE and t5_span its T5
    on a unigram with sentinels, unless tokenizer_model says otherwise."""
    import typing

    from flows.params import DagParams, Objective
    from lmforge.cli import main
    from schemas.objectives import OBJECTIVES

    assert typing.get_args(Objective) == ("", *OBJECTIVES)
    t5 = DagParams(objective="t5_span").stage_options()
    assert t5["shards"]["mask_objective"] == "t5_span" and t5["tokenizer"]["model"] == "unigram"
    o = DagParams(objective="causal").stage_options()
    assert o["shards"]["mask_objective"] == "causal" and o["tokenizer"]["model"] == "byte_bpe"
    assert DagParams(objective="causal", tokenizer_model="bpe").stage_options()["tokenizer"]["model"] == "bpe"
    assert "model" not in DagParams(objective="mlm").stage_options()["tokenizer"]  # the preset's WordPiece
    with pytest.raises(SystemExit) as e:
        main(["run", "--objective", "t5"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "invalid choice: 't5'" in err


def test_partial_run_parameters_keep_the_deployments_other_values(root):
    """Prefect merges a run's parameters into the deployment's one key deep; flat parameters make that a
    merge of fields (a nested `params` object would have been replaced whole)."""
    from flows.refresh import lmforge_refresh

    spec = yaml.safe_load((ROOT / "infra" / "prefect" / "prefect.yaml").read_text())
    deployment = next(d for d in spec["deployments"] if d["name"] == "weekly-refresh")["parameters"]
    merged = {**deployment, **{"preset": "tiny"}}  # prefect deployment run ... --param preset=tiny
    params = lmforge_refresh.validate_parameters(merged)
    assert params["preset"] == "tiny" and params["crawl_root"] == "crawl" and params["dedup_index"] == "state/minhash_index"


class Recorder:
    """Stands in for flows.stages.runner.launch_stage: records each stage and writes what the next one reads."""

    def __init__(self, fail: set[str] = frozenset()):
        self.calls: list[tuple[str, dict, list]] = []
        self.fail = fail

    def __call__(self, stage, opts, out, log_dir, argv=(), upstream=(), raw_inputs=(), cache=True, before_run=None,
                 log_name=""):
        self.calls.append((stage, dict(opts), list(argv)))
        if stage in self.fail:
            raise RuntimeError(f"stage {stage} failed (exit 1)")
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        if stage == "labeled":
            (out / "finetune.json").write_text("{}")
        if stage == "corpus":
            (out / "manifest.json").write_text(json.dumps({"schema": "lmforge.manifest/v1", "stage": "corpus", "counts": {"kept": 3}, "extra": {
                "index": {"path": str(opts["index"]), "read": [], "wrote": "gen-00001"}}}))
        return str(out), True

    def stages(self) -> list[str]:
        return [c[0] for c in self.calls]

    def opts(self, stage: str) -> dict:
        return next(o for s, o, _ in self.calls if s == stage)


@pytest.fixture
def recorded(monkeypatch):
    import flows.artifacts as art
    import flows.dag as dag

    def install(fail=frozenset()):
        rec = Recorder(set(fail))
        monkeypatch.setattr(dag, "launch_stage", rec)
        for name in ("publish_corpus", "publish_eval", "publish_lineage", "publish_outputs", "publish_note",
                     "publish_card"):
            monkeypatch.setattr(art, name, lambda *a, **k: None)
        return rec
    return install


def test_dag_wires_init_from_and_the_labeled_task(root, recorded):
    """With init_from the tokenizer stage adopts that model's tokenizer and pretraining starts from its
    weights; a known labelled source is prepared first and fine-tuning reads its finetune.json."""
    import flows.dag as dag

    rec = recorded()
    dag.lmforge_dag.fn(run_name="w", runs_dir=str(root), preset="tiny", init_from=str(ROOT))
    run = root.resolve() / "w"
    assert rec.opts("tokenizer") == {"from_model": str(ROOT), "output": run / "tokenizer"}
    assert rec.opts("pretrain")["init_from"] == str(ROOT)
    assert next(a for s, _, a in rec.calls if s == "labeled") == ["prepare", "vader"]
    assert rec.opts("finetune")["config"] == run / "labeled" / "vader" / "finetune.json"
    # the task is prepared before the corpus, which is checked against its validation and test splits
    assert rec.stages() == ["labeled", "corpus", "tokenizer", "shards", "pretrain", "finetune", "distill", "finetune",
                            "compress", "compress", "evaluate", "evaluate"]
    assert rec.opts("corpus")["index"] == run / "minhash_index"
    assert rec.opts("corpus")["decontaminate"] == {"files": [str(run / "labeled" / "vader")]}
    # the student fine-tuned on the same task: its teacher is the fine-tuned model, one init, no controls
    student = [o for s, o, _ in rec.calls if s == "finetune"][1]
    assert student["model"] == run / "distill" / "hf" and student["teacher"] == run / "finetune" / "hf"
    assert student["output"] == run / "student-finetune" and student["init"] == ["pretrained"]
    assert student["controls"] is False and student["config"] == run / "labeled" / "vader" / "finetune.json"
    assert student["max_train"] == rec.opts("finetune")["max_train"]  # the teacher's recipe
    # the card: teacher, student, both fine-tuned, int8 and pruned, scored on the fine-tune's own test split
    compress = [o for s, o, _ in rec.calls if s == "compress"]
    assert [c["method"] for c in compress] == ["int8", "prune"]
    assert compress[1]["task_config"] == str(run / "card-task.json")
    assert json.loads((run / "card-task.json").read_text())["max_test"] == 300  # the tiny preset's cap
    card = [o for s, o, _ in rec.calls if s == "evaluate"][1]
    assert card["model"] == [str(run / "pretrain/hf"), str(run / "distill/hf"), str(run / "finetune/hf"),
                             str(run / "student-finetune/hf"), str(run / "int8"), str(run / "pruned/share-0.25")]
    assert card["task_config"] == str(run / "card-task.json") and "probe_corpus" not in card  # tiny: no probing


def test_decontamination_follows_the_parameter_and_the_overrides(root, recorded):
    import flows.dag as dag

    rec = recorded()
    dag.lmforge_dag.fn(run_name="w", runs_dir=str(root), preset="tiny", decontaminate=False)
    assert "decontaminate" not in rec.opts("corpus")
    rec = recorded()
    dag.lmforge_dag.fn(run_name="v", runs_dir=str(root), preset="tiny",
                       overrides={"corpus": {"decontaminate": {"n_grams": 8, "mode": "mark"}}})
    assert rec.opts("corpus")["decontaminate"] == {"n_grams": 8, "mode": "mark",
                                                   "files": [str(root.resolve() / "v" / "labeled" / "vader")]}


def test_a_users_labelled_file_is_prepared_first_and_decontaminates_the_crawl(root, recorded, monkeypatch):
    """A labelled file (not a known source) becomes a task folder before the corpus; its columns go to that
    stage, not to finetune, which reads the folder; a file too small to split leaves the run without a task,
    the reason on the card."""
    import flows.dag as dag
    from flows.stages.runner import StageFailed

    data = root / "tweets.csv"
    data.write_text("tweet,sentiment\nfine day,pos\n")
    rec = recorded()
    dag.lmforge_dag.fn(run_name="u", runs_dir=str(root), preset="tiny", crawl=["tests/data/tiny"], labeled=str(data),
                       text_column="tweet", label_column="sentiment")
    run = root.resolve() / "u"
    assert rec.stages()[:2] == ["labeled", "corpus"]
    assert next(a for s, _, a in rec.calls if s == "labeled") == ["file", str(data.resolve())]
    assert rec.opts("labeled") == {"output": run / "labeled" / "tweets", "text_column": "tweet",
                                   "label_column": "sentiment"}
    assert rec.opts("corpus")["decontaminate"] == {"files": [str(run / "labeled" / "tweets")]}
    assert rec.opts("finetune")["config"] == run / "labeled" / "tweets" / "finetune.json"

    def too_small(stage, opts, out, *a, **k):
        if stage == "labeled":
            raise StageFailed("labeled", "the test split is empty", Path(out) / "x.log", dag.TOO_FEW_ROWS)
        return rec(stage, opts, out, *a, **k)

    rec = recorded()
    monkeypatch.setattr(dag, "launch_stage", too_small)
    dag.lmforge_dag.fn(run_name="s", runs_dir=str(root), preset="tiny", crawl=["tests/data/tiny"], labeled=str(data))
    assert "finetune" not in rec.stages() and "decontaminate" not in rec.opts("corpus")
    card = [o for s, o, _ in rec.calls if s == "evaluate"][1]
    assert card["task_note"] == f"{data}: the test split is empty" and "task_config" not in card


def test_failed_finetune_does_not_stop_distillation(root, recorded):
    import flows.dag as dag

    rec = recorded(fail={"finetune"})
    with pytest.raises(RuntimeError, match=r"stage finetune failed \(exit 1\); evaluate reported what finished"):
        dag.lmforge_dag.fn(run_name="w", runs_dir=str(root), preset="tiny")
    assert rec.stages()[-3:] == ["distill", "evaluate", "evaluate"]  # no compression without a fine-tuned model
    assert rec.opts("evaluate")["skip"] == ["finetune"]
    card = [o for s, o, _ in rec.calls if s == "evaluate"][1]
    assert len(card["model"]) == 2 and "task_config" not in card


def test_refresh_takes_snapshots_in_order_and_continues_from_the_previous_model(root, recorded):
    import flows.refresh as refresh

    rec = recorded()
    crawl = root / "crawl"
    for s in ("2026-01", "2026-02"):
        (crawl / s).mkdir(parents=True)
    index = root / "state" / "index"
    kw = dict(run_name="wk", runs_dir=str(root / "runs"), crawl_root=str(crawl), dedup_index=str(index), preset="tiny")

    def commit(snapshot: str, gen: int) -> None:  # what the corpus stage would have committed
        data = json.loads((index / "INDEX.json").read_text()) if (index / "INDEX.json").exists() else {
            "schema": "lmforge.minhash_index/v1", "params": {}, "generations": []}
        data["generations"].append({"name": f"gen-{gen:05d}", "fingerprint": snapshot, "snapshot": snapshot})
        index.mkdir(parents=True, exist_ok=True)
        (index / "INDEX.json").write_text(json.dumps(data))

    first = refresh.lmforge_refresh.fn(**kw)
    base = (root / "runs" / "wk").resolve()
    assert first["snapshot"] == "2026-01" and first["previous"] is None
    assert rec.opts("corpus")["snapshot"] == "2026-01" and "from_model" not in rec.opts("tokenizer")
    assert (base / "latest").resolve() == base / "2026-01"
    commit("2026-01", 1)

    rec.calls.clear()
    second = refresh.lmforge_refresh.fn(**kw)
    assert second["snapshot"] == "2026-02" and second["previous"] == str(base / "2026-01")
    assert rec.opts("tokenizer")["from_model"] == str(base / "2026-01" / "pretrain" / "hf")
    assert rec.opts("pretrain")["init_from"] == str(base / "2026-01" / "pretrain" / "hf")
    assert rec.opts("evaluate")["previous"] == str(base / "2026-01" / "pretrain" / "hf")
    assert "replay" not in rec.opts("shards")  # replay_fraction 0: none
    assert (base / "latest").resolve() == base / "2026-02" and (base / "2026-01").is_dir()
    commit("2026-02", 2)

    rec.calls.clear()
    third = refresh.lmforge_refresh.fn(**kw)
    assert third["status"] == "nothing new" and "every snapshot" in third["why"] and rec.calls == []


def test_index_label_and_next_snapshot(tmp_path):
    from pipelines.corpus.snapshots import next_snapshot

    (tmp_path / "crawl" / "b").mkdir(parents=True)
    (tmp_path / "crawl" / "a").mkdir()
    (tmp_path / "crawl" / ".hidden").mkdir()
    assert next_snapshot(tmp_path / "crawl", tmp_path / "none")[0] == "a"
    with pytest.raises(FileNotFoundError, match="not a folder of"):
        next_snapshot(tmp_path / "crawl", tmp_path / "none", "zz")
    with pytest.raises(FileNotFoundError, match="one folder per crawl snapshot"):
        next_snapshot(tmp_path / "missing", tmp_path / "none")


def test_several_nodes_reach_pretraining_with_the_command_for_the_others(root, recorded, capsys):
    import flows.dag as dag

    rec = recorded()
    dag.lmforge_train.fn(run_name="mn", runs_dir=str(root), shards=str(root), tokenizer=str(root), preset="tiny",
                         nproc=1, nnodes=2, rdzv_endpoint="10.0.0.1:29500")
    o = rec.opts("pretrain")
    assert (o["nnodes"], o["rdzv_endpoint"], o["nproc"]) == (2, "10.0.0.1:29500", 1) and o["rdzv_id"] == "lmforge-mn"
    assert "on each other node, with the same file system, run: lmforge pretrain" in capsys.readouterr().out


def test_a_hostfile_reaches_pretraining_with_each_other_nodes_command(root, recorded, capsys, tmp_path):
    import flows.dag as dag

    hostfile = tmp_path / "hostfile"
    hostfile.write_text("node-a slots=2\nnode-b slots=2\n")
    rec = recorded()
    dag.lmforge_train.fn(run_name="hf", runs_dir=str(root), shards=str(root), tokenizer=str(root), preset="tiny",
                         hostfile=str(hostfile))
    o = rec.opts("pretrain")
    assert (o["hostfile"], o["node_rank"], o["master_addr"]) == (str(hostfile), 0, "node-a")
    out = capsys.readouterr().out
    assert "node 1 of 2 (node-b)" in out and "--node-rank 1" in out
    with pytest.raises(Exception, match="slots=N"):
        hostfile.write_text("node-a\n")
        dag.lmforge_train.fn(run_name="hf2", runs_dir=str(root), shards=str(root), tokenizer=str(root), preset="tiny",
                             hostfile=str(hostfile))


CANCELLED_FLOW = r'''
import sys
from pathlib import Path

from prefect.utilities.engine import capture_sigterm

from flows.stages.runner import run_logged

child = [sys.executable, "-c", sys.argv[1]]
with capture_sigterm():  # what Prefect's flow engine wraps a flow run in: SIGTERM -> TerminationSignal
    run_logged(child, Path(sys.argv[2]), "pretrain", grace=20)
'''
STAGE = r'''
import signal, sys, time
from pathlib import Path

def stop(*_):  # what `lmforge pretrain --submit` does on SIGTERM: cancel the job, then exit 143
    Path(sys.argv[1]).write_text("scancel")
    sys.exit(143)

signal.signal(signal.SIGTERM, stop)
print("job 7 RUNNING", flush=True)
time.sleep(120)
'''


@pytest.mark.slow  # a flow in a process of its own, and its stage
def test_a_cancelled_flow_run_stops_its_stage_which_cancels_its_job(tmp_path):
    """Prefect cancels a flow run by SIGTERM to its process, which its engine raises as TerminationSignal in
    the flow; the stage launcher then sends SIGTERM to the running stage and waits for it, so a stage that
    submitted a cluster job cancels that job (tests/integration/test_slurm_cluster.py: SIGTERM to
    `lmforge pretrain --submit slurm` scancels it) rather than living on as an orphan."""
    import signal
    import subprocess
    import sys
    import time

    from tests.unit.test_flows import CANCELLED_FLOW, STAGE

    marker, log = tmp_path / "cancelled", tmp_path / "pretrain.log"
    root = Path(__file__).resolve().parents[2]
    stage = STAGE.replace("sys.argv[1]", repr(str(marker)))
    flow = subprocess.Popen([sys.executable, "-c", CANCELLED_FLOW, stage, str(log)], cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while "RUNNING" not in (log.read_text() if log.exists() else "") and time.time() < deadline:
        time.sleep(0.2)
    flow.send_signal(signal.SIGTERM)
    out, err = flow.communicate(timeout=60)
    assert marker.read_text() == "scancel", (out, err[-2000:])
    assert "stopping: SIGTERM to the stage" in out, (out, err[-2000:])  # sent by run_logged, not by chance
    assert flow.returncode != 0  # Prefect ends the run with the signal once the stage has stopped


def test_only_a_failure_a_second_try_can_pass_is_retried(tmp_path):
    """issue 51: a stage that named bad input (rc 2, a ValueError) fails once; a lost worker (a signal), the network
    or another run's lock gets the task's retry. Real Prefect tasks with the DAG's retry condition, run in a flow."""
    from prefect import flow, task

    from flows import dag
    from flows.stages.runner import StageFailed, retry_if_transient, worth_retrying

    log = tmp_path / "x.log"
    bad = StageFailed("corpus", "ValueError: crawl.jsonl line 1: no `text` field", log, 2)
    lost = StageFailed("pretrain", "rank 1 exited: Signal 9 (SIGKILL) received", log, 1)
    assert not worth_retrying(bad) and not worth_retrying(TimeoutError("stage corpus ran past its time limit"))
    assert worth_retrying(lost) and worth_retrying(StageFailed("corpus", "killed", log, -9))
    assert worth_retrying(StageFailed("corpus", "StageBusy: runs/x/corpus is held by pid 7", log, 2))
    assert worth_retrying(ConnectionRefusedError("127.0.0.1:4200")) and not worth_retrying(ValueError("x"))
    assert all(t.retry_condition_fn is retry_if_transient for t in (dag.corpus_task, dag.pretrain_task, dag.card_task)
               if t.retries)

    tries = []

    @task(retries=1, retry_delay_seconds=0, retry_condition_fn=retry_if_transient)
    def stage(exc):
        tries.append(exc.reason)
        raise exc

    @flow
    def both():
        for exc in (bad, lost):
            try:
                stage(exc)
            except StageFailed:
                pass

    both()
    assert tries == [bad.reason, lost.reason, lost.reason]


def test_lmforge_ablate_resolves_its_arms_once_and_runs_that_config(root, tmp_path, monkeypatch, capsys):
    """`lmforge ablate` makes its config (resolving the arms) once and runs that config as the lmforge-ablate flow,
    not taken apart into the form's parameters and made again; a credential in a value is refused in one line."""
    import flows.ablation.ablate as ab
    import flows.ablation.arms as arms_mod

    calls, ran = [], []
    real = arms_mod.resolve_arms

    def counted(*a, **k):
        calls.append(a)
        return real(*a, **k)

    monkeypatch.setattr(ab, "resolve_arms", counted)
    monkeypatch.setattr(ab, "run_ablation", lambda cfg, opts=None: ran.append(cfg) or {"report": "r.md", "failed": {}})
    (tmp_path / "ref.jsonl").write_text(json.dumps({"id": "r", "text": "a reference text"}) + "\n")
    args = ["--crawl", str(ROOT / "tests/data/tiny/tiny.warc.gz"), "--reference", str(tmp_path / "ref.jsonl"),
            "--runs-dir", str(tmp_path / "runs"), "--arms", "baseline", "no-near-dedup"]
    assert ab.main(args) == 0
    assert len(calls) == 1 and len(ran) == 1 and [a.name for a in ran[0].resolved] == ["baseline", "no-near-dedup"]
    assert ab.main([*args[:1], "s3://AKIAEXAMPLE:hunter2@bucket/x", *args[2:]]) == 1
    assert "carries a credential" in capsys.readouterr().err and len(ran) == 1
