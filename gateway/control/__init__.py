"""The control plane: the only SQL in the gateway (:mod:`.store` opens it, ``migrations/`` shape it).

:class:`~gateway.control.store.ControlPlane` holds one repository per concept (``owners``,
``connections``, ``accounts``, ``passwords``, ``oauth``, ``erasure``, ``nodes``, ``moves``, ``lost``,
``audit_log``); what they return are the frozen records of :mod:`.records`. The control plane sits
just above the gateway's leaves: it imports :mod:`gateway.errors` and itself, nothing else of the
gateway, so auth, engines, cluster, edge, api and web may all use it.
"""
