"""The clickstream ingestion pipeline: page-view events through the gateway into per-page per-minute
aggregates in Parquet, by a Structured Streaming job and a batch backfill (see `pipeline`)."""
