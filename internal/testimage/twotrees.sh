#!/bin/sh
# Two checkouts run the same image-using test at the same time; in one of them the golem-network adapter's
# init answer carries a property gcompose does not allow (as a newer adapter's "action_state" or "planned"
# did for an older gcompose). Each run must see its own adapter: tree a passes, tree b fails on its own
# property. Before adapter images were tagged by content, one of the two saw the other's adapter (a failed
# on b's property, or b passed with a's adapter).
#
#   internal/testimage/twotrees.sh [commit] [test regexp] [package]
#
# defaults: HEAD of this checkout, ^TestConformancePlans$, ./adapters/golem/e2e/. Needs Docker and the
# devnet's busybox; takes a few minutes; leaves the clones and logs in $WORK (default a new /tmp directory).
set -eu
src=$(git rev-parse --show-toplevel)
commit=${1:-HEAD}
run=${2:-^TestConformancePlans\$}
pkg=${3:-./adapters/golem/e2e/}
WORK=${WORK:-$(mktemp -d /tmp/gcompose-twotrees-XXXXXX)}
for t in a b; do
	git clone -q "$src" "$WORK/$t"
	git -C "$WORK/$t" checkout -q "$(git -C "$src" rev-parse "$commit")"
done
# Tree b: the init answer's gcompose part gets a property the protocol schema does not have.
cat >"$WORK/b/cmd/golem-network/main.go" <<'EOF'
// Command golem-network, changed for internal/testimage/twotrees.sh: its init answer carries
// gcompose.two_trees_demo, which gcompose refuses.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"

	"github.com/gcompose/gcompose/adapters/golem/network"
	"github.com/gcompose/gcompose/protocol/sdk"
)

func main() {
	if len(os.Args) > 1 {
		sdk.Main(network.Adapter())
	}
	var out bytes.Buffer
	code := sdk.Run(context.Background(), network.Adapter(), nil, os.Stdin, &out, os.Stderr)
	var answer map[string]any
	if code == 0 && json.Unmarshal(out.Bytes(), &answer) == nil {
		if ext, ok := answer["gcompose"].(map[string]any); ok {
			ext["two_trees_demo"] = "tree b"
		}
		b, _ := json.Marshal(answer)
		out.Reset()
		out.Write(append(b, '\n'))
	}
	os.Stdout.Write(out.Bytes())
	os.Exit(code)
}
EOF
echo "trees at $(git -C "$WORK/a" rev-parse --short HEAD) in $WORK; running $run in $pkg in both at once"
for t in a b; do
	(cd "$WORK/$t" && rc=0 && go test -count=1 -run "$run" "$pkg" >"$WORK/$t.log" 2>&1 || rc=$?; echo $rc >"$WORK/$t.rc") &
done
wait
for t in a b; do
	echo "tree $t: go test exit $(cat "$WORK/$t.rc"); lines naming two_trees_demo: $(grep -c two_trees_demo "$WORK/$t.log" || true)"
	grep -m 2 'two_trees_demo' "$WORK/$t.log" | cut -c1-200 || true
done
ok=true
[ "$(cat "$WORK/a.rc")" = 0 ] && ! grep -q two_trees_demo "$WORK/a.log" || { echo "tree a saw tree b's adapter (or failed): see $WORK/a.log"; ok=false; }
grep -q 'property "two_trees_demo" not allowed' "$WORK/b.log" || { echo "tree b did not see its own adapter: see $WORK/b.log"; ok=false; }
$ok && echo "each tree saw its own adapter"
$ok
