"""The authorization server's routes, wired over the SDK's handlers and our own pieces.

The pages a person sees are :mod:`gateway.web`'s (auth renders no page): ``/consent`` is
:mod:`gateway.web.consent`, and a refused ``/authorize`` becomes a page for a browser through the
``for_browser`` function the composition root passes in (:func:`gateway.web.refusal.for_browser`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs, urlsplit

from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.token import TokenHandler
from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.provider import construct_redirect_uri
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from gateway.auth.oauth import cimd, metadata
from gateway.auth.oauth.config import OAuthServer, over_limit, remote_of
from gateway.auth.oauth.provider import Provider
from gateway.auth.oauth.register import register

Endpoint = Callable[[Request], Awaitable[Response]]
#: A refusal as a browser should see it: the response itself, or a page explaining it.
ForBrowser = Callable[[Request, Response], Response]

PROTECTED_RESOURCE_PATHS = (
    "/.well-known/oauth-protected-resource/mcp",
    "/.well-known/oauth-protected-resource",
)
SERVER_METADATA_PATHS = ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration")


def _public(endpoint: Endpoint, methods: list[str]) -> ASGIApp:
    """Endpoints browser-based clients call directly (metadata, token, register, revoke) allow any
    origin, as the SDK's own routes do: they take no cookies, only what the client sends."""

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        request = Request(scope, receive)
        response = await endpoint(request)
        await response(scope, receive, send)

    return CORSMiddleware(
        app, allow_origins=["*"], allow_methods=methods, allow_headers=["mcp-protocol-version"]
    )


def routes(server: OAuthServer, *, for_browser: ForBrowser) -> list[Route]:
    async def resource_metadata(request: Request) -> Response:
        return JSONResponse(metadata.protected_resource(server.issuer(request)))

    async def server_metadata(request: Request) -> Response:
        return JSONResponse(metadata.authorization_server(server.issuer(request)))

    async def authorize(request: Request) -> Response:
        if refused := over_limit(server, "authorize", request):
            return refused
        provider = Provider(server, server.issuer(request), remote_of(request))
        params = request.query_params if request.method == "GET" else await request.form()
        client_id = params.get("client_id")
        if isinstance(client_id, str) and cimd.is_metadata_url(client_id):
            try:
                await provider.client(client_id)
            except cimd.CimdRefused as exc:
                body = {"error": "invalid_client", "error_description": str(exc)}
                refused = JSONResponse(body, status_code=400, headers={"Cache-Control": "no-store"})
                return for_browser(request, refused)
        response = await AuthorizationHandler(provider).handle(request)
        location = response.headers.get("location")
        if location and "error" in parse_qs(urlsplit(location).query):
            # RFC 9207: an error sent back to the client names this issuer too (the SDK leaves it out)
            response.headers["location"] = construct_redirect_uri(location, iss=provider.issuer)
        return for_browser(request, response)

    async def token(request: Request) -> Response:
        if refused := over_limit(server, "token", request):
            return refused
        provider = Provider(server, server.issuer(request), remote_of(request))
        form = await request.form()
        resource = form.get("resource")
        provider.requested_resource = resource if isinstance(resource, str) else None
        code, verifier = form.get("code"), form.get("code_verifier")
        if (
            form.get("grant_type") == "authorization_code"
            and isinstance(code, str)
            and isinstance(verifier, str)
        ):
            provider.check_verifier(code, verifier)
        response: Response = await TokenHandler(provider, ClientAuthenticator(provider)).handle(request)
        return response

    async def revoke(request: Request) -> Response:
        """RFC 7009. (The SDK's handler insists on a ``client_secret`` field that public clients
        never send, so this one is ours.) Unknown tokens, or another client's, get 200 too."""
        if refused := over_limit(server, "token", request):
            return refused
        provider = Provider(server, server.issuer(request), remote_of(request))
        try:
            client = await ClientAuthenticator(provider).authenticate_request(request)
        except AuthenticationError as exc:
            return JSONResponse(
                {"error": "invalid_client", "error_description": exc.message}, status_code=401
            )
        token = (await request.form()).get("token")
        if not isinstance(token, str) or not token:
            return JSONResponse({"error": "invalid_request", "error_description": "token is required"}, 400)
        found = await provider.load_access_token(token) or await provider.load_refresh_token(client, token)
        if found is not None and found.client_id == client.client_id:
            await provider.revoke_token(found)
        return Response(status_code=200, headers={"Cache-Control": "no-store"})

    async def registration(request: Request) -> Response:
        if refused := over_limit(server, "register", request):
            return refused
        return await register(server, request)

    found = [
        Route(p, _public(resource_metadata, ["GET"]), methods=["GET", "OPTIONS"])
        for p in PROTECTED_RESOURCE_PATHS
    ]
    found += [
        Route(p, _public(server_metadata, ["GET"]), methods=["GET", "OPTIONS"]) for p in SERVER_METADATA_PATHS
    ]
    found += [
        Route("/authorize", authorize, methods=["GET", "POST"]),
        Route("/token", _public(token, ["POST"]), methods=["POST", "OPTIONS"]),
        Route("/register", _public(registration, ["POST"]), methods=["POST", "OPTIONS"]),
        Route("/revoke", _public(revoke, ["POST"]), methods=["POST", "OPTIONS"]),
    ]
    return found
