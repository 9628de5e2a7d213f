"""The local services' guard: a session secret, and the Host and Origin checks in front of it.

Why: binding 127.0.0.1 keeps other machines out, but not the learner's own browser. Any web
page can make it send a "simple" request (a ``text/plain`` POST, a form post) to
``http://127.0.0.1:PORT`` without a preflight, a page served through another name that
resolves to 127.0.0.1 (DNS rebinding) can read the answers, and every other user of the
machine can connect too. The local Vertex AI service starts jobs whose ``containerSpec.command``
is any command, so any of these is code execution as the learner. Jupyter Server, Docker's
socket and VS Code's server never rely on the loopback address alone; neither does this kit.

What every request must pass, in this order (`Guard.check`):

1. **Host** names ``127.0.0.1`` or ``localhost`` (a rebinding page sends its own name).
2. **Origin**, when the browser sends one, is this service's own origin; for state-changing
   methods also **Referer** and ``Sec-Fetch-Site`` (``same-origin`` or ``none``).
3. **The session's secret**: ``Authorization: Bearer <token>``, the way Google's clients send
   credentials (`google.oauth2.credentials.Credentials(token)`), or, on the console's pages
   only, the ``HttpOnly; SameSite=Strict`` cookie that ``/console/session?token=...`` sets
   (what ``python -m labkit console`` opens). A state change signed by the cookie must also
   carry this origin in ``Origin`` or ``Referer``: SameSite does not tell ports apart, so a
   page on another 127.0.0.1 port is "same-site" and its form post would carry the cookie;
   only the origin check refuses it. That is why the console's forms carry no extra CSRF
   token: every browser that can run the console sends ``Origin`` on a POST.
4. With ``json_only`` (the Vertex REST API): a state-changing request declares
   ``Content-Type: application/json``, so a browser must preflight it, and no CORS grant is
   ever answered.

The token is made when a service starts (`new_token`) and kept in its state folder, readable
by the learner alone (`write_token`, mode 0600); ``python -m labkit emulator token`` prints it.
"""

from __future__ import annotations

import dataclasses
import hmac
import html
import os
import secrets
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

TOKEN_FILE = "token"
# Host names that can only mean this machine (Jupyter Server's rule: the name, not the port; a
# rebinding page sends its own name, and the Origin check below pins the port).
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_SAME_ORIGIN_FETCH = frozenset({"same-origin", "none"})


class Headers(Protocol):
    """Case-insensitive header lookup: Starlette's `Headers` and `email.message.Message`."""

    def get(self, key: str, default: str | None = None) -> str | None: ...


@dataclasses.dataclass(frozen=True)
class Refusal:
    """Why a request is refused: HTTP status, Google's status name, and the fix."""

    http_status: int
    status: str
    message: str

    def to_json(self) -> dict[str, dict[str, object]]:
        """Google's error JSON, so the SDK and storage client raise their usual exceptions."""
        return {"error": {"code": self.http_status, "message": self.message, "status": self.status}}

    def to_html(self) -> str:
        """The same answer for a person who opened a console page in a browser."""
        return (
            "<!doctype html><meta charset=utf-8><title>local console: sign in</title>"
            f"<h1>{self.http_status} {self.status}</h1><p>{html.escape(self.message)}</p>"
        )


def new_token() -> str:
    """A fresh session secret: 256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


def write_token(folder: Path, token: str) -> Path:
    """Store ``token`` as ``<folder>/token``, readable and writable by this user alone.

    The file is created with mode 0600 (never readable by others, not even for a moment) and
    moved over the old one, so a reader sees the old token or the new one, whole.
    """
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / TOKEN_FILE
    tmp = folder / f".{TOKEN_FILE}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # the umask cannot widen it; an old file's mode is replaced
        os.write(fd, (token + "\n").encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return path


def read_token(folder: Path) -> str | None:
    """The token a service of ``folder`` made, or None when there is none."""
    try:
        return (Path(folder) / TOKEN_FILE).read_text().strip() or None
    except OSError:
        return None


def bearer(headers: Headers) -> str | None:
    """The token of an ``Authorization: Bearer ...`` header, if any."""
    scheme, _, value = (headers.get("authorization") or "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


@dataclasses.dataclass(frozen=True)
class Guard:
    """The checks for one service: its token and port, where the cookie counts, JSON only."""

    token: str = dataclasses.field(repr=False)
    port: int
    cookie_paths: tuple[str, ...] = ()
    json_only: bool = False
    service: str = "the local service"

    @property
    def origins(self) -> frozenset[str]:
        return frozenset({f"http://127.0.0.1:{self.port}", f"http://localhost:{self.port}"})

    @property
    def cookie_name(self) -> str:
        """One cookie per port: browsers send a 127.0.0.1 cookie to every port of it."""
        return f"labkit-session-{self.port}"

    def matches(self, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(token.encode(), self.token.encode())

    def cookie_counts_for(self, path: str) -> bool:
        return any(path == p or path.startswith(p + "/") for p in self.cookie_paths)

    def check(
        self, method: str, path: str, headers: Headers, cookies: dict[str, str]
    ) -> Refusal | None:
        """None when the request may go on, else why it may not (nothing has been done yet)."""
        changes_state = method.upper() not in SAFE_METHODS
        refusal = self._check_host(headers) or self._check_origin(headers, changes_state)
        if refusal:
            return refusal
        if self.matches(bearer(headers)):
            return self._check_content_type(path, headers, changes_state)
        if self.cookie_counts_for(path) and self.matches(cookies.get(self.cookie_name)):
            if changes_state and not (headers.get("origin") or headers.get("referer")):
                return self._forbidden(
                    f"{method} {path} signed in by the console's cookie came without Origin or "
                    "Referer, so it may come from another page: submit it from the console page."
                )
            return None
        return Refusal(401, "UNAUTHENTICATED", self._sign_in_help(path, headers))

    def check_sign_in(self, headers: Headers, token: str | None) -> Refusal | None:
        """The console's sign-in link (``?token=``): the same Host and Origin checks, then
        the token itself."""
        refusal = self._check_host(headers) or self._check_origin(headers, False)
        if refusal or self.matches(token):
            return refusal
        return Refusal(
            401,
            "UNAUTHENTICATED",
            "This sign-in link's token is not the service's: it makes a new one each time it "
            "starts. Run `python -m labkit console` again for a fresh link.",
        )

    def _check_host(self, headers: Headers) -> Refusal | None:
        host = (headers.get("host") or "").strip().lower()
        if urlsplit(f"//{host}").hostname in LOOPBACK_NAMES:
            return None
        return self._forbidden(
            f"Host {host or '(none)'!r} is not {self.service}'s address: it answers only "
            f"requests for http://127.0.0.1:{self.port} (a page reaching it under another "
            "name is refused). Use that address."
        )

    def _check_origin(self, headers: Headers, changes_state: bool) -> Refusal | None:
        origin = headers.get("origin")
        if origin is not None and origin.lower().rstrip("/") not in self.origins:
            return self._forbidden(
                f"Origin {origin!r} is another site: {self.service} takes no requests from "
                "other web pages. Use the kit's clients or the console page itself."
            )
        if not changes_state:
            return None
        referer = headers.get("referer")
        if referer:
            parts = urlsplit(referer)
            if f"{parts.scheme}://{parts.netloc}".lower() not in self.origins:
                return self._forbidden(
                    f"Referer {referer!r} is another site: {self.service} takes no changes "
                    "from other web pages."
                )
        fetch_site = (headers.get("sec-fetch-site") or "none").lower()
        if fetch_site not in _SAME_ORIGIN_FETCH:
            return self._forbidden(
                f"Sec-Fetch-Site {fetch_site!r}: the browser says this request comes from "
                f"another page; {self.service} takes changes only from its own pages."
            )
        return None

    def _check_content_type(
        self, path: str, headers: Headers, changes_state: bool
    ) -> Refusal | None:
        if not (self.json_only and changes_state) or self.cookie_counts_for(path):
            return None
        declared = (headers.get("content-type") or "").split(";")[0].strip().lower()
        if declared == "application/json":
            return None
        return Refusal(
            415 if declared else 400,
            "INVALID_ARGUMENT",
            f"Content-Type {declared or '(none)'!r}: this API takes only application/json "
            "bodies. Send the request with Content-Type: application/json.",
        )

    def _forbidden(self, message: str) -> Refusal:
        return Refusal(403, "PERMISSION_DENIED", message)

    def _sign_in_help(self, path: str, headers: Headers) -> str:
        what = "a wrong token" if headers.get("authorization") else "no session token"
        if self.cookie_counts_for(path):
            return (
                f"{what}: open the local console with `python -m labkit console`, which signs "
                "this browser in (or its sign-in address, printed by the kit)."
            )
        return (
            f"{what}: {self.service} accepts only requests carrying its session token. Print it "
            "with `python -m labkit emulator token` and send `Authorization: Bearer <token>` "
            "(the SDK: aiplatform.init(..., credentials=google.oauth2.credentials."
            "Credentials(token)))."
        )
