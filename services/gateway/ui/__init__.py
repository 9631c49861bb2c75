"""The web console at `/ui`: static pages (`static/`, plain HTML, CSS and JavaScript, no build step),
the throughput and lag series (`series`, a pure ring of samples) and its sampler (`sampler`), and the
JSON shapes of the few views REST Proxy v3 does not answer (`views`). Its routes are
`services.gateway.routes.ui`."""
