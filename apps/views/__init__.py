"""One module per dashboard tab; each builds its widgets over the session's ``apps.store.Selection``
and computes through ``apps.dispatch.Dispatch`` (never on the event loop, never with SQL of its own)."""
