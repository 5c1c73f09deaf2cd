#!/bin/sh
# `make demo`: start the devnet (docker-compose service devnet, 127.0.0.1:${GCOMPOSE_DEVNET_PORT:-7465}), deploy examples/webapp on
# it (the deploy ends with the app's outputs: its URL and the database's VPN address), and fetch the URL. Images must be built (make images).
# Remove everything afterwards with:
#   YAGNA_API_URL=http://127.0.0.1:7465 YAGNA_APPKEY=devnet-appkey bin/gcompose destroy -f examples/webapp/webapp.yaml --yes
set -eu
cd "$(dirname "$0")/../.."
: "${YAGNA_APPKEY:=devnet-appkey}"
: "${YAGNA_API_URL:=http://127.0.0.1:${GCOMPOSE_DEVNET_PORT:-7465}}"
export YAGNA_APPKEY YAGNA_API_URL
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
echo "== remove it all with: YAGNA_API_URL=$YAGNA_API_URL YAGNA_APPKEY=... $GCOMPOSE destroy -f $DESCRIPTOR --yes"
