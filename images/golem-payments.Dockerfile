# gcompose/golem-payments:dev — see docs/golem.md. One static binary, FROM scratch.
FROM scratch
COPY golem-payments /golem-payments
ENTRYPOINT ["/golem-payments"]
