package devnet_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// TestRegistryDownloadRoundTrip: the task package the devnet's registry
// answers for a hash deploys that image on its providers, and a package
// whose URL is the registry's download URL of another hash is refused at
// deploy, as a real provider refuses an image whose sha3 is not the
// package's.
func TestRegistryDownloadRoundTrip(t *testing.T) {
	e := start(t, devnet.Config{})
	buildProviderImage(t, e.docker)
	ctx := ctxT(t, 3*time.Minute)

	// No app key: the registry's API is open, as the registry's.
	resp, err := http.Get(e.url + "/v1/image/info?hash=" + testHash + "&count=false")
	if err != nil {
		t.Fatal(err)
	}
	var img struct{ SHA3, HTTP string }
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &img) != nil || img.SHA3 != testHash || img.HTTP != e.url+"/download/"+testHash {
		t.Fatalf("GET /v1/image/info?hash=%s: %d %s", testHash, resp.StatusCode, body)
	}
	// Neither or both of tag and hash: 400.
	for _, q := range []string{"", "?tag=a:b&hash=" + testHash} {
		resp, err := http.Get(e.url + "/v1/image/info" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET /v1/image/info%s: %d, want 400", q, resp.StatusCode)
		}
	}

	neg := e.rent(ctx, "hash:sha3:"+testHash+":"+img.HTTP)
	act, err := e.c.CreateActivity(ctx, neg.agreement)
	if err != nil {
		t.Fatal(err)
	}
	res := e.exec(ctx, act.ActivityID, yagna.ExeScriptCommand{Deploy: &yagna.DeployCommand{}}, yagna.ExeScriptCommand{Start: &yagna.StartCommand{}},
		run("/bin/sh", "-c", "echo deployed"))
	if len(res) != 3 || res[2].Stdout != "deployed\n" {
		t.Fatalf("deploy of the registry's package: %+v", res)
	}
	if err := e.c.DestroyActivity(ctx, act.ActivityID); err != nil {
		t.Fatal(err)
	}
	if err := e.c.TerminateAgreement(ctx, neg.agreement, nil); err != nil {
		t.Fatal(err)
	}

	other := strings.Repeat("ab", 28)
	neg = e.rent(ctx, "hash:sha3:"+testHash+":"+e.url+"/download/"+other)
	act, err = e.c.CreateActivity(ctx, neg.agreement)
	if err != nil {
		t.Fatal(err)
	}
	res = e.exec(ctx, act.ActivityID, yagna.ExeScriptCommand{Deploy: &yagna.DeployCommand{}})
	if len(res) != 1 || res[0].Result != yagna.ResultError || !strings.Contains(res[0].Message, "has hash "+other+", not "+testHash) {
		t.Errorf("deploy of a package whose URL names another hash: %+v", res)
	}
}
