"""``/docs`` (Swagger UI) served from files in an installed package (``fastapi-offline`` ships
the bundle), so the API reference works with no internet. There is no ``/redoc``: ReDoc's
bundle fetches its logo from cdn.redoc.ly on every page, which no option turns off."""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = Path(fastapi_offline.__file__).parent / "static"
ASSETS_URL = "/docs-assets"
SWAGGER_PARAMETERS = {"validatorUrl": None, "persistAuthorization": False,
                      "displayOperationId": True, "tryItOutEnabled": False}
"""No validator badge (it is an image from validator.swagger.io); ids shown, as the client
methods generated from this document are named after them."""


def install_docs(app: FastAPI, openapi_url: str = "/openapi.json") -> None:
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS), name="docs-assets")
    redirect = "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url, title=f"{app.title} · API reference",
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
            oauth2_redirect_url=redirect, swagger_ui_parameters=SWAGGER_PARAMETERS)

    @app.get(redirect, include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
