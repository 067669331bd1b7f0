"""Credentials for a flow's stages, from a Prefect Secret block the run names, never from a parameter value.

A flow's parameters are stored by the Prefect server and shown on the run's Parameters tab, so a key
given as one (`beam_args=["--s3_secret_access_key=..."]`) is refused (flows/params.py). Instead:
- the worker's environment: boto's chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
  ~/.aws), GOOGLE_APPLICATION_CREDENTIALS, Azure's; the stages inherit it and Beam's S3/GCS clients read it
  when no option names a key;
- or `credentials_block`: the name of a Prefect Secret block holding a JSON object of environment
  variables, made once by whoever owns the keys:

      from prefect.blocks.system import Secret
      Secret(value={"AWS_ACCESS_KEY_ID": "...", "AWS_SECRET_ACCESS_KEY": "..."}).save("lmforge-s3")

  The flow loads it into its own process's environment (a worker runs each flow run in a process of its
  own; `lmforge run` is one process per run) before the first stage, and the stages inherit it. The
  variables' names are logged, their values never: they are added to LMFORGE_SECRET_VARS, so the
  redaction rule (common/redact.py) masks them in every log line and manifest even when a name does not
  look like a credential.
"""
from __future__ import annotations

import os
import re

from common.redact import SECRET_VARS_ENV
from flows.params import ParamError

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def use_credentials(block: str) -> list[str]:
    """Load the Secret block named `block` into this process's environment; the variable names it set."""
    if not block:
        return []
    from prefect.blocks.system import Secret

    try:
        value = Secret.load(block).get()
    except ValueError as e:  # Prefect: "Unable to find block document named ..."
        raise ParamError(f"credentials_block: no Secret block named {block!r} on this Prefect server ({e}); make one "
                         "with prefect.blocks.system.Secret(value={...}).save(NAME)") from None
    if not isinstance(value, dict) or not all(isinstance(k, str) and ENV_NAME.match(k) and isinstance(v, str)
                                              for k, v in value.items()):
        raise ParamError(f"credentials_block: Secret block {block!r} must hold a JSON object of environment variables "
                         "(names to string values), e.g. {\"AWS_ACCESS_KEY_ID\": \"...\", \"AWS_SECRET_ACCESS_KEY\": \"...\"}")
    names = sorted(value)
    known = [n for n in os.environ.get(SECRET_VARS_ENV, "").split(",") if n]
    os.environ[SECRET_VARS_ENV] = ",".join(dict.fromkeys([*known, *names]))  # first: masked before anything echoes them
    os.environ.update(value)
    print(f"credentials: {', '.join(names)} from Secret block {block!r} (values never logged)", flush=True)
    return names
