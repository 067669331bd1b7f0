"""One redaction rule for everything lmforge writes or prints: manifests, log lines, flow keys, artifacts.

    redact_args(["--runner=DirectRunner", "--s3_secret_access_key=abc"])
    # ['--runner=DirectRunner', '--s3_secret_access_key=***']
    redact_text("fetch https://ann:pw@host/x?X-Amz-Signature=f00")
    # 'fetch https://***@host/x?X-Amz-Signature=***'

What counts as a credential, by name (an option, a mapping key, an environment variable, a URL query
parameter; `-` and `_` alike, any case):
- a name with a word `secret`, `password`, `passwd`, `passphrase`, `credential(s)`, `apikey`, `signature`;
- a name whose last word is `token` after a word saying what it authenticates (`s3_session_token`, `hf_token`,
  `GITHUB_TOKEN`, `X-Amz-Security-Token`), or `token` alone: `bytes_per_token`, a tokenizer's `pad_token`,
  `mask_token_bits` or `tokens_column` are not credentials (a false match would mask data in a manifest);
- a name ending in the words of a key or connection name (`s3_access_key_id`, `api_key`, `account_key`,
  AZURE_STORAGE_KEY, OPENAI_KEY, KAGGLE_KEY, `azure_connection_string`, PREFECT_API_AUTH_STRING, Azure SAS `sig`);
- PGPASSWORD; `pwd` after another word (MYSQL_PWD: PWD alone is the working directory); `pass` after what it opens
  (DB_PASS, SMTP_PASS); `pat` after a code host (GH_PAT).
Its value is written as `***`. A URL's `user:password@` is written `***@`. And any value of a credential
held in this process's environment (AWS_SECRET_ACCESS_KEY, a Prefect Secret block's variables once loaded)
(and of the variables LMFORGE_SECRET_VARS names)
is masked wherever it appears in a line: the net under the rule, for a library that echoes it.

The way to pass credentials is the environment (boto's chain, GOOGLE_APPLICATION_CREDENTIALS) or a
Prefect Secret block named by the flows' `credentials_block`; a flow parameter that carries one is
refused (flows/params.py), since the Prefect server stores parameters and shows them in the UI.
"""
from __future__ import annotations

import os
import re
from typing import Any

MASK = "***"
SECRET_VARS_ENV = "LMFORGE_SECRET_VARS"
"""Comma-separated names of further environment variables whose values are credentials (flows/credentials.py)."""

_WORDS = {"secret", "password", "passwd", "passphrase", "credential", "credentials", "apikey", "signature", "pgpassword",
          "pgpass"}
# `pwd` and `pass` are credentials only after a word saying what they open (MYSQL_PWD, DB_PASS): PWD alone is the
# working directory, whose value would otherwise be masked in every line; `pat` after a code host's name (GH_PAT)
_SHORT_SECRETS = {"pwd": None, "pass": {"db", "database", "sql", "mysql", "pg", "postgres", "redis", "smtp", "ftp",
                                        "ldap", "mongo", "user", "admin", "root", "proxy", "rabbitmq", "amqp"},
                  "pat": {"gh", "github", "gitlab", "ado", "azure", "devops", "bitbucket"}}
# a token that is a credential is named by what it authenticates: `bytes_per_token`, `pad_token` and
# `first_token` are not credentials, so the word before `token` must say so (or `token` stands alone)
_TOKEN_KINDS = {"session", "access", "auth", "api", "hf", "sas", "bearer", "refresh", "id", "security", "oauth", "github",
                "gh", "gitlab", "slack", "personal", "service", "client", "webhook", "registry", "npm", "pypi", "vault",
                "jwt", "csrf", "x", "secret", "private", "prefect", "huggingface", "wandb", "hub"}
_ENDINGS = (("access", "key", "id"), ("access", "key"), ("api", "key"), ("private", "key"), ("account", "key"),
            ("storage", "key"), ("openai", "key"), ("kaggle", "key"), ("anthropic", "key"), ("signing", "key"),
            ("encryption", "key"), ("master", "key"), ("license", "key"), ("connection", "string"), ("auth", "string"),
            ("sas",), ("sig",))


def is_secret_name(name: str) -> bool:
    """Whether an option, key or variable of this name holds a credential (the rule in the module doc)."""
    words = [w for w in name.strip().lstrip("-").lower().replace("-", "_").split("_") if w]
    if not words:
        return False
    if _WORDS.intersection(words):
        return True
    if words[-1] == "token":
        return len(words) == 1 or words[-2] in _TOKEN_KINDS
    if words[-1] in _SHORT_SECRETS and len(words) > 1:
        after = _SHORT_SECRETS[words[-1]]
        return after is None or words[-2] in after
    return any(tuple(words[-len(e):]) == e for e in _ENDINGS)


# scheme://user:password@ or scheme://token@ (userinfo up to the first @ before the path)
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<info>[^/@\s?#]+)@")
# name=value (options, query parameters, KEY=VALUE lines) and "name": "value" (JSON); then --name value
_ASSIGN = re.compile(r"(?<![\w-])(?P<name>-{0,2}[A-Za-z][\w-]*)(?P<sep>=|\"?:\s*\")(?P<value>[^\s&\"',;]+)")
_FLAG_VALUE = re.compile(r"(?<![\w-])(?P<name>--?[A-Za-z][\w-]*)(?P<sep>\s+)(?P<value>[^-\s]\S*)")


def redact_url(value: str) -> str:
    return _USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", value)


def secret_values(environ: dict[str, str] | None = None) -> list[str]:
    """Values of the credentials in the environment (8 characters or more, so `***`-ing them is safe)."""
    env = os.environ if environ is None else environ
    named = set(env.get(SECRET_VARS_ENV, "").split(","))
    return sorted({v for k, v in env.items() if (is_secret_name(k) or k in named) and len(v) >= 8}, key=len, reverse=True)


def redact_text(line: str, environ: dict[str, str] | None = None) -> str:
    """A log line or any free text with every credential in it masked."""
    def assign(m: re.Match) -> str:
        return f"{m['name']}{m['sep']}{MASK}" if is_secret_name(m["name"]) else m.group(0)

    out = _FLAG_VALUE.sub(assign, _ASSIGN.sub(assign, redact_url(line)))
    for value in secret_values(environ):
        out = out.replace(value, MASK)
    return out


def redact_args(args: list[str]) -> list[str]:
    """A command line (`--name=value` or `--name value`) with credential values masked."""
    out: list[str] = []
    for i, a in enumerate(map(str, args)):
        name, eq, _ = a.partition("=")
        if a.startswith("-") and eq and is_secret_name(name):
            out.append(f"{name}={MASK}")
        elif i and str(args[i - 1]).startswith("-") and "=" not in str(args[i - 1]) and is_secret_name(str(args[i - 1])):
            out.append(MASK)
        else:
            out.append(redact_text(a))
    return out


def redact(obj: Any) -> Any:
    """Options, parameters or a manifest's config with credential values masked, keys kept."""
    if isinstance(obj, dict):
        return {k: (MASK if is_secret_name(str(k)) and obj[k] not in (None, "") else redact(v)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        items = [str(x) for x in obj] if all(isinstance(x, str) for x in obj) else None
        return redact_args(items) if items and any(x.startswith("-") for x in items) else type(obj)(map(redact, obj))
    if isinstance(obj, str):
        return redact_text(obj)
    return obj


def secret_in_value(value: str) -> str | None:
    """What in a parameter's value carries a credential (`--s3_secret_access_key`, a URL's user:password),
    or None: for refusing it where a value would be stored (flow parameters)."""
    name, eq, _ = value.partition("=")
    if value.startswith("-") and is_secret_name(name):
        return name
    if _USERINFO.search(value):
        return "a URL's user:password@"
    return None
