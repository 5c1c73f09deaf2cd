# gcompose/gcompose:dev — the gcompose CLI itself, for CI jobs that have nothing but Docker (docs/ci.md).
# Build context: bin/ (make images), which holds the static CLI and a CA bundle copied from the
# build host (empty when the host has none: gcompose only needs it for TLS to etcd or a remote Engine).
FROM scratch
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY gcompose /gcompose
ENTRYPOINT ["/gcompose"]
