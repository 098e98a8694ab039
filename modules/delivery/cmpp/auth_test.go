package cmpp_test

import (
	"testing"
	"time"

	gocmpp "github.com/bigwhite/gocmpp"

	"github.com/keelwork/keel/modules/delivery/cmpp"
)

// The client's AuthenticatorSource as gocmpp computes it (including its
// zero padding of a short Source_Addr) verifies; a wrong secret does not.
func TestVerifyConnectAgainstGocmpp(t *testing.T) {
	for _, addr := range []string{"901234", "9012"} {
		pkt := &gocmpp.CmppConnReqPkt{SrcAddr: addr, Secret: "s3cret", Version: gocmpp.V30, Timestamp: 814093005}
		b, err := pkt.Pack(0)
		if err != nil {
			t.Fatal(err)
		}
		_, p, err := cmpp.Decode(cmpp.V30, b)
		if err != nil {
			t.Fatal(err)
		}
		c := p.(*cmpp.Connect)
		if !cmpp.VerifyConnect(c, "s3cret") {
			t.Errorf("%q: good secret rejected", addr)
		}
		if cmpp.VerifyConnect(c, "s3cre") {
			t.Errorf("%q: wrong secret accepted", addr)
		}
	}
}

// AuthenticatorISMG matches gocmpp's server-side computation for both
// Status widths.
func TestAuthenticatorISMGAgainstGocmpp(t *testing.T) {
	src := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	r2 := &gocmpp.Cmpp2ConnRspPkt{Status: 0, AuthSrc: string(src[:]), Secret: "k", Version: gocmpp.V20}
	r3 := &gocmpp.Cmpp3ConnRspPkt{Status: 0, AuthSrc: string(src[:]), Secret: "k", Version: gocmpp.V30}
	if _, err := r2.Pack(1); err != nil {
		t.Fatal(err)
	}
	if _, err := r3.Pack(1); err != nil {
		t.Fatal(err)
	}
	if got := cmpp.AuthenticatorISMG(cmpp.V20, 0, src, "k"); string(got[:]) != r2.AuthIsmg {
		t.Error("2.0 AuthenticatorISMG differs")
	}
	if got := cmpp.AuthenticatorISMG(cmpp.V30, 0, src, "k"); string(got[:]) != r3.AuthIsmg {
		t.Error("3.0 AuthenticatorISMG differs")
	}
	if cmpp.AuthenticatorISMG(cmpp.V20, 0, src, "k") == cmpp.AuthenticatorISMG(cmpp.V30, 0, src, "k") {
		t.Error("status width does not change the digest")
	}
}

func TestTimestamp(t *testing.T) {
	if got := cmpp.Timestamp(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)); got != 102030405 {
		t.Errorf("timestamp %d", got)
	}
}
