"""Home channels: where each platform's briefs and notices go when no chat is named."""

from __future__ import annotations

from hermes.delivery.channels import HomeChannel, home_channels
from hermes.operations.context import NoArgs, Operation, Ops


async def list_channels(ops: Ops, args: NoArgs) -> dict[str, HomeChannel]:
    return await ops.db.read(home_channels, ops.config.platforms)


OPERATIONS = (Operation("channels", NoArgs, dict[str, HomeChannel], list_channels),)
