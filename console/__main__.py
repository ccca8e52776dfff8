"""``python -m console``: serve the steward console in the foreground (``trajpub console up`` runs this in the
background), with the settings of :class:`console.settings.Settings`."""

from __future__ import annotations

import importlib
import logging
import sys
import threading

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
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # the Prefect client's every request
    # the release flow's modules, which an approval with no flow run waiting runs (tens of seconds to import on a
    # busy machine), imported while the console waits for its first steward rather than during their approval
    threading.Thread(target=importlib.import_module, args=("flows.release",), daemon=True).start()
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="info", server_header=False,
                ssl_certfile=settings.tls_cert, ssl_keyfile=settings.tls_key)


if __name__ == "__main__":
    main()
