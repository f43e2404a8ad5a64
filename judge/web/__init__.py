"""The web interface of ``dst-judge serve``: runs with live progress, submitting and
cancelling evaluations, every turn of a run with its replies and trace, runs compared as
charts, and annotation review with keyboard labelling and agreement as it grows.

Server-rendered pages (Jinja2, autoescaped) with a small script of our own for live updates
and keyboard review; every asset ships in the package (no CDN). The same tokens and scopes as
the API, through an HttpOnly session cookie; CSRF tokens on every form; a strict
Content-Security-Policy.
"""

from ._app import mount_web
from ._common import PREFIX
from ._state import WebState

__all__ = ["PREFIX", "WebState", "mount_web"]
