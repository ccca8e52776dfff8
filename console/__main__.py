"""``python -m console``: serve the steward console in the foreground (``trajpub console up`` runs this in the
background), with the settings of :class:`console.settings.Settings`."""

from __future__ import annotations

import sys

from trajpub.errors import TrajpubError


def main() -> None:
    import uvicorn

    from console.app import create_app
    from console.settings import Settings

    try:
        settings = Settings.from_environment()
        app = create_app(settings)
    except TrajpubError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="info", server_header=False,
                ssl_certfile=settings.tls_cert, ssl_keyfile=settings.tls_key)


if __name__ == "__main__":
    main()
