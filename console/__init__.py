"""The steward console: a small web application (Starlette, Jinja2 templates) where a steward signs in with their
own database login and reviews, approves, rejects and withdraws releases, and reads the budget, through the same
functions as the command line (:mod:`flows.decisions`, :mod:`tasks.governance`), as that login: four-eyes and
every database rule hold as for ``trajpub approve``. ``trajpub console up`` serves it (:mod:`console.server`)."""
