#!/bin/sh
# `make demo`: start the devnet (docker-compose service devnet, 127.0.0.1:${GCOMPOSE_DEVNET_PORT:-7465}), deploy examples/webapp on
# it (the deploy ends with the app's outputs: its URL and the database's VPN address), and fetch the URL. Images must be built (make images).
# It ends with how to remove everything: the app (gcompose destroy), then the devnet (docker-compose down -v:
# the devnet removes every container it made when it stops, and compose removes its network and, with -v,
# the volume of the devnet's VPN socket).
set -eu
cd "$(dirname "$0")/../.."
: "${YAGNA_APPKEY:=devnet-appkey}"
: "${YAGNA_API_URL:=http://127.0.0.1:${GCOMPOSE_DEVNET_PORT:-7465}}"
# The devnet serves the image registry's API too: the images' hashes resolve there (docs/golem.md, "Images").
: "${GOLEM_REGISTRY_URL:=$YAGNA_API_URL}"
export YAGNA_APPKEY YAGNA_API_URL GOLEM_REGISTRY_URL
GCOMPOSE=${GCOMPOSE:-bin/gcompose}
DESCRIPTOR=examples/webapp/webapp.yaml

echo "== starting the devnet (docker-compose up -d devnet)"
docker-compose up -d devnet
i=0
until curl -fsS -o /dev/null -H "Authorization: Bearer $YAGNA_APPKEY" "$YAGNA_API_URL/me"; do
	i=$((i + 1))
	if [ "$i" -gt 60 ]; then echo "the devnet does not answer on $YAGNA_API_URL" >&2; docker-compose logs --tail 20 devnet >&2; exit 1; fi
	sleep 1
done

echo "== deploying $DESCRIPTOR"
"$GCOMPOSE" deploy -f "$DESCRIPTOR" --yes

# The descriptor's outputs (printed by the deploy above) hold the URL.
url=$("$GCOMPOSE" output -f "$DESCRIPTOR" url)
if [ -z "$url" ]; then echo "gcompose output url printed nothing" >&2; exit 1; fi
echo
echo "== the web service is at $url"
curl -fsS "$url"
echo
# The devnet's own key is printed as it is; a key of yours is not.
key='"$YAGNA_APPKEY"'
if [ "$YAGNA_APPKEY" = devnet-appkey ]; then key=devnet-appkey; fi
# docker-compose must be told the same project as above when it is not the one .env pins.
compose=
if [ -n "${COMPOSE_PROJECT_NAME:-}" ]; then compose="COMPOSE_PROJECT_NAME=$COMPOSE_PROJECT_NAME "; fi
echo "== remove it all with:"
echo "   YAGNA_API_URL=$YAGNA_API_URL YAGNA_APPKEY=$key $GCOMPOSE destroy -f $DESCRIPTOR --yes"
echo "   ${compose}docker-compose down -v"
