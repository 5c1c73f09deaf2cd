package payments

import (
	"slices"
	"testing"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

func TestCandidates(t *testing.T) {
	acc := func(network, token string, send bool) yagna.Account {
		return yagna.Account{Platform: "erc20-" + network + "-" + token, Driver: "erc20", Network: network, Token: token, Send: send, Address: "0xr"}
	}
	tests := []struct {
		name          string
		accounts      []yagna.Account
		want, skipped []string
	}{
		{"none: what yagna payment fund funds", nil, []string{FundedDefault}, nil},
		{"hoodi before holesky", []yagna.Account{acc("holesky", "tglm", true), acc("hoodi", "tglm", true)},
			[]string{"erc20-hoodi-tglm", "erc20-holesky-tglm"}, nil},
		{"receive-only accounts do not pay", []yagna.Account{acc("hoodi", "tglm", false), acc("sepolia", "tglm", true)},
			[]string{"erc20-sepolia-tglm"}, nil},
		{"mainnet only when named", []yagna.Account{acc("polygon", "glm", true)}, []string{FundedDefault}, []string{"erc20-polygon-glm"}},
		{"testnet and mainnet", []yagna.Account{acc("polygon", "glm", true), acc("holesky", "tglm", true)},
			[]string{"erc20-holesky-tglm"}, []string{"erc20-polygon-glm"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, skipped := Candidates(tt.accounts)
			if !slices.Equal(got, tt.want) || !slices.Equal(skipped, tt.skipped) {
				t.Fatalf("Candidates = %v, %v; want %v, %v", got, skipped, tt.want, tt.skipped)
			}
		})
	}
}
