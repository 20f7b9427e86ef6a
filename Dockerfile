# The resultlog CLI (aggregator, topics, workers) for docker-compose.yml.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY schemas schemas
COPY consumers consumers
COPY producer producer
COPY resultlog resultlog
RUN pip install --no-cache-dir .
USER nobody
ENTRYPOINT []
