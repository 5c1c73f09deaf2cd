package payments

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// FundedDefault is the platform `yagna payment fund` funds today (its
// default network is Hoodi: yagna core/model/src/payment.rs; golem-js
// defaults to it too, src/shared/utils/env.ts). yagna's own default for an
// allocation that names no platform is still Holesky
// (core/payment/src/api/allocations/mod.rs DEFAULT_TESTNET_NETWORK), which is
// why an allocation must name its platform.
const FundedDefault = "erc20-hoodi-tglm"

// testnetOrder ranks the testnets (yagna's fundable networks, NetworkName::is_fundable):
// Hoodi first, what `yagna payment fund` funds.
var testnetOrder = []string{"hoodi", "holesky", "sepolia", "amoy", "goerli"}

// mainnets spend real GLM: never chosen without the descriptor naming them.
var mainnets = []string{"polygon", "mainnet"}

// Candidates are the platforms to try, in order, when the descriptor names
// none: the requestor's sending accounts on testnets (yagna lists one per
// platform its identity is initialised on, getRequestorAccounts), Hoodi
// first; the Hoodi default when there is none. Accounts say nothing of the
// funds: the caller tries each until yagna accepts an allocation. skipped
// are the mainnet platforms left out.
func Candidates(accounts []yagna.Account) (platforms, skipped []string) {
	rank := func(network string) int {
		if i := slices.Index(testnetOrder, network); i >= 0 {
			return i
		}
		return len(testnetOrder)
	}
	var testnets []yagna.Account
	for _, a := range accounts {
		switch {
		case !a.Send || a.Platform == "":
		case slices.Contains(mainnets, a.Network):
			if !slices.Contains(skipped, a.Platform) {
				skipped = append(skipped, a.Platform)
			}
		default:
			testnets = append(testnets, a)
		}
	}
	slices.SortStableFunc(testnets, func(a, b yagna.Account) int { return rank(a.Network) - rank(b.Network) })
	for _, a := range testnets {
		if !slices.Contains(platforms, a.Platform) {
			platforms = append(platforms, a.Platform)
		}
	}
	if len(platforms) == 0 {
		platforms = []string{FundedDefault}
	}
	return platforms, skipped
}

// allocate creates the allocation: on the platform the config names, else
// on the first of the requestor's funded testnet accounts.
func allocate(ctx context.Context, yc *yagna.Client, cfg Config, timeout time.Time) (yagna.Allocation, error) {
	na := yagna.NewAllocation{TotalAmount: cfg.Budget, Address: cfg.Address, MakeDeposit: false, Timeout: &timeout}
	if cfg.Platform != "" {
		na.PaymentPlatform = &yagna.PaymentPlatform{Name: cfg.Platform}
		a, err := yc.CreateAllocation(ctx, na)
		if err != nil {
			return a, fmt.Errorf("creating an allocation of %s GLM on %s: %w", cfg.Budget, cfg.Platform, err)
		}
		return a, nil
	}
	accounts, err := yc.RequestorAccounts(ctx)
	if err != nil {
		return yagna.Allocation{}, fmt.Errorf("listing the requestor's payment accounts: %w", err)
	}
	platforms, mainnet := Candidates(accounts)
	var refused []error
	for _, p := range platforms {
		na.PaymentPlatform = &yagna.PaymentPlatform{Name: p}
		a, err := yc.CreateAllocation(ctx, na)
		if err == nil {
			return a, nil
		}
		if !yagna.IsProblem(err, "insufficient-account-funds") {
			return a, fmt.Errorf("creating an allocation of %s GLM on %s: %w", cfg.Budget, p, err)
		}
		refused = append(refused, fmt.Errorf("%s: %w", p, err))
	}
	hint := "fund a testnet account (`yagna payment fund` funds " + FundedDefault + ") or name the platform in the payments resource (resources: golem-payments: config: platform)"
	if len(mainnet) > 0 {
		hint += "; " + strings.Join(mainnet, ", ") + " spend real GLM and are used only when named"
	}
	return yagna.Allocation{}, fmt.Errorf("no payment account can cover a budget of %s GLM (%s): %w", cfg.Budget, hint, errors.Join(refused...))
}
