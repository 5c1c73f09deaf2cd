// Package tag is how the Golem adapters mark what they create on yagna with
// the app, the state's lineage and the operation that made it, where yagna
// lets an object carry a mark, so that a later call finds it again
// (CONTRACT-10: the adoption of an interrupted operation's objects, and the
// sweep of objects that no state names).
//
//   - demands, and so agreements (an agreement carries its demand's
//     properties: GET /market-api/v1/agreements/{id} .demand.properties):
//     properties gcompose.app, gcompose.lineage, gcompose.operation and
//     gcompose.resource, and a VPN member's gcompose.config;
//   - agreements besides: the appSessionId given at confirm, which yagna
//     stores with the agreement and filters on exactly
//     (core/market/src/db/dao/agreement.rs list: session_id.eq), so that
//     GET /agreements?appSessionId= lists one app's agreements;
//   - allocations, which have no free field: their timeout is an exact
//     instant we choose, whose nanoseconds carry a lineage tag and an
//     operation tag (yagna keeps the timeout as given, to the nanosecond:
//     core/payment/src/models/allocation.rs);
//   - long-lived containers: Docker labels (adapters/golem/payments/longlived).
//
// A VPN carries nothing of the kind (POST /net-api/v1/net takes ip, mask and
// gateway only), so a VPN cannot be told from another app's with the same
// range.
package tag

import (
	"hash/fnv"
	"time"
)

// Demand properties (flat keys).
const (
	App       = "gcompose.app"
	Lineage   = "gcompose.lineage"
	Operation = "gcompose.operation"
	Resource  = "gcompose.resource"
	// Config is the fingerprint of the config a VPN member's rental was
	// made for (adapters/golem/lowering vpn_members "config"): the plan
	// tells a member that keeps its provider from one this deploy
	// rebuilds by comparing it with the member's new fingerprint.
	Config = "gcompose.config"
)

// SessionID is the appSessionId of an app's agreements.
func SessionID(app string) string { return "gcompose/" + app }

// The nanoseconds of a tagged allocation timeout are the lineage tag (5
// digits) times opSpan plus the operation tag (4 digits).
const opSpan = 10000

func hashMod(s string, n uint32) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return int(h.Sum32() % n)
}

// LineageTag is a lineage's tag in 1..99999, never a multiple of 100 (0
// means untagged), and OperationTag an operation's in 1..9999, never a
// multiple of 1000: so a timeout given to the millisecond or the microsecond,
// as clients set them, never carries a tag.
func LineageTag(lineage string) int {
	if lineage == "" {
		return 0
	}
	h := hashMod("lineage/"+lineage, 99*1000)
	return (h/99)*100 + h%99 + 1
}

// OperationTag: see LineageTag.
func OperationTag(op string) int {
	h := hashMod("operation/"+op, 999*10)
	return (h/999)*1000 + h%999 + 1
}

// Timeout is an allocation timeout near at (truncated to the second) whose
// nanoseconds tag the lineage and the operation. Without a lineage it is
// at, truncated: untagged.
func Timeout(at time.Time, lineage, op string) time.Time {
	base := at.UTC().Truncate(time.Second)
	lt := LineageTag(lineage)
	if lt == 0 {
		return base
	}
	return base.Add(time.Duration(lt*opSpan + OperationTag(op)))
}

// Retime is t moved to at (truncated to the second), keeping t's tags: what
// an extension of a tagged allocation sets.
func Retime(t, at time.Time) time.Time {
	return at.UTC().Truncate(time.Second).Add(time.Duration(t.Nanosecond()))
}

// TimeoutTags reads the tags of a timeout; lineage 0 means untagged.
func TimeoutTags(t time.Time) (lineage, op int) {
	ns := t.Nanosecond()
	return ns / opSpan, ns % opSpan
}

// OfLineage tells whether a timeout carries the lineage's tag. Tags are
// hashes: a foreign allocation whose timeout was given to the nanosecond and
// happens to carry the same digits would match (none given to the second,
// millisecond or microsecond can).
func OfLineage(t time.Time, lineage string) bool {
	lt, _ := TimeoutTags(t)
	return lt != 0 && lt == LineageTag(lineage)
}

// OfOperation tells whether a timeout carries the lineage's and the
// operation's tags.
func OfOperation(t time.Time, lineage, op string) bool {
	lt, ot := TimeoutTags(t)
	return lt != 0 && lt == LineageTag(lineage) && ot == OperationTag(op)
}
