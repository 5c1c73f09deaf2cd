# The devnet: a local yagna-compatible daemon whose providers run as Docker containers.
# Needs the Docker socket (-v /var/run/docker.sock:/var/run/docker.sock) and YAGNA_APPKEY.
FROM scratch
COPY devnet /devnet
# Put into every payload container as its PID 1 and VPN join (adapters/golem/devnet/payload.go).
COPY devnet-init /devnet-init
ENV DEVNET_LISTEN=0.0.0.0:7465
EXPOSE 7465
ENTRYPOINT ["/devnet"]
