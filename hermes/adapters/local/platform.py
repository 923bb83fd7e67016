"""The local endpoint as a platform: no limit worth splitting for, no pace."""

from hermes.adapters.platform import Limit, Platform

LOCAL = Platform("local", Limit(1_000_000, "chars"), adapter=None, streams=True)
