"""The runtime a call runs in: the `Call` and what outlives it.

The seam between transports and the core (`call`: a `Call` and its `Writer`), the
worker threads of sync functions (`threads`), the app's start-up and shut-down
(`lifespan`), the change bus and `subscriptions/listen` (`subscriptions`), 2025-era
sessions (`session`), counters (`metrics`) and every default limit (`defaults`).

Above the wire (`_wire`, and the public `auth` it reads a token's type from);
beside the public `routes`, `middleware` and `logs`, which need no more than it;
below the app (`_app`), which wraps a `Call` in a `Context`.
"""
