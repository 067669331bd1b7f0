"""What a user chooses when starting a flow (the Prefect UI's form), and the checks that keep a
parameter from destroying state.

Parameters are flat (one Prefect parameter per field): Prefect merges a run's parameters into the
deployment's shallowly, so `--param preset=tiny` changes the preset and keeps the deployment's crawl
and index. A nested object would be replaced whole.

Paths a parameter names (crawl inputs, runs folder, band index, models, labelled data, hostfile, cluster
mount), and those an override gives a stage, must resolve inside a data root: the worker's `LMFORGE_DATA_ROOT`
(several roots separated by `:`), by default the `runs` and `samples` folders of its working directory. The root
is the worker's setting, never a form field, so the form cannot point a run at `/` or `../elsewhere`. Paths typed
on `lmforge run`'s command line are the user's own (trust_paths): a local user owns the machine. The rule, with
what "resolves" means for symlinks, globs, `~` and URLs (object stores pass), is flows/data_root.py's.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, create_model, field_validator, model_validator

from common.cli import closest
from common.redact import is_secret_name, secret_in_value
from flows.data_root import check_beam_paths, check_option_paths, data_roots, inside_root, refuse_code_folder
from flows.presets import RUN_PRESETS, with_objective
from flows.stages import table as stage_table
from pipelines.tokenizer import MODELS
from schemas.finetune import LABELED_COLUMNS, LABELED_FILE_OPTIONS, TASKS
from schemas.objectives import OBJECTIVES
from training.launch.cluster import CONTROL, ClusterSpec
from training.launch.cluster import KINDS as CLUSTER_KINDS

NAME_PATTERN = r"^[A-Za-z0-9._-]*[A-Za-z0-9_-][A-Za-z0-9._-]*$"
"""A run, snapshot, ablation or arm name: one folder's name, not `.`, `..` or dots alone (the folder above)."""
# Choices, shared by the models and the flow signatures (the UI's form shows them as drop-downs).
Preset = Literal[tuple(RUN_PRESETS)]
# derived from the registries (schemas.objectives, pipelines.tokenizer MODELS), so a new objective or tokenizer
# family shows up in the form; every registered objective runs through the whole DAG
TokenizerKind = Literal[("", *MODELS)]
Objective = Literal[("", *OBJECTIVES)]
TaskKind = Literal[("", *TASKS)]
ClusterKind = Literal[("local", *CLUSTER_KINDS)]
DEMO_CRAWL = ["samples/crawl"]
DEFAULT_IMAGE = ClusterSpec.image
DEMO_LABELED = "vader"
"""The demo's inputs (the bundled crawl sample and its task): the only defaults that name the sample."""

# Options the flow wires itself (a stage's inputs and outputs): an override may not replace them.
WIRED = {
    "corpus": {"input", "output", "index", "index_wait", "snapshot"},
    "tokenizer": {"corpus", "output", "from_model"},
    "shards": {"corpus", "tokenizer", "output", "replay"},
    "pretrain": {"shards", "tokenizer", "output", "init_from", "resume"},
    "finetune": {"model", "output", "data", "train", "validation", "test", "config"},
    "distill": {"teacher", "shards", "output"},
    "evaluate": {"run", "output", "shards", "pretrain", "finetune", "distill", "skip", "previous"},
    "student_finetune": {"model", "output", "data", "train", "validation", "test", "config", "teacher"},
    "compress": {"model", "output", "method", "task_config"},
    "card": {"run", "output", "model", "name", "shards", "task_config", "probe_corpus", "pretrain", "finetune", "distill",
             "task_note"},
}


class ParamError(ValueError):
    """A flow parameter that would be unsafe or that no stage understands."""


PATH_PARAMS = ("runs_dir", "init_from", "labeled", "crawl", "dedup_index", "shards", "tokenizer", "crawl_root",
               "hostfile", "cluster_mount")
"""The parameters that name paths: each checked by inside_root (TrainParams._paths_inside_root), and trusted
when typed on `lmforge run`'s command line."""


def check_params(flow: str, params: dict[str, Any]) -> str | None:
    """None if `params` are valid for the flow ("dag", "train" or "refresh"), else the reason in one line
    (each field and what is wrong with it; an unknown name with the closest known one)."""
    model = FLOW_PARAMS[flow]
    unknown = sorted(set(params) - set(model.model_fields))
    if unknown:
        guess = closest(unknown[0], model.model_fields)
        return f"{unknown[0]} is not a parameter of the {flow} flow" + (f"; did you mean {guess}?" if guess else "")
    try:
        model(**params)
    except ValidationError as e:
        return "; ".join(f"{'.'.join(map(str, err['loc'])) or 'parameters'}: {err['msg'].removeprefix('Value error, ')}"
                         for err in e.errors())
    return None


def stage_config(stage: str) -> type:
    """The config class of the stage an override names: student_finetune is the finetune stage on the distilled
    student, the card the evaluate stage on several models."""
    return stage_table.stage_config({"student_finetune": "finetune", "card": "evaluate"}.get(stage, stage))


def stage_options(stage: str) -> set[str]:
    """The option names of a stage's config class (what `lmforge <stage> --help` lists); the card's also the
    flow's switch `probe`."""
    names = {f.name for f in dataclasses.fields(stage_config(stage))}
    return names | {"probe"} if stage == "card" else names


def check_overrides(overrides: dict[str, dict[str, Any]]) -> None:
    for stage, opts in overrides.items():
        if stage not in WIRED:
            raise ParamError(f"overrides: unknown stage {stage!r}; stages: {', '.join(WIRED)}")
        if not isinstance(opts, dict):
            raise ParamError(f"overrides[{stage!r}] must be an object of options, got {opts!r}")
        wired = sorted(set(opts) & WIRED[stage])
        if wired:
            raise ParamError(f"overrides[{stage!r}] may not set {', '.join(wired)}: the flow wires a stage's inputs and "
                             "outputs (use run_name, runs_dir, crawl, dedup_index, init_from instead)")
        unknown = sorted(set(opts) - stage_options(stage))
        if unknown:
            raise ParamError(f"overrides[{stage!r}]: {', '.join(unknown)} not an option of `lmforge {stage}` (see its "
                             "--help; options use underscores here). Beam options go in beam_args")
        cls = stage_config(stage)
        check_option_paths(cls, {k: v for k, v in opts.items() if k in cls.__dataclass_fields__}, f"overrides[{stage!r}]")


def refuse_secret(field: str, value: Any) -> None:
    """A credential in a parameter's value (`--s3_secret_access_key=...`, `--s3_session_token value`, a URL's
    user:password@) is refused: the Prefect server stores parameters and shows them on the run's page."""
    values = value if isinstance(value, (list, tuple)) else list(value.values()) if isinstance(value, dict) else [value]
    for i, v in enumerate(values):
        if isinstance(v, (list, tuple, dict)):
            refuse_secret(field, v)
            continue
        what = secret_in_value(str(v)) if isinstance(v, str) else None
        if what is None and isinstance(value, dict):
            key = list(value)[i]
            what = key if is_secret_name(str(key)) and v not in (None, "") else None
        if what:
            raise ParamError(f"{field}: {what} carries a credential, and a flow's parameters are stored by the Prefect "
                             "server and shown in the UI: pass it in the worker's environment (AWS_SECRET_ACCESS_KEY, "
                             "GOOGLE_APPLICATION_CREDENTIALS) or a Secret block named by credentials_block")


def refuse_control(field: str, value: Any) -> None:
    """A control character (newline, NUL, escape...) anywhere in a parameter's value, dictionary keys included, is
    refused: a path or name goes into launch scripts, manifests and log lines, where a newline starts a new line."""
    if isinstance(value, dict):
        for k, v in value.items():
            refuse_control(field, k)
            refuse_control(field, v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            refuse_control(field, v)
    elif isinstance(value, str):
        m = CONTROL.search(value)
        if m:
            raise ParamError(f"{field}: {value[:60]!r} holds a control character ({m.group()!r} at {m.start()})")


def check_values(values: Any) -> Any:
    """Every parameter's value checked by refuse_secret and refuse_control (a `mode="before"` validator of the
    parameter models)."""
    for field, value in (values.items() if isinstance(values, dict) else ()):
        refuse_secret(field, value)  # first: a refusal of a control character quotes the value
        refuse_control(field, value)
    return values


IMAGES_ENV = "LMFORGE_CLUSTER_IMAGES"
"""The worker's setting (never a form field): the container images a flow run may start on the cluster, separated
by commas, each a glob (`registry.example.com/lmforge:*`); unset: the default image alone."""


def image_allowed(image: str) -> bool:
    """`image` matches one of the worker's LMFORGE_CLUSTER_IMAGES globs (unset: it is the default image)."""
    allowed = [g.strip() for g in os.environ.get(IMAGES_ENV, "").split(",") if g.strip()]
    return any(fnmatch.fnmatchcase(image, g) for g in allowed) if allowed else image == DEFAULT_IMAGE


def trust_image(image: Any) -> None:
    """An image typed on this process's own command line (`lmforge run --param cluster_image=...`) is allowed in
    this process, as its paths are (trust_paths): the allow-list guards a shared worker from the form."""
    if isinstance(image, str) and image and not image_allowed(image):
        os.environ[IMAGES_ENV] = ",".join(filter(None, [os.environ.get(IMAGES_ENV) or DEFAULT_IMAGE,
                                                         image.replace(",", "")]))


def check_beam_args(args: list[str]) -> None:
    """Each `--name[=value]` must be a Beam pipeline option, or Beam would drop it with only a warning."""
    if not args:
        return  # no Beam import (and its warnings) in the flow process for nothing
    from pipelines.beam_options import beam_flags  # Beam only when there are Beam options to check

    for a in args:
        refuse_secret("beam_args", a)
    known = beam_flags(args)
    for i, a in enumerate(args):
        if not a.startswith("--"):
            if i > 0 and args[i - 1].startswith("--") and "=" not in args[i - 1]:
                continue  # the value of "--flag value"
            raise ParamError(f"beam_args: {a!r} is not a --flag")
        flag = a.split("=", 1)[0]
        if flag not in known:
            guess = closest(flag, known)
            raise ParamError(f"beam_args: {flag} is not a Beam pipeline option" + (f"; did you mean {guess}?" if guess else ""))


LabeledFileParams = create_model(
    "LabeledFileParams", __doc__="The fine-tune task's kind and its labelled file's columns (schemas/finetune.py "
    "LABELED_COLUMNS), each empty by default: the source's own, else the column's default.",
    task=(TaskKind, Field("", description="fine-tune task kind for a data file (empty: the source's, else "
                          "classification)")),
    **{c.option: (str, Field("", description=c.form)) for c in LABELED_COLUMNS})


class TrainParams(LabeledFileParams):
    """What every flow trains and fine-tunes (the Prefect form); every field has a safe default."""

    run_name: str = Field("demo", pattern=NAME_PATTERN, description="runs/{run_name}/ receives one folder per stage "
                          "(letters, digits, '.', '_', '-')")
    runs_dir: str = Field("runs", description="parent folder of all runs (inside the data root)")
    preset: Preset = Field("demo", description="stage sizes: demo (bundled sample, about 7 minutes), full (the "
                           "same sample, twice the training, about 10 minutes) or tiny (tests)")
    model: str = Field("", description="pretraining model preset (empty: the preset's; e.g. bert_mini; see "
                       "`lmforge pretrain --help`)")
    init_from: str = Field("", description="a Hugging Face model directory to start from: the tokenizer stage adopts its "
                           "tokenizer and pretraining continues from its weights. Empty: train both from scratch")
    nproc: int = Field(2, ge=1, le=64, description="pretraining processes per node (torchrun --nproc_per_node)")
    nnodes: int = Field(1, ge=1, le=1024, description="pretraining nodes. With more than one and cluster local, this "
                        "worker is one of them and the flow log gives the command each other node runs; with a cluster "
                        "kind, the job asks for this many nodes. All share the runs folder's file system")
    rdzv_endpoint: str = Field("", description="HOST:PORT of the c10d rendezvous every node reaches (with nnodes > 1)")
    hostfile: str = Field("", description="a DeepSpeed hostfile ('HOST slots=N' per node) instead of nnodes and a "
                          "rendezvous: this worker is node 0 (the first host, also the master address) and the flow "
                          "log gives the command each other node runs")
    cluster: ClusterKind = Field("local", description="where pretraining runs: local (torchrun on this worker, with "
                                 "nnodes/rdzv_endpoint/hostfile as above), or a job the flow submits and follows to its "
                                 "end on nnodes (>= 2) nodes: k8s (an indexed Job and a headless Service), pytorchjob "
                                 "(a Kubeflow PyTorchJob) or slurm (sbatch); the run folder, shards and tokenizer must "
                                 "be on a file system the nodes share (training/launch/cluster.py)")
    cluster_image: str = Field(DEFAULT_IMAGE, description="k8s/pytorchjob: the container image built from "
                               "infra/docker/Dockerfile; one of the worker's LMFORGE_CLUSTER_IMAGES (unset: "
                               f"{DEFAULT_IMAGE} alone)")
    cluster_pvc: str = Field(ClusterSpec.shared_pvc, description="k8s/pytorchjob: the ReadWriteMany claim mounted in every pod "
                             "at cluster_mount")
    # `lmforge pretrain --mount` (ClusterSpec.mount, /shared), which cluster_options passes it to: the launcher's
    # user types paths under /shared, but a flow's paths are this worker's, so the claim must be mounted where they
    # already lie, and the default is the worker's data root (cluster_mount_dir), not /shared.
    cluster_mount: str = Field("", description="k8s/pytorchjob: where the claim is mounted, in the pods and on this "
                               "worker alike (so the run's paths mean the same in both); the runs folder, shards, "
                               "tokenizer and init_from must be under it. Empty: the worker's data root")
    cluster_namespace: str = Field("", description="k8s/pytorchjob: the namespace (empty: kubectl's current)")
    cluster_gpus: int = Field(0, ge=0, le=64, description="cluster jobs: GPUs per node (0: a CPU job)")
    labeled: str = Field("", description="the fine-tune task: a labelled data file of yours (JSONL/CSV/Parquet with a "
                         "text and a label column; a split column is optional), a known labelled source (`lmforge "
                         "labeled list`) or a `lmforge finetune --config` JSON file. Empty: vader for the demo (the "
                         "bundled crawl), else no fine-tune task (the card says so)")
    stage_timeout_minutes: float = Field(240.0, gt=0, description="a stage still running after this long is stopped "
                                         "and its task fails")
    overrides: dict[str, dict[str, Any]] = Field(default_factory=dict, description="per-stage option overrides, e.g. "
                                                 "{'pretrain': {'steps': 50}}; a stage's inputs and outputs are wired "
                                                 "by the flow and cannot be overridden")
    credentials_block: str = Field("", pattern=r"^[a-z0-9-]*$", description="the name of a Prefect Secret block holding "
                                   "a JSON object of environment variables the stages need (object-store keys, e.g. "
                                   "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY). Credentials never go in a parameter: "
                                   "the server stores parameters and shows them here (flows/credentials.py)")

    @model_validator(mode="before")
    @classmethod
    def _checked_values(cls, values: Any) -> Any:
        return check_values(values)

    @model_validator(mode="after")
    def _nodes(self):
        from training.launch.torchrun import Nodes

        if self.cluster != "local":
            return self._cluster()
        try:
            if self.hostfile:
                Nodes(hostfile=self.hostfile, node_rank=0)
            else:
                Nodes(self.nnodes, self.rdzv_endpoint)
        except ValueError as e:
            raise ParamError(str(e)) from None
        return self

    def _cluster(self):
        """A cluster job: 2+ nodes the cluster places (no rendezvous or hostfile of ours), paths it can see."""
        if self.hostfile or self.rdzv_endpoint:
            raise ParamError(f"cluster {self.cluster}: the cluster places the nodes; leave hostfile and rdzv_endpoint empty")
        try:
            ClusterSpec(self.nnodes, image=self.cluster_image, mount=self.cluster_mount_dir(),
                        gpus_per_node=self.cluster_gpus)
        except ValueError as e:
            raise ParamError(f"cluster {self.cluster}: {e}") from None
        if self.cluster != "slurm" and not image_allowed(self.cluster_image):
            raise ParamError(f"cluster_image {self.cluster_image}: not among the images this worker runs "
                             f"({os.environ.get(IMAGES_ENV) or self.model_fields['cluster_image'].default}); the "
                             f"operator lists them in the worker's {IMAGES_ENV} (docs/SECURITY.md)")
        if self.cluster != "slurm":
            mount = Path(self.cluster_mount_dir())
            paths = {"runs_dir": self.run_dir, "init_from": self.init_from, "shards": getattr(self, "shards", ""),
                     "tokenizer": getattr(self, "tokenizer", "")}
            for name, value in paths.items():
                path = Path(value).resolve() if value else None
                if path is not None and path != mount and mount not in path.parents:
                    raise ParamError(f"{name} {value} is not under cluster_mount {mount}: the pods would not see it")
        return self

    def cluster_mount_dir(self) -> str:
        """`lmforge pretrain --mount` for this run: cluster_mount, else the worker's first data root."""
        return str(Path(self.cluster_mount or data_roots()[0]).resolve())

    @field_validator("run_name")
    @classmethod
    def _not_dots(cls, v: str) -> str:
        if v in (".", ".."):
            raise ParamError(f"run_name {v!r} names no folder of its own")
        return v

    @field_validator(*PATH_PARAMS, check_fields=False)
    @classmethod
    def _paths_inside_root(cls, v: str | list[str], info) -> str | list[str]:
        """Every path parameter of every flow model, by one rule (flows/data_root.py). Empty is checked as the
        working directory it would mean, unless the field's default is empty too (no model, no task, no hostfile:
        the flow's own choice); a known labelled source is a name, not a path."""
        from pipelines.labeled.registry import SOURCES

        name = info.field_name
        if (name == "labeled" and v in SOURCES) or (v == "" and cls.model_fields[name].default == ""):
            return v
        for value in [v] if isinstance(v, str) else v:
            inside_root(value, name)
        return v

    @model_validator(mode="after")
    def _run_folder_inside_root(self):
        """The run's own folder as well: a symlink `<runs_dir>/<run_name>` would take every stage's writes elsewhere,
        and a folder holding code (refuse_code_folder) would have its stage-named folders replaced.
        Checked when given, as the field validators are (the flows give every field; `DagParams()` gives none)."""
        if {"runs_dir", "run_name"} & self.model_fields_set:
            inside_root(str(Path(self.runs_dir, self.run_name)), "run_name")
            refuse_code_folder(str(Path(self.runs_dir, self.run_name)), "run_name")
        return self

    @field_validator("overrides")
    @classmethod
    def _overrides(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        check_overrides(v)
        return v

    @property
    def run_dir(self) -> Path:
        return Path(self.runs_dir, self.run_name).resolve()

    def stage_options(self) -> dict[str, dict[str, Any]]:
        """The preset's per-stage options with this run's choices and overrides applied."""
        opts = with_objective(RUN_PRESETS[self.preset](), getattr(self, "objective", ""))
        for key, stage, option in (("tokenizer_model", "tokenizer", "model"), ("model", "pretrain", "model"),
                                   *((k, "finetune", k) for k in LABELED_FILE_OPTIONS)):
            if getattr(self, key, ""):
                opts[stage][option] = getattr(self, key)
        for stage, extra in self.overrides.items():
            opts.setdefault(stage, {}).update(extra)
        return opts


class CorpusParams(BaseModel):
    """The data stages' choices, shared by the whole DAG and the refresh."""

    tokenizer_model: TokenizerKind = Field(
        "", description="tokenizer kind (empty: the preset's, WordPiece); ignored when a model's tokenizer is adopted")
    objective: Objective = Field(
        "", description="what the model learns, and so which model: mlm (empty, the default), whole_word or span "
        "train a BERT; causal a Llama-style decoder (LlamaForCausalLM; its tokenizer byte-level BPE unless "
        "tokenizer_model says), fine-tuned as a classifier on its last token, distilled DistilGPT2's way, scored "
        "by next-token loss and perplexity; t5_span a T5 (T5ForConditionalGeneration, span corruption; its "
        "tokenizer unigram with sentinels), fine-tuned as a classifier, distilled into half of each stack, scored "
        "by span-corruption loss")
    languages: list[str] = Field(["auto"], min_length=1, description="languages the corpus keeps: ISO 639-1 codes "
                                 "(e.g. ['fr', 'de']), or ['auto'] (default): every language with at least 5% of the "
                                 "documents that pass cleaning, or 1,000 of them; the corpus report and the card name "
                                 "the languages kept and what each lost")
    index_wait: float = Field(3600.0, ge=0, description="seconds the corpus stage waits for another run holding the "
                              "band index before it fails")
    decontaminate: bool = Field(True, description="check the crawl against the validation and test splits of the "
                                "fine-tune task (`labeled`: a known source, a labelled data file or a finetune config, "
                                "each prepared as the labeled stage before the corpus): pages sharing a 12-word n-gram "
                                "with an item are dropped, counted per split on the corpus report and the card")
    beam_args: list[str] = Field([], description="Beam pipeline options for the corpus and shards stages, passed "
                                 "as given, e.g. ['--direct_num_workers=2']")

    @model_validator(mode="before")
    @classmethod
    def _checked_values(cls, values: Any) -> Any:
        return check_values(values)

    @field_validator("languages")
    @classmethod
    def _languages(cls, v: list[str]) -> list[str]:
        v = [x.strip().lower() for x in v]
        if v != ["auto"] and not all(len(x) == 2 and x.isascii() and x.isalpha() for x in v):
            raise ParamError(f"languages: ISO 639-1 codes (e.g. fr de) or auto alone, got {' '.join(v)}")
        return v

    @field_validator("beam_args")
    @classmethod
    def _beam(cls, v: list[str]) -> list[str]:
        check_beam_args(v)
        check_beam_paths(v)
        return v


class DagParams(CorpusParams, TrainParams):
    """The whole DAG: crawl in, evaluated and distilled model out."""

    crawl: list[str] = Field(DEMO_CRAWL, min_length=1,
                             description="crawl inputs: files, directories or globs (WARC/WET/JSONL/Parquet). The "
                             "default is the bundled sample: the demo")
    dedup_index: str = Field("", description="MinHash band index shared by recurring corpus refreshes: each run drops "
                             "what earlier runs kept and adds its own. Empty: a fresh {runs_dir}/{run_name}/minhash_index")

    @model_validator(mode="after")
    def _demo_task(self):
        """The demo's task is the demo's alone: a run on another crawl gets no fine-tune task it did not ask for."""
        if not self.labeled and self.is_demo:
            self.labeled = DEMO_LABELED
        return self

    @property
    def is_demo(self) -> bool:
        """A run of the bundled sample crawl."""
        return [str(Path(c)) for c in self.crawl] == DEMO_CRAWL


class TrainOnlyParams(TrainParams):
    """Training from existing shards: pretrain, fine-tune, distil, evaluate."""

    shards: str = Field("runs/demo/shards", description="a finished shards stage directory")
    tokenizer: str = Field("runs/demo/tokenizer", description="the tokenizer stage directory the shards were encoded with")


class RefreshParams(CorpusParams, TrainParams):
    """A recurring refresh: the next crawl snapshot through the corpus stage against the shared band index,
    then training continued from the previous snapshot's model."""

    run_name: str = Field("weekly", pattern=NAME_PATTERN, description="runs/{run_name}/{snapshot}/ receives each "
                          "snapshot's stages; runs/{run_name}/latest points at the newest finished one")
    crawl_root: str = Field("crawl", description="one folder per crawl snapshot (e.g. CC-MAIN-2026-40/), taken in name order")
    snapshot: str = Field("", description="the snapshot folder to take (empty: the oldest one not yet in the band index)")
    dedup_index: str = Field("state/minhash_index", description="the band index every refresh shares (outside runs/, "
                             "so `make clean` keeps it)")
    replay_fraction: float = Field(0.0, ge=0.0, le=1.0, description="fraction of the earlier snapshots' kept pages "
                                   "mixed into the new shards (a hash sample by page id), so continued pretraining "
                                   "does not see only the new pages; 0: none")

    @field_validator("snapshot")
    @classmethod
    def _snapshot_name(cls, v: str) -> str:
        import re

        if v and (not re.match(NAME_PATTERN, v) or v in (".", "..")):
            raise ParamError(f"snapshot {v!r}: a folder name under crawl_root (letters, digits, '.', '_', '-')")
        return v


FLOW_PARAMS: dict[str, type[BaseModel]] = {"dag": DagParams, "train": TrainOnlyParams, "refresh": RefreshParams}
"""Each flow's parameters, by the name `lmforge run --flow` takes."""
