# gcompose/golem-service:dev — see docs/golem.md. One static binary, FROM scratch.
FROM scratch
COPY golem-service /golem-service
ENTRYPOINT ["/golem-service"]
