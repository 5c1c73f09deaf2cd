# Devnet demo database provider image: devnet-db (key-value HTTP on :4001), busybox for /bin/sh,
# devnet-init as PID 1 so that processes started in the background by an ExeScript `run` keep running.
# The image answers for task package hash:sha3:<golem.image.hash>:<any url> on the devnet.
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
RUN ["/bin/busybox", "mkdir", "-p", "/tmp", "/data"]
COPY devnet-init /devnet-init
COPY devnet-db /devnet-db
LABEL golem.image.hash=31f814403334f67b62dc243ef54431551d376744d40eed7ae86f8408
ENTRYPOINT ["/devnet-init"]
