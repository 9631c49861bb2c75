"""The HTTP gateway: REST produce, fetch, consumer instances and admin over FastAPI."""
