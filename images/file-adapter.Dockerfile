# gcompose/file-adapter:dev — manages files in the "files" plug (see docs/protocol.md).
# Build context: bin/ (make images).
FROM scratch
COPY file-adapter /file-adapter
ENTRYPOINT ["/file-adapter"]
