package delivery

import (
	"context"
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
	"unicode/utf8"

	cmpputils "github.com/bigwhite/gocmpp/utils"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/modules/delivery/cmpp"
)

// smsService is the platform's SMS sender offered to the server's other
// modules (module.Services): a message is sent exactly as a customer
// application's CMPP SUBMIT is, on behalf of the application whose account
// the message names — recorded as the application's submit, then
// forwarded to the carrier over the upstream CMPP link by the forward job,
// its status report (when the application takes reports) coming back and
// pushed to the application like any other.
type smsService[TTx any] struct{ m *Module[TTx] }

// offerSMS offers the platform's SMS sender to the other modules.
func (m *Module[TTx]) offerSMS(h *module.Host[TTx]) error {
	return h.Services.OfferSMS(LineName, smsService[TTx]{m})
}

var phonePattern = regexp.MustCompile(`^\+?[0-9]{5,20}$`)

// smsMaxRunes is what one UCS2 SMS holds (140 bytes): longer text is cut,
// as the upstream link sends single messages.
const smsMaxRunes = 70

// SendSMS implements module.SMSSender. The message's key gives its Msg_Id
// under the application (a hash, so a repeated key finds the first
// submit), and the submit and its forward job are written in one
// transaction.
func (s smsService[TTx]) SendSMS(ctx context.Context, msg module.SMS) (string, error) {
	m := s.m
	if msg.Key == "" || msg.Text == "" || len(msg.Phones) == 0 || len(msg.Phones) > 100 {
		return "", fmt.Errorf("%w: an SMS needs a key, a text and 1 to 100 phones", keeltype.ErrInvalidArgument)
	}
	for _, p := range msg.Phones {
		if !phonePattern.MatchString(p) {
			return "", fmt.Errorf("%w: %q is not a phone number", keeltype.ErrInvalidArgument, p)
		}
	}
	app, ok := m.apps.account(msg.Account)
	if !ok {
		return "", fmt.Errorf("%w: no application with account %q sends SMS here", keeltype.ErrInvalidArgument, msg.Account)
	}
	if !app.Enabled() {
		return "", fmt.Errorf("application %s (%s) is disabled", app.Name, app.Account)
	}
	if m.set.UpstreamAddr == "" {
		return "", fmt.Errorf("the SMS platform has no carrier link (delivery.upstream_addr)")
	}
	text := msg.Text
	if utf8.RuneCountInString(text) > smsMaxRunes {
		text = string([]rune(text)[:smsMaxRunes-1]) + "…"
	}
	content, err := cmpputils.Utf8ToUcs2(text)
	if err != nil {
		return "", fmt.Errorf("%w: the text cannot be encoded: %v", keeltype.ErrInvalidArgument, err)
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(msg.Key))
	msgID := strconv.FormatUint(h.Sum64(), 10)
	sub := &Submit{AppID: app.ID, MsgID: msgID, Phones: msg.Phones, SrcID: app.MOCode, MsgFmt: int(cmpp.FmtUCS2),
		Content: []byte(content), WantReport: app.ReportEnabled}
	cl := m.client.Load()
	if cl == nil {
		return "", fmt.Errorf("the SMS platform is not started")
	}
	err = m.st.db.InTx(ctx, func(tx txOf[TTx]) error {
		created, err := m.st.insertSubmit(ctx, tx, sub)
		if err != nil || !created {
			return err // sent before under this key: the same submit
		}
		_, err = cl.InsertTx(ctx, tx.Native(), ForwardArgs{AppID: app.ID, MsgID: msgID},
			&keel.InsertOpts{Queue: QueueAux, IdempotencyKey: "forward:" + app.Account + ":" + msgID})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("recording the SMS: %w", err)
	}
	return app.Account + ":" + msgID, nil
}
