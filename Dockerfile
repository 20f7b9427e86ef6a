# The resultlog CLI (aggregator, topics, workers) for docker-compose.yml. The base image is a
# build argument: python:3.11-slim, or a stand-in where no registry answers (scripts/images.sh).
ARG RESULTLOG_PYTHON_IMAGE=python:3.11-slim

# The wheel, with the fold's hot path compiled by mypyc (setup.py): the build needs a C compiler.
FROM ${RESULTLOG_PYTHON_IMAGE} AS wheel
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY schemas schemas
COPY consumers consumers
COPY producer producer
COPY resultlog resultlog
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM ${RESULTLOG_PYTHON_IMAGE}
COPY --from=wheel /wheels /wheels
# The build fails rather than ship the pure-Python twins unnoticed.
RUN pip install --no-cache-dir /wheels/*.whl \
 && rm -rf /wheels \
 && python -c 'import resultlog, sys; p = resultlog.fold_path(); print("fold path:", p); sys.exit(not p.startswith("compiled"))'
# A user of its own with a home; the aggregator's state directory (a volume in the compose
# files) is the user's folder here, and a new volume starts as a copy of it, owner included.
RUN useradd --uid 10001 --create-home --home-dir /var/lib/resultlog --shell /usr/sbin/nologin resultlog \
 && install -d -o resultlog -g resultlog /var/lib/resultlog/aggregator
ENV RESULTLOG_AGGREGATOR_STATE_DIR=/var/lib/resultlog/aggregator
USER resultlog
WORKDIR /var/lib/resultlog
ENTRYPOINT []
