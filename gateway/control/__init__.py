"""The control plane: the only SQL in the gateway (store and migrations)."""
