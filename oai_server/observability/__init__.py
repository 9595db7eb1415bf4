"""What the server tells its operators: request ids, the access log, Prometheus metrics."""
