/*
Package devnet is gcompose's local yagna-compatible daemon: a Go server that speaks the subset of the
yagna REST API a requestor uses, with simulated providers whose activities are Docker containers. It is
a product feature (try a Golem deployment locally, for free, in CI) and the test bed of the Golem adapters.

# Starting it

	make devnet                                   # builds the images, docker-compose up -d devnet
	YAGNA_API_URL=http://127.0.0.1:7465 YAGNA_APPKEY=devnet-appkey gcompose ...

The compose service mounts the Docker socket, reads adapters/golem/devnet/devnet.yaml and publishes the
API on 127.0.0.1:7465 only; its key is $YAGNA_APPKEY (default devnet-appkey). Outside Docker:

	YAGNA_APPKEY=secret go run ./cmd/devnet -listen 127.0.0.1:7465 -config adapters/golem/devnet/devnet.yaml

The app key comes from YAGNA_APPKEY, -appkey-file or -appkey (visible in process lists) and is never
logged. SIGTERM/SIGINT stop the devnet and remove every container it created; at start it removes the
leftovers of its own instance (label gcompose.devnet=<instance>). Its start and stop also remove what any
devnet that is gone (killed, say, in the middle of a deploy) left, whatever its instance:
everything a devnet creates names it (label gcompose.devnet.owner: its container, or its process).

# The API served

Same paths, field names, status codes and auth (Authorization: Bearer <key>; 401 {"message"} without it;
the websocket also takes ?authToken=) as the OpenAPI files in ya-client/specs (checked by the tests with
adapters/golem/openapi):
  - GET /me, GET /version/get (open, as in the spec)
  - market: demands subscribe/list/unsubscribe, events long poll (timeout, maxEvents), proposals
    get/counter/reject, agreements create/list/get/confirm/wait/cancel/terminate (the appSessionId given at
    confirm is kept; list and agreementEvents filter on it exactly), agreementEvents, offers
  - activity: create ({agreementId} or a bare id → 201 {activityId}), exec (ExeScript: deploy with net,
    start, run with capture, terminate; transfer and sign answer Error), batch results (cumulative, long
    poll until the batch finishes or commandIndex is reached; Accept: text/event-stream gives RuntimeEvents),
    state, usage, agreement, destroy
  - payment: allocations create/list/get/amend/release (a timeout kept to the nanosecond, ten years when
    none is given, released when it passes; 404 {"message":null} for a released one, 410 for its second
    release), demandDecorations, debit notes and invoices
    (list/get/accept, events with afterTimestamp/timeout/maxEvents)
  - net: networks create/list/get/delete (the range in CIDR form, "192.168.0.0/24", the gateway the first
    host unless given), addresses (with the prefix, "192.168.0.1/24"; the first host the requestor's from
    the creation on), nodes add/list/remove (bare addresses), 200 null for what returns nothing, 403 with no
    body for a network id not held while others are, and the websocket TCP tunnel
    GET /net-api/v1/net/{id}/tcp/{ip}/{port} (binary messages); no GET /net/{id}/tcp listing (yagna has none)
  - payment accounts: GET /payment-api/v1/requestorAccounts lists the funded accounts of the config
    (default erc20-hoodi-tglm) and those yagna initialised for an allocation attempt

Beside it, without an app key, the Golem image registry's API as the SDKs use it (registry.go): GET
/v1/image/info?tag=|hash= → {sha3, http, https, size} of a local image (a tag by the label golem.image.tag,
a hash by the image-hash rule), 404 for none; GET|HEAD /download/<hash>. Point GOLEM_REGISTRY_URL at the
devnet to resolve a descriptor's image_tag or image_hash there.

Not served: scans, provider-side market/activity calls, property queries, encrypted exec.

# Strictness (negotiator.go)

Providers negotiate as yagna's provider agent does (agent/provider/src/market/negotiator): the chosen
platform is required and must be one the provider takes; the debit-note acceptance deadline may not
exceed the offer's (nor be below 5 s); the expiration must lie between 5 min and 30 min from now without a
deadline (100 years with one), and from 10 h on needs the mid-agreement payment timeout; interval and
payment timeout must lie in 1 s – 24 h. An adjusted proposal goes back as a Draft; an agreement is approved
only when every rule is satisfied by its demand and offer. Allocations need a platform that parses and an
account that can cover them (a 400 RFC 7807 problem as yagna answers; an allocation without a platform is
on Holesky, as yagna's). Providers advertise runtime vm with capabilities inet, vpn, manifest-support,
start-entrypoint by default; a VM joins its VPNs only on a provider with vpn, a manifest is read only on
one with manifest-support. The config's relax: knobs turn these rules off one by one.

# Providers and the market

The config file lists provider kinds (count, cores, threads, memGib, storageGib, runtime, capabilities,
subnet, paymentPlatforms, linear coeffs, offer constraints, extra properties, maxAgreements). Each
provider publishes one offer with flat dotted properties (golem.inf.cpu.cores, golem.inf.mem.gib,
golem.inf.storage.gib, golem.runtime.name, golem.runtime.capabilities, golem.node.debug.subnet,
golem.node.id.name, golem.com.pricing.model.linear.coeffs, golem.com.usage.vector,
golem.com.payment.platform.<platform>.address, the payu terms, ...). Its constraints default to
(&(golem.srv.comp.expiration><offer time>)(golem.node.debug.subnet=<subnet>)), so a demand must expire
after the offer was made and name the subnet ("public" by default). A provider kind with priceStep
raises its coefficients by that step with every offer after its first (a provider that changes its
price between offers); another pricing model is set through properties
(golem.com.pricing.model: fixed). GET /market-api/v1/offers lists each provider's latest offer, at the
price it had.

Offers and demands match both ways with adapters/golem/constraint. A new demand gets one Initial
ProposalEvent per matching free provider; a counter-proposal gets a Draft ProposalEvent whose
prevProposalId is the counter-proposal's id (or a ProposalRejectedEvent when the provider is busy, no
longer matches, its negotiator rejects the terms (reason and golem.proposal.rejection.is-final), or the
rejectProposals knob is on; no answer at all when an unsigned property is written as 120.0, which a
provider cannot read); an agreement is made from that Draft (400 from an Initial one, 409 from a used one,
400 from a rejected one) and approved at confirm when the negotiator is satisfied. A provider takes maxAgreements
(default 1) agreements at a time: a busy provider makes no proposals and rejects agreements; when one of
its agreements ends it proposes again to every live demand it matches.

# Activities: which image runs (the image-hash rule)

An activity is one Docker container, created by deploy, started by start. The image is the one the
agreement's golem.srv.comp.task_package = "hash:sha3:<sha3-224 hex>:<url>" maps to:
 1. the config's images map, hash → image reference, if it has the hash; else
 2. the newest local image carrying the label golem.image.hash=<hex>.

A vm/manifest demand (golem.srv.comp.payload, a base64 computation manifest) is read the same way
through its payload's "hash": "sha3:<hex>". Nothing is ever downloaded: a URL of the form the devnet's
image registry answers (.../download/<sha3-224 hex>, registry.go) stands for the image of that hash, and a
task package whose URL names another hash than the package is refused at deploy, as a real provider refuses
an image whose sha3 is not the package's; other URLs are ignored. An unknown hash makes deploy answer Error with a message
saying how to label an image. The devnet's demo images carry their hash:

	gcompose/devnet-db:dev   golem.image.hash=31f814403334f67b62dc243ef54431551d376744d40eed7ae86f8408
	gcompose/devnet-web:dev  golem.image.hash=6dae7f268c5ae29ffa06386915da1d7f5bc2ea26b6834fd66638747b

run executes entry_point + args in the container through the Engine API exec with stdout/stderr
captured; a non-zero exit is Error ("ExeScript command exited with code N") and ends the batch. A run
returns when its process exits even if it left a child in the background (`sh -c "server &"`). Any
image is a payload (payload.go): the devnet runs its static devnet-init as the container's PID 1, from
the relay's directory the container mounts (initshare.go; else copied into the container), which keeps
the container, and such servers, alive; the image's ENTRYPOINT and CMD run only when start's args hold
start-entrypoint on a provider with that capability, as ya-runtime-vm does. The image needs no shell, ip
or init: the VPN join is devnet-init's too (netlink, a TUN device). The container's death (exit,
removal, POST /devnet/v1/activities/{id}/kill) shows as activity state Terminated (noticed within a
second, or at once by GET state); the dead container is removed, which frees its VPN address.

Demo images (FROM scratch): devnet-db serves a key-value store over HTTP on :4001; devnet-web
(--db-address IP --db-port 4001 initdb|run) serves on :80 a page built from the records it writes to and
reads back from devnet-db across the VPN. Both have busybox (/bin/sh), e.g. for examples/webapp:

	db-service init:  ["/bin/sh", "-c", "/devnet-db -listen :4001 > /tmp/db.out 2> /tmp/db.err &"]
	web init:         ["/devnet-web", "--db-address", "${services.db-service.network_node.ip}", "--db-port", "4001", "initdb"]
	                  ["/bin/sh", "-c", "/devnet-web --db-address ${services.db-service.network_node.ip} --db-port 4001 run > /tmp/web.out 2> /tmp/web.err &"]

# VPNs and the TCP tunnel

A Net API network is bookkeeping (range, addresses, nodes); no Docker network backs it. Its packets are
carried in user space, as on Golem, where ya-runtime-vm connects a VM's NIC to a socket and yagna carries
the frames between the nodes (vpnrelay.go). A node's container has network mode none, /dev/net/tun and
CAP_NET_ADMIN. At start, devnet-init (`devnet-init vpn`, run as root beside PID 1) creates a TUN device
per VPN the node is on (vpn0, vpn1, ...) holding the node's VPN address, so the VPN's range is routed
there and nothing else is (no default route: nothing leaves the network), and relays the device's IP
packets to and from the devnet over a unix socket in a directory every payload container mounts
read-only at /.devnet-vpn: a directory of the host when the devnet runs there (a temporary one, or
-vpn-dir), the volume (or bind mount) of the devnet's own container that holds -vpn-dir (default
/run/gcompose-devnet) when it runs in one; the compose service mounts the volume vpn there. A devnet in a container without
such a mount serves everything but VPNs, and a deploy on a VPN fails saying so.

The devnet forwards each packet, within its VPN only, to the node that holds its destination address
now, as yagna does (exe-unit/src/network/vpn.rs handle_ip); a packet for an address no node holds (the
requestor's, a broadcast) is dropped. So any number of VPNs, of any devnet on the host, may use the same
range at once; nodes of different VPNs never reach each other; a node rebuilt at an address (a repair at
a planned address) is reached at once (an L3 device has no neighbour cache to name the old node), and an
old connection to the address is reset by the new node. The packets never pass the Docker host's
netfilter, where another Docker network's masquerading of an overlapping range (Docker's
192.168.64.0/20 holds 192.168.77.0/24) would rewrite them.

As in yagna (core/vpn/src/network.rs), adding a node at an address already taken answers 200 and the holder
keeps it, a node may hold several addresses, and removing a node removes them all; a requestor address
already held answers 200 too (never 409). A deploy's net[] is read as the exe-unit reads it (nodeIp
required, nodeIp, gateway and the nodes' keys bare: a CIDR key fails the deploy with "Net error: …").
deploy with net gives the container exactly its nodeIp (else the first address given to addNode
for the provider), and refuses a nodeIp that the node map gives another node: yagna routes by that map,
so its traffic would never arrive.

The tunnel asks devnet-init in the node that holds the address to dial the port on that address (its own)
and streams the bytes over a connection of their own to the devnet's socket; a connection that cannot be
made answers 404 before the websocket upgrade.

Devnets before this one made two Docker networks per VPN (an internal bridge and a macvlan network on it,
on 10.199.0.0/16); a devnet's leftovers removal still removes such networks left by an older devnet
(legacynet.go), and only warns about one Docker will not remove ("has active endpoints").

# Payments

Allocations track total/spent/remaining. Each Ready activity gets a debit note every debitNoteInterval
(totalAmountDue cumulative, from the agreed offer's linear coeffs read by its usage vector: per duration
second, per CPU second counted as duration, and the start price). Accepting one (totalAmountAccepted equal to its amount due) charges the
allocation the difference from what the agreement had accepted. A debit note left unaccepted longer than
debitNoteAcceptTimeout makes the provider terminate the agreement (AgreementTerminatedEvent, terminator
Provider); every terminated agreement gets an invoice (InvoiceReceivedEvent) for the activities' total.
Providers also end an agreement at its golem.srv.comp.expiration (code Expired; agreementClock N makes
agreement time run N times faster) and one without a running activity for idleAgreementTimeout (code
NoActivity), as yagna's provider agent does (expiry.go). GET /debitNotes and /invoices take afterTimestamp
and maxItems as yagna's do; history N gives the requestor N settled debit notes of the past.

# Fault knobs and the admin API

Under /devnet/v1 (same auth): GET/PUT /faults (PUT replaces them all; the config's faults: sets the initial
ones), POST /activities/{id}/kill (SIGKILL the container), GET /summary (live demands, approved and pending
agreements, running activities, allocations, networks, providers, unpaid invoices), GET /providers and
PUT /providers/{id or name} {"offline": 0|408|500}, and PUT /providers/{id or name}/offer
{"coeffs": [dur, cpu, start]} (a new price: a new offer, proposed to every live demand) or {"withdrawn":
true} (the offer unsubscribed: no event to requestors, a counter to its proposals answers 400 as yagna's,
offers.go). The knobs, all off by default:

  - rejectProposals, rejectAgreements, slow ("250ms": every yagna answer is delayed)
  - execPollErrors [500, 504, 408]: the next exec batch-result polls answer these, one each: a GSB 500
    "endpoint address not found", a gateway 504, a 408 (yapapi and golem-js retry them)
  - imageDownload ("2m"): each deploy downloads the image that long first; deployErrors N: the next N
    deploys fail with "image download failed", as a provider that cannot fetch the image
  - approvalDelay ("10s"): providers approve confirmed agreements that much later (Pending meanwhile,
    holding the provider); a Pending agreement can be cancelled, not terminated (410)
  - invoiceDelay ("3s"): the invoice follows the end of an agreement that much later
  - acceptErrors [500, 504]: the next debit note / invoice accepts fail without accepting
  - an offline provider (PUT /providers/{id}): every call yagna forwards to it (activity state, exec,
    results, destroy, create, agreement terminate and cancel) answers 408 {"message": "Timeout"} or 500
    "GSB error: ...", as yagna does (core/activity/src/api.rs, core/market/src/rest_api/error.rs); it
    makes no proposals and sends no debit notes; back online after more than debitNoteAcceptTimeout it
    ends its agreements (RequestorUnreachable, agent/provider/src/payments/payments.rs)

Answers a real yagna gives beyond the ya-client specs (a 408 or 504 where the spec lists none, 410 for a
second release of an allocation) carry the header X-Devnet-Beyond-Spec, so a contract checker can exempt them
(openapi.Checker.Exempt = devnet.BeyondSpec).

Strict where yagna and providers are: a debit note is accepted alone (accepting a later one does not
accept it, core/payment/src/dao/debit_note.rs) and each has its own deadline; an accept against a released
allocation answers 400 "Allocation … not found" (core/payment/src/dao/allocation.rs filters released ones).
*/
package devnet
