package cmpp_test

import (
	"crypto/md5"
	"testing"

	gocmpp "github.com/bigwhite/gocmpp"

	"github.com/keelwork/keel/modules/delivery/cmpp"
)

func TestConnectNegotiatesVersion(t *testing.T) {
	srv, rec := startServer(t, nil)
	cases := []struct {
		typ  gocmpp.Type
		want cmpp.Version
	}{{gocmpp.V20, cmpp.V20}, {gocmpp.V21, cmpp.V20}, {gocmpp.V30, cmpp.V30}}
	seen := map[string]bool{}
	for _, c := range cases {
		mustDial(t, srv, c.typ, "901234")
		conn := next(t, rec.connected, "Connected")
		if conn.Version() != c.want || conn.ClientVersion() != cmpp.Version(c.typ) || conn.AppID() != "app-follow" {
			t.Errorf("%s: version %s client %s app %q", c.typ, conn.Version(), conn.ClientVersion(), conn.AppID())
		}
		if seen[conn.ID()] || conn.RemoteAddr() == nil {
			t.Errorf("%s: id %q reused or no remote address", c.typ, conn.ID())
		}
		seen[conn.ID()] = true
	}
}

// The server's AuthenticatorISMG, which gocmpp does not check, is
// MD5(Status + AuthenticatorSource + secret) with the version's Status
// width.
func TestConnectAuthenticatorISMG(t *testing.T) {
	srv, _ := startServer(t, nil)
	for _, typ := range []gocmpp.Type{gocmpp.V20, gocmpp.V30} {
		raw := dialRaw(t, srv, typ)
		req := &gocmpp.CmppConnReqPkt{SrcAddr: "901234", Secret: "s3cret", Version: typ}
		if err := raw.SendPkt(req, 0); err != nil {
			t.Fatal(err)
		}
		p, err := raw.RecvAndUnpackPkt(waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		var status []byte
		var got string
		switch r := p.(type) {
		case *gocmpp.Cmpp2ConnRspPkt:
			status, got = []byte{r.Status}, r.AuthIsmg
		case *gocmpp.Cmpp3ConnRspPkt:
			status, got = []byte{0, 0, 0, byte(r.Status)}, r.AuthIsmg
		}
		want := md5.Sum(append(append(status, req.AuthSrc...), "s3cret"...))
		if got != string(want[:]) {
			t.Errorf("%s: AuthenticatorISMG %x, want %x (status %v)", typ, got, want, status)
		}
	}
}

func TestConnectRejectsBadCredentials(t *testing.T) {
	srv, rec := startServer(t, nil)
	authFailed := gocmpp.ConnRspStatusErrMap[gocmpp.ErrnoConnAuthFailed]
	for _, typ := range []gocmpp.Type{gocmpp.V20, gocmpp.V30} {
		if _, err := dial(t, srv, typ, "901234", "wrong"); err != authFailed {
			t.Errorf("%s wrong secret: %v, want status 3", typ, err)
		}
		if _, err := dial(t, srv, typ, "999999", "s3cret"); err != authFailed {
			t.Errorf("%s unknown account: %v, want status 3", typ, err)
		}
	}
	none(t, rec.connected, "Connected after failed login")
}

// A version the server cannot speak is answered with status 4 in the
// layout its major number implies, naming 3.0 as the highest, and closed.
func TestConnectRejectsUnsupportedVersion(t *testing.T) {
	srv, rec := startServer(t, nil)

	raw := dialRaw(t, srv, gocmpp.V30)
	r3, ok := raw.login("901234", 0x31).(*gocmpp.Cmpp3ConnRspPkt)
	if !ok || r3.Status != 4 || r3.Version != gocmpp.V30 {
		t.Errorf("0x31: %+v, want 3.0 layout status 4", r3)
	}
	raw.expectEOF()

	raw = dialRaw(t, srv, gocmpp.V20)
	r2, ok := raw.login("901234", 0x13).(*gocmpp.Cmpp2ConnRspPkt)
	if !ok || r2.Status != 4 {
		t.Errorf("0x13: %+v, want 2.0 layout status 4", r2)
	}
	raw.expectEOF()
	none(t, rec.connected, "Connected for unsupported version")
}

func TestConnectMustComeFirst(t *testing.T) {
	srv, rec := startServer(t, nil)
	raw := dialRaw(t, srv, gocmpp.V30)
	if err := raw.SendPkt(&gocmpp.CmppActiveTestReqPkt{}, 0); err != nil {
		t.Fatal(err)
	}
	raw.expectEOF()
	none(t, rec.connected, "Connected without CONNECT")
}
