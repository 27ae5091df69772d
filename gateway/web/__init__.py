"""The gateway's server-rendered pages (``gw:signin``, the dashboard of SPEC §11): Jinja2 templates,
one stylesheet, no JavaScript."""
