"""The one redaction rule (common/redact.py) and where it is enforced: stage logs, manifests, flow parameters."""
from __future__ import annotations

import json
import sys

import pytest

from common.redact import MASK, is_secret_name, redact, redact_args, redact_text, secret_in_value


@pytest.mark.parametrize("name", ["--s3_secret_access_key", "s3_session_token", "s3_access_key_id", "hf_token",
                                  "X-Amz-Security-Token", "X-Amz-Signature", "azure_connection_string", "db-password",
                                  "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "api_key", "client_credentials", "sig",
                                  # issue 50's: names the rule missed
                                  "PGPASSWORD", "MYSQL_PWD", "DB_PASS", "AZURE_STORAGE_KEY", "OPENAI_KEY", "KAGGLE_KEY",
                                  "GH_PAT"])
def test_credential_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["tokenizer", "tokens_column", "max_tokens", "mask_token_bits", "pad_token",
                                  "mask_token", "s3_endpoint_url", "key_column", "cache_dir", "runner",
                                  "bytes_per_token", "flops_per_token", "first_token", "kansas", "key",
                                  "PWD", "OLDPWD", "pass", "first_pass", "pat", "exact_key", "sort_key", "artifact_key"])
def test_names_that_are_not_credentials(name):
    assert not is_secret_name(name)


def test_command_lines_both_forms_and_urls():
    args = ["--runner=DirectRunner", "--s3_secret_access_key=abc", "--s3_session_token", "tok", "--tokenizer", "x",
            "--s3_endpoint_url=http://ann:pw@127.0.0.1:9000"]
    assert redact_args(args) == ["--runner=DirectRunner", f"--s3_secret_access_key={MASK}", "--s3_session_token", MASK,
                                 "--tokenizer", "x", f"--s3_endpoint_url=http://{MASK}@127.0.0.1:9000"]


def test_free_text_json_and_environment_values():
    line = 'beam args: --s3_access_key_id=AKIA1 fetch https://u:p@h/x?X-Amz-Signature=f00&a=1 {"hf_token": "hf_x"}'
    out = redact_text(line, {"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI", "MY_VAR": "notasecretvalue"})
    assert "AKIA1" not in out and "u:p@" not in out and "f00" not in out and "hf_x" not in out and "a=1" in out
    env = {"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI", "LMFORGE_SECRET_VARS": "MINIO_USER", "MINIO_USER": "minio-admin-1"}
    assert redact_text("key wJalrXUtnFEMI user minio-admin-1 the token was fine", env) == \
        f"key {MASK} user {MASK} the token was fine"


def test_mappings_keep_keys_and_special_tokens():
    cfg = {"beam_args": ["--s3_secret_access_key=abc"], "hf_token": "x", "pad_token": "[PAD]", "steps": 3,
           "nested": [{"password": "pw"}]}
    assert redact(cfg) == {"beam_args": [f"--s3_secret_access_key={MASK}"], "hf_token": MASK, "pad_token": "[PAD]",
                           "steps": 3, "nested": [{"password": MASK}]}
    assert secret_in_value("--s3_secret_access_key=x") == "--s3_secret_access_key"
    assert secret_in_value("s3://bucket/key") is None and secret_in_value("https://a:b@host/x")


def test_a_manifest_is_written_redacted(tmp_path):
    from schemas.manifest import Manifest, write_manifest

    write_manifest(tmp_path, Manifest(stage="corpus", config={"s3_secret_access_key": "abc123456"},
                                      extra={"beam_args": ["--s3_session_token=abc123456"]}))
    text = (tmp_path / "manifest.json").read_text()
    assert "abc123456" not in text and json.loads(text)["config"]["s3_secret_access_key"] == MASK


def test_a_stage_that_echoes_a_credential_is_masked_in_its_log_and_the_flow_log(tmp_path, monkeypatch, capsys):
    from flows.stages.runner import run_logged

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "planted-env-secret-1")
    echo = ("import os, sys; print('options --s3_secret_access_key=planted-flag-2'); "
            "print('env', os.environ['AWS_SECRET_ACCESS_KEY'], file=sys.stderr)")
    assert run_logged([sys.executable, "-c", echo], tmp_path / "x.log", "x") == 0
    log = (tmp_path / "x.log").read_text()
    assert "planted" not in log + capsys.readouterr().out and log.count(MASK) == 2


@pytest.mark.parametrize("params", [{"beam_args": ["--s3_secret_access_key=abc"]},
                                    {"beam_args": ["--s3_session_token", "abc"]},
                                    {"crawl": ["https://ann:pw@example.org/crawl.warc.gz"]},
                                    {"overrides": {"pretrain": {"hf_token": "abc"}}}])
def test_a_flow_parameter_carrying_a_credential_is_refused(params):
    from flows.params import check_params

    problem = check_params("dag", params)
    assert problem and "carries a credential" in problem and "credentials_block" in problem
    assert "abc" not in problem and "pw" not in problem
