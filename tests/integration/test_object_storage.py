"""The corpus and shards stages on object storage: an S3 endpoint on 127.0.0.1 (moto's standalone
server), reached through Beam's file systems with --s3_endpoint_url.

- outputs and the band index on s3:// (two snapshots, the second a refresh against the index on
  S3), a tokenizer trained from that corpus, then shards from it to s3://: every file byte-identical
  to the same run on a local disk;
- inputs read from s3:// (a prefix and a glob): the same documents and decisions as from local
  files (only the `source` column differs: it names where each record was read);
- the stage lock on object storage is a lease object: a second run is refused naming the holder.
"""
from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.test_corpus_incremental import TINY, _split_warc

BUCKET = "lmforge-test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3():
    """moto's S3 server on 127.0.0.1 for this module; yields the Beam arguments that reach it."""
    boto3 = pytest.importorskip("boto3")
    pytest.importorskip("moto")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    creds = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}
    try:
        client = boto3.client("s3", endpoint_url=endpoint, **creds)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.create_bucket(Bucket=BUCKET)
                break
            except Exception:  # noqa: BLE001 - the server is still starting
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.3)
        yield {"client": client,
               "args": [f"--s3_endpoint_url={endpoint}", "--s3_access_key_id=testing", "--s3_secret_access_key=testing",
                        "--s3_region_name=us-east-1"]}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def _objects(client, prefix: str) -> dict[str, str]:
    """Relative key -> sha256 of every object under s3://BUCKET/prefix/."""
    out, token = {}, None
    while True:
        page = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix + "/", **({"ContinuationToken": token} if token else {}))
        for o in page.get("Contents", []):
            body = client.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
            out[o["Key"][len(prefix) + 1:]] = hashlib.sha256(body).hexdigest()
        if not page.get("IsTruncated"):
            return out
        token = page["NextContinuationToken"]


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.name.startswith(".")}


def _without_manifest(tree: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in tree.items() if k != "manifest.json"}  # timings, paths and Beam arguments


@pytest.mark.slow
def test_corpus_refresh_and_shards_on_s3_are_byte_identical_to_local(tmp_path, s3):
    from pipelines.corpus.config import CorpusConfig
    from pipelines.corpus.stage import run as corpus
    from pipelines.shards.mask_config import MaskConfig
    from pipelines.shards.stage import ShardsConfig
    from pipelines.shards.stage import run as shards
    from pipelines.tokenizer import TokenizerConfig
    from pipelines.tokenizer import run as run_tokenizer
    from schemas.manifest import read_manifest, verify_outputs

    snap1, snap2 = tmp_path / "snap1", tmp_path / "snap2"
    _split_warc(TINY / "tiny.warc.gz", snap1 / "crawl.warc.gz", snap2 / "crawl.warc.gz")
    wet = next(TINY.glob("*.wet"))
    (snap1 / wet.name).write_bytes(wet.read_bytes())
    local, remote = tmp_path / "local", f"s3://{BUCKET}/run"
    for root, args in ((str(local), []), (remote, s3["args"])):
        for name, snap in (("s1", snap1), ("s2", snap2)):
            corpus(CorpusConfig(input=[str(snap)], output=f"{root}/{name}", index=f"{root}/index", snapshot=name), args)
    m2 = read_manifest(f"{remote}/s2")  # the refresh read the first generation from S3 and found duplicates in it
    assert m2["extra"]["index"]["read"] == ["gen-00001"] and m2["extra"]["index"]["wrote"] == "gen-00002"
    assert m2["counts"]["duplicates_by_generation"].get("gen-00001", 0) > 0
    for name in ("s1", "s2", "index"):
        want, got = _without_manifest(_files(local / name)), _without_manifest(_objects(s3["client"], f"run/{name}"))
        assert got == want and len(want) > 3, name
    assert not any(k.startswith(".lock") for k in _objects(s3["client"], "run/s1")), "the stage lease was not released"
    verify_outputs(f"{remote}/s2")  # the manifest's sha256s hold for the objects

    tok, tok_s3 = (run_tokenizer(TokenizerConfig(corpus=c, output=str(tmp_path / name), model="wordpiece", vocab_size=400,
                                                 min_frequency=1)) for c, name in ((str(local / "s1"), "tok"), (f"{remote}/s1", "tok-s3")))
    assert (tok / "tokenizer.json").read_bytes() == (tok_s3 / "tokenizer.json").read_bytes()  # the tokenizer reads S3 too
    for root, args in ((str(local), []), (remote, s3["args"])):
        shards(ShardsConfig(corpus=f"{root}/s1", tokenizer=str(tok), output=f"{root}/shards", seq_len=32, num_shards=2,
                            valid_per_mille=200, mask=MaskConfig(num_variants=2)), args)
    want, got = _without_manifest(_files(local / "shards")), _without_manifest(_objects(s3["client"], "run/shards"))
    assert got == want and any(k.startswith("train/") for k in want)
    assert read_manifest(f"{remote}/shards")["counts"] == read_manifest(local / "shards")["counts"]


@pytest.mark.slow
def test_inputs_read_from_s3_give_the_same_documents(tmp_path, s3):
    import pyarrow.parquet as pq

    from pipelines.corpus.config import CorpusConfig
    from pipelines.corpus.stage import run as corpus

    wet = next(TINY.glob("*.wet"))
    for f in (TINY / "tiny.warc.gz", wet, TINY / "broken.warc.gz"):
        s3["client"].put_object(Bucket=BUCKET, Key=f"crawl/{f.name}", Body=f.read_bytes())
    corpus(CorpusConfig(input=[str(TINY / "tiny.warc.gz"), str(wet), str(TINY / "broken.warc.gz")],
                        output=str(tmp_path / "from-disk")))
    corpus(CorpusConfig(input=[f"s3://{BUCKET}/crawl/*.warc.gz", f"s3://{BUCKET}/crawl/{wet.name}"],
                        output=str(tmp_path / "from-s3")), s3["args"])

    def rows(out: Path) -> dict[str, list[dict]]:
        got = {}
        for f in sorted(out.rglob("*.parquet")):
            t = pq.read_table(f).to_pylist()
            for r in t:
                if "source" in r:
                    r["source"] = os.path.basename(r["source"])
            got[str(f.relative_to(out))] = t
        return got

    disk, s3_rows = rows(tmp_path / "from-disk"), rows(tmp_path / "from-s3")
    assert disk == s3_rows and sum(len(v) for v in disk.values()) > 10
    def quarantined(out: Path, prefix: str) -> list[str]:  # sharded by where a record was read: compare the rows
        return sorted(line.replace(prefix, "") for f in (out / "quarantine").glob("*.jsonl") for line in f.read_text().splitlines())

    q_disk, q_s3 = quarantined(tmp_path / "from-disk", str(TINY) + "/"), quarantined(tmp_path / "from-s3", f"s3://{BUCKET}/crawl/")
    assert q_disk == q_s3 and any("broken.warc.gz" in q for q in q_s3)  # the damaged file is quarantined from S3 too

    with pytest.raises(FileNotFoundError, match="matches no file"):
        corpus(CorpusConfig(input=[f"s3://{BUCKET}/nothing-here/"], output=str(tmp_path / "none")), s3["args"])


@pytest.mark.slow
def test_stage_lock_on_s3_is_a_lease(s3):
    from schemas import storage
    from schemas.manifest import StageBusy, stage_lock

    storage.configure(s3["args"])
    folder = f"s3://{BUCKET}/locked-stage"
    with stage_lock(folder, what="the first run"):
        leases = [k for k in _objects(s3["client"], "locked-stage") if k.startswith(".lock/")]
        assert len(leases) == 1
        with pytest.raises(StageBusy, match="another process is writing .*the first run.*delete s3://"):
            with stage_lock(folder, what="the second run"):
                pass
    assert _objects(s3["client"], "locked-stage") == {}
    with stage_lock(folder, what="a third run"):  # free again once released
        pass
