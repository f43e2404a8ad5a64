"""The Python client of the evaluation service: ``judge.Client(url, token)``.

It needs httpx only (a core dependency), not the ``serve`` extra, so anyone can submit jobs
to a lab's server without installing FastAPI or a database driver.
"""

from ._client import Client

__all__ = ["Client"]
