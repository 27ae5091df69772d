"""The gateway's OAuth 2.1 authorization server for MCP clients (``gw:oauth``); see docs/oauth.md.

Built on the ``mcp`` SDK's authorization-server handlers (authorize, token, revoke), which already
enforce PKCE S256 and carry RFC 8707 ``resource``, with our own pieces where the SDK has gaps:
per-request metadata (the issuer follows ``public_url`` or the request), ``none``-only dynamic
registration, client ID metadata documents, loopback-any-port redirect matching, RFC 9207 ``iss``,
resource checks at ``/token`` and the consent page.
"""
