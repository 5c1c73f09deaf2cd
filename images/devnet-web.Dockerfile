# Devnet demo web provider image: devnet-web (HTTP on :80, talks to devnet-db across the VPN), busybox
# for /bin/sh, devnet-init as PID 1. Answers for hash:sha3:<golem.image.hash>:<any url> on the devnet.
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
RUN ["/bin/busybox", "mkdir", "-p", "/tmp"]
COPY devnet-init /devnet-init
COPY devnet-web /devnet-web
LABEL golem.image.hash=6dae7f268c5ae29ffa06386915da1d7f5bc2ea26b6834fd66638747b
ENTRYPOINT ["/devnet-init"]
