"""The gateway's HTTP wire vocabulary, shared by the gateway and its clients (the Spark source and
sink, the jobs): its media types and the offset headers of range reads."""

V2_JSON = "application/vnd.kafka.v2+json"
V2_BINARY = "application/vnd.kafka.binary.v2+json"
V2_EMBEDDED_JSON = "application/vnd.kafka.json.v2+json"
JSON = "application/json"
ARROW_STREAM = "application/vnd.apache.arrow.stream"

EARLIEST_HEADER = "X-Odradek-Earliest-Offset"
LATEST_HEADER = "X-Odradek-Latest-Offset"
HIGH_WATERMARK_HEADER = "X-Odradek-High-Watermark"
NEXT_OFFSET_HEADER = "X-Odradek-Next-Offset"
