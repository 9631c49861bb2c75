# syntax=docker/dockerfile:1
# Odradek's one image: every service runs from it as `odradek-service <kind>` (see
# services/common/entrypoint.py); ZooKeeper runs from its own official image.
#
#   docker build -t odradek:latest .                       # controller, broker, coordinator, gateway
#   docker build -t odradek-spark:latest --target spark .  # + Java, PySpark and jobs/
#
# The Python images are build arguments: any image with Python 3.11 whose `python` and `pip` come
# first on PATH (the builder's also with a C compiler), such as those deploy/compose-test/ builds
# without a registry.
ARG PYTHON_IMAGE=python:3.11
ARG PYTHON_SLIM_IMAGE=python:3.11-slim

# ---- builder: wheels of the project (with the compiled record framing check) and its dependencies;
# pip's cache stays in this stage, which no image keeps (or in a cache the build mounts there)
FROM ${PYTHON_IMAGE} AS builder
WORKDIR /src
COPY pyproject.toml README.md ./
# the runtime's requirements are the project's; the spark extra's (PySpark) only the spark target installs
RUN python -c "import tomllib; project = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
open('/tmp/requirements.txt', 'w').write('\n'.join(project['dependencies']) + '\n'); \
open('/tmp/spark-requirements.txt', 'w').write('\n'.join(project['optional-dependencies']['spark']) + '\n')" \
 && pip wheel --wheel-dir /wheels -r /tmp/requirements.txt
COPY odradek ./odradek
COPY services ./services
RUN pip wheel --no-deps --wheel-dir /wheels . \
 && python -c "import glob, zipfile; names = zipfile.ZipFile(glob.glob('/wheels/odradek-*.whl')[0]).namelist(); \
assert any('_framing' in n and n.endswith('.so') for n in names), 'the C extension was not built'" \
 && cp /tmp/requirements.txt /tmp/spark-requirements.txt /wheels/ \
 && sha256sum /wheels/* > /wheels.sha256

# ---- runtime: slim Python, no compiler, no Java; runs as an unprivileged user
FROM ${PYTHON_SLIM_IMAGE} AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# the wheels' digests: new wheels make the install below run again (buildah, podman's builder, does
# not count a stage bind-mounted into a RUN in that RUN's cache key, so it kept the old install)
COPY --from=builder /wheels.sha256 /usr/local/share/odradek-wheels.sha256
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels -r /wheels/requirements.txt \
 && pip install --no-cache-dir --no-index --no-deps /wheels/odradek-*.whl \
 && cp /wheels/spark-requirements.txt /usr/local/share/odradek-spark-requirements.txt \
 && groupadd --system --gid 10001 odradek \
 && useradd --system --uid 10001 --gid odradek --home-dir /var/lib/odradek --create-home odradek \
 && mkdir -p /var/lib/odradek/data /var/lib/odradek/jobs && chown -R odradek:odradek /var/lib/odradek
WORKDIR /var/lib/odradek
USER 10001:10001
# brokers keep their logs here (ODRADEK_LOG_DIRS); mount a volume on it
VOLUME ["/var/lib/odradek/data"]
# gRPC: controller 9093, broker 9092, coordinator 9094; HTTP: gateway 8080; Prometheus: 9404
EXPOSE 9092 9093 9094 8080 9404
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 CMD ["odradek-service", "health"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["odradek-service"]
CMD ["broker"]

# ---- spark: the runtime plus a Java runtime, PySpark and the jobs in jobs/ (clickstream), which the
# wheel does not carry: they run from /opt/odradek as from a checkout
FROM runtime AS spark
USER root
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends default-jre-headless \
 && rm -rf /var/lib/apt/lists/* \
 && pip install --no-cache-dir -r /usr/local/share/odradek-spark-requirements.txt
COPY jobs /opt/odradek/jobs
ENV PYTHONPATH=/opt/odradek
USER 10001:10001
ENTRYPOINT ["python", "-m", "jobs.clickstream"]
CMD ["--help"]
