package smpp_test

import (
	"errors"
	"testing"
	"time"

	"github.com/linxGnu/gosmpp"
	"github.com/linxGnu/gosmpp/data"
	"github.com/linxGnu/gosmpp/pdu"

	"github.com/keelwork/keel/modules/delivery/smpp"
)

var bindTypes = []struct {
	gosmpp pdu.BindingType
	ours   smpp.BindType
}{
	{pdu.Transmitter, smpp.BindTransmitter},
	{pdu.Receiver, smpp.BindReceiver},
	{pdu.Transceiver, smpp.BindTransceiver},
}

func TestBindGoodCredentials(t *testing.T) {
	srv, rec := startServer(t, nil)
	seen := map[string]bool{}
	for _, bt := range bindTypes {
		e := mustDial(t, srv, bt.gosmpp)
		c := next(t, rec.connected, "Connected")
		if c.BindType() != bt.ours || c.AppID() != "app-1" || c.SystemID() != "esme1" || c.InterfaceVersion() != 0x34 {
			t.Errorf("%s: bind %s app %q system_id %q version %#x", bt.ours, c.BindType(), c.AppID(), c.SystemID(), c.InterfaceVersion())
		}
		if seen[c.ID()] || c.RemoteAddr() == nil {
			t.Errorf("%s: id %q reused or no remote address", bt.ours, c.ID())
		}
		seen[c.ID()] = true
		if got := e.sess.Transceiver().SystemID(); got != testSystemID {
			t.Errorf("%s: gosmpp read our system_id as %q", bt.ours, got)
		}
	}
}

// Refusals reach gosmpp as a BindError with the status Authenticate
// chose, for every bind type (the transceiver refusal carries system_id,
// the others no body: what gosmpp can parse).
func TestBindBadCredentials(t *testing.T) {
	srv, rec := startServer(t, nil)
	cases := []struct {
		user, pass string
		want       data.CommandStatusType
	}{
		{"esme1", "wrong", data.ESME_RINVPASWD},
		{"nobody", "secret1", data.ESME_RINVSYSID},
		{brokenLookup, "x", data.ESME_RBINDFAIL},
	}
	for _, bt := range bindTypes {
		for _, c := range cases {
			_, err := dialESME(t, srv, bt.gosmpp, c.user, c.pass, nil)
			var be gosmpp.BindError
			if !errors.As(err, &be) || be.CommandStatus != c.want {
				t.Errorf("%s %s/%s: %v, want %s", bt.ours, c.user, c.pass, err, c.want)
			}
		}
	}
	none(t, rec.connected, "Connected after a refused bind")
}

// bind_resp announces sc_interface_version 3.4 only to 3.4 ESMEs.
func TestBindInterfaceVersion(t *testing.T) {
	srv, rec := startServer(t, nil)
	for _, v := range []uint8{0x34, 0x33, 0x50} {
		r := dialRaw(t, srv)
		r.send(1, &smpp.Bind{Type: smpp.BindTransceiver, SystemID: "esme2", Password: "secret2", InterfaceVersion: v})
		resp := r.expect(smpp.CmdBindTransceiverResp, smpp.StatusOK, 1).(*smpp.BindResp)
		got, ok := resp.TLVs.Uint8(smpp.TagSCInterfaceVersion)
		if resp.SystemID != testSystemID || ok != (v >= 0x34) || (ok && got != 0x34) {
			t.Errorf("version %#x: bind_resp %+v", v, resp)
		}
		if c := next(t, rec.connected, "Connected"); c.InterfaceVersion() != v || c.AppID() != "app-2" {
			t.Errorf("version %#x: conn says %#x app %q", v, c.InterfaceVersion(), c.AppID())
		}
	}
}

// Before a bind every request gets ESME_RINVBNDSTS (an unknown command
// generic_nack ESME_RINVCMDID); a bind afterwards still works.
func TestPDUsBeforeBind(t *testing.T) {
	srv, rec := startServer(t, nil)
	r := dialRaw(t, srv)
	r.send(5, &smpp.EnquireLink{})
	r.expect(smpp.CmdEnquireLinkResp, smpp.StatusInvBndSts, 5)
	r.send(6, &smpp.SubmitSM{})
	r.expect(smpp.CmdSubmitSMResp, smpp.StatusInvBndSts, 6)
	r.write(frame(uint32(smpp.CmdQuerySM), 7, []byte{0, 0, 0, 0}))
	r.expect(smpp.CmdGenericNack, smpp.StatusInvCmdID, 7)
	none(t, rec.submits, "Submit before bind")
	if resp := r.bind(smpp.BindTransceiver); resp.Status != smpp.StatusOK {
		t.Fatalf("bind after stray PDUs: %s", smpp.StatusName(resp.Status))
	}
	next(t, rec.connected, "Connected")
}

// An unbound peer cannot send a large PDU or many stray ones, nor stay
// silent past BindTimeout.
func TestBindLimits(t *testing.T) {
	srv, rec := startServer(t, func(cfg *smpp.Config) { cfg.BindTimeout = 100 * time.Millisecond })
	big := dialRaw(t, srv)
	big.write(frame(uint32(smpp.CmdSubmitSM), 9, make([]byte, 600)))
	big.expect(smpp.CmdGenericNack, smpp.StatusInvCmdLen, 9)
	big.expectEOF()

	patient, _ := startServer(t, nil) // default BindTimeout: only the limit can close
	chatty := dialRaw(t, patient)
	for i := range 8 {
		chatty.send(uint32(i+1), &smpp.EnquireLink{})
		chatty.expect(smpp.CmdEnquireLinkResp, smpp.StatusInvBndSts, uint32(i+1))
	}
	chatty.send(9, &smpp.EnquireLink{})
	chatty.expectEOF()

	dialRaw(t, srv).expectEOF() // silent: BindTimeout closes it
	none(t, rec.connected, "Connected")
}

// A second bind on a bound connection is refused with ESME_RALYBND and
// the session goes on.
func TestBindTwice(t *testing.T) {
	srv, rec := startServer(t, nil)
	r := dialRaw(t, srv)
	r.bind(smpp.BindTransmitter)
	next(t, rec.connected, "Connected")
	r.send(2, &smpp.Bind{Type: smpp.BindReceiver, SystemID: "esme1", Password: "secret1"})
	r.expect(smpp.CmdBindReceiverResp, smpp.StatusAlyBnd, 2)
	r.send(3, &smpp.EnquireLink{})
	r.expect(smpp.CmdEnquireLinkResp, smpp.StatusOK, 3)
}
