# gcompose/golem-network:dev — see docs/golem.md. One static binary, FROM scratch.
FROM scratch
COPY golem-network /golem-network
ENTRYPOINT ["/golem-network"]
