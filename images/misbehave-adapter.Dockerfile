# gcompose/misbehave-adapter:dev — breaks the protocol on demand for the engine's tests.
# State and action calls misbehave by config (mode, on, when); init by the environment
# variable GCOMPOSE_MISBEHAVE_INIT, set in a derived image (see adapters/misbehave).
# Build context: bin/ (make images).
FROM scratch
COPY misbehave-adapter /misbehave-adapter
ENTRYPOINT ["/misbehave-adapter"]
