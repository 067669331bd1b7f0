"""Tell someone when a refresh fails: a Prefect automation that calls a webhook block.

    PREFECT_API_URL=http://127.0.0.1:4200/api lmforge alerts --webhook https://hooks.example.com/T000/B000

creates (or updates) the Webhook block `lmforge-refresh-failed` and the automation "lmforge: refresh
failed", which posts JSON to that URL whenever a flow run of `lmforge-refresh` ends Failed, Crashed
or TimedOut: `{"text": ..., "flow_run": NAME, "flow_run_id": ID, "state": STATE}`. Slack, Mattermost
and most chat webhooks accept that body. Needs a Prefect server (the automation runs there).
"""
from __future__ import annotations

import argparse

BLOCK_NAME = "lmforge-refresh-failed"
AUTOMATION_NAME = "lmforge: refresh failed"
FLOW_NAME = "lmforge-refresh"
PAYLOAD = ('{"text": "lmforge refresh {{ flow_run.name }} ended {{ flow_run.state.name }}", '
           '"flow_run": "{{ flow_run.name }}", "flow_run_id": "{{ flow_run.id }}", "state": "{{ flow_run.state.name }}"}')


def install(url: str, allow_private_urls: bool = False, flow_name: str = FLOW_NAME) -> str:
    """Create or replace the block and the automation; returns the automation's id."""
    from prefect.automations import Automation, CallWebhook, EventTrigger
    from prefect.blocks.webhook import Webhook

    block = Webhook(method="POST", url=url, headers={"Content-Type": "application/json"},
                    allow_private_urls=allow_private_urls)
    block_id = block.save(BLOCK_NAME, overwrite=True)
    try:
        Automation.read(name=AUTOMATION_NAME).delete()
    except ValueError:  # none yet
        pass
    automation = Automation(
        name=AUTOMATION_NAME,
        description=f"POST to the {BLOCK_NAME} webhook block when a {flow_name} flow run fails",
        trigger=EventTrigger(
            expect={"prefect.flow-run.Failed", "prefect.flow-run.Crashed", "prefect.flow-run.TimedOut"},
            match_related={"prefect.resource.role": "flow", "prefect.resource.name": flow_name},
            posture="Reactive", threshold=1),
        actions=[CallWebhook(block_document_id=block_id, payload=PAYLOAD)],
    ).create()
    return str(automation.id)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="lmforge alerts", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--webhook", required=True, help="URL to POST to when a refresh fails")
    ap.add_argument("--allow-private-urls", action="store_true",
                    help="allow a webhook on a private or loopback address (Prefect refuses them by default)")
    ap.add_argument("--flow", default=FLOW_NAME, help="flow whose failed runs are reported (default: %(default)s)")
    a = ap.parse_args(argv)
    automation = install(a.webhook, a.allow_private_urls, a.flow)
    print(f"alerts: automation {AUTOMATION_NAME!r} ({automation}) posts to block {BLOCK_NAME!r} when {a.flow} fails")
    return 0
