# gcompose/golem-proxy:dev — see docs/golem.md. One static binary, FROM scratch.
FROM scratch
COPY golem-proxy /golem-proxy
ENTRYPOINT ["/golem-proxy"]
