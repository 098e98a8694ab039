package jetstream

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/keelwork/keel/keelevents"
)

// metaHeader carries everything of a message but its payload, as JSON: the
// key and the caller's headers may hold characters a NATS header line
// cannot, and one header is cheaper to parse than seven.
const metaHeader = "Keel-Event"

type meta struct {
	Topic     string            `json:"t"`
	ID        string            `json:"i"`
	Key       string            `json:"k"`
	Type      string            `json:"y,omitempty"`
	Partition int               `json:"p"`
	Digest    string            `json:"d,omitempty"`
	EmittedAt time.Time         `json:"e"`
	Headers   map[string]string `json:"h,omitempty"`
}

// msgID is the Nats-Msg-Id of a message: the stream's duplicate window
// absorbs a republish of the same topic and id.
func msgID(m *keelevents.Message) string { return m.Topic + "/" + m.ID }

func encode(m *keelevents.Message, subject string) (*nats.Msg, error) {
	b, err := json.Marshal(meta{Topic: m.Topic, ID: m.ID, Key: m.Key, Type: m.Type, Partition: m.Partition,
		Digest: m.Digest, EmittedAt: m.EmittedAt.UTC(), Headers: m.Headers})
	if err != nil {
		return nil, fmt.Errorf("encoding event %s: %w", msgID(m), err)
	}
	h := nats.Header{}
	h[metaHeader] = []string{string(b)}
	h[nats.MsgIdHdr] = []string{msgID(m)}
	return &nats.Msg{Subject: subject, Data: m.Payload, Header: h}, nil
}

func decode(nm *nats.Msg) (keelevents.Message, error) {
	var md meta
	v := nm.Header.Get(metaHeader)
	if v == "" {
		return keelevents.Message{}, fmt.Errorf("message on %s has no %s header", nm.Subject, metaHeader)
	}
	if err := json.Unmarshal([]byte(v), &md); err != nil {
		return keelevents.Message{}, fmt.Errorf("decoding the %s header of a message on %s: %w", metaHeader, nm.Subject, err)
	}
	return keelevents.Message{Topic: md.Topic, ID: md.ID, Key: md.Key, Type: md.Type, Partition: md.Partition,
		Payload: nm.Data, Headers: md.Headers, Digest: md.Digest, EmittedAt: md.EmittedAt.UTC()}, nil
}

// natsMsg gives decode the subject, headers and data of a JetStream message.
func natsMsg(m jetstream.Msg) *nats.Msg {
	return &nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()}
}
