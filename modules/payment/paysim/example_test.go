package paysim_test

import (
	"context"
	"fmt"

	"github.com/keelwork/keel/modules/payment/channel"
	"github.com/keelwork/keel/modules/payment/paysim"
)

// A test or `keel dev` starts the simulator, configures a channel from it
// and talks to it as to the real channel.
func Example() {
	ctx := context.Background()
	sim, err := paysim.Start(ctx, paysim.Options{TimeScale: 3600})
	if err != nil {
		panic(err)
	}
	defer sim.Close()
	wx, err := channel.New(ctx, sim.Config(channel.KindWeChat))
	if err != nil {
		panic(err)
	}
	sim.Create(channel.KindWeChat, "T20260714001", 128800, "CNY")
	_ = sim.PayWithoutCallback(channel.KindWeChat, "T20260714001")
	n, err := wx.Client.QueryPayment(ctx, "T20260714001")
	if err != nil {
		panic(err)
	}
	fmt.Println(n.State, n.AmountMinor, n.Currency, sim.Queries("T20260714001"))
	// Output: paid 128800 CNY 1
}
