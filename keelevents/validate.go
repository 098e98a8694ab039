package keelevents

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of an event; EmitTx refuses anything beyond them before writing.
const (
	MaxTopic       = 200
	MaxID          = 200
	MaxKey         = 200
	MaxType        = 200
	MaxPayload     = 1 << 20
	MaxHeaders     = 32
	MaxHeaderName  = 64
	MaxHeaderValue = 1024
	MaxConsumer    = 64
)

// ErrInvalid wraps every validation error: nothing was written.
var ErrInvalid = errors.New("keelevents: invalid")

// ErrConflict is returned by EmitTx for an id already emitted on the topic
// with another payload: an id names one business intent, never two.
var ErrConflict = errors.New("keelevents: event id already emitted with another payload")

// ErrNotFound is returned by reads and actions on what does not exist (or
// no longer is in the state the action needs).
var ErrNotFound = errors.New("keelevents: not found")

// ErrNotRegistered is returned by Replay for a manual event whose consumer
// is not registered in this process (its module was removed, or it runs in
// another service): only the consumer's own handler can apply the event, so
// nothing is done and the event stays manual.
var ErrNotRegistered = errors.New("keelevents: consumer not registered in this process")

// ErrReplayFailed wraps the handler's error when a replayed handler fails
// again: the event stays manual with the new error recorded.
var ErrReplayFailed = errors.New("keelevents: the replayed handler failed again")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// ValidateTopic checks a topic: dot-separated tokens of [a-z0-9_-].
func ValidateTopic(topic string) error {
	if topic == "" || len(topic) > MaxTopic {
		return invalid("topic must be 1..%d bytes, got %d", MaxTopic, len(topic))
	}
	for _, tok := range strings.Split(topic, ".") {
		if tok == "" {
			return invalid("topic %q has an empty token", topic)
		}
		for i := 0; i < len(tok); i++ {
			if !topicByte(tok[i]) {
				return invalid("topic %q: only a-z, 0-9, '_' and '-' between dots", topic)
			}
		}
	}
	return nil
}

func topicByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// ValidatePattern checks a subscription topic: an exact topic, or
// "prefix.>" for everything under prefix.
func ValidatePattern(p string) error {
	if prefix, ok := strings.CutSuffix(p, ".>"); ok {
		if err := ValidateTopic(prefix); err != nil {
			return invalid("pattern %q: its prefix is not a topic", p)
		}
		return nil
	}
	return ValidateTopic(p)
}

// MatchTopic reports whether topic is matched by pattern (see
// ValidatePattern).
func MatchTopic(pattern, topic string) bool {
	if prefix, ok := strings.CutSuffix(pattern, ".>"); ok {
		return strings.HasPrefix(topic, prefix+".")
	}
	return pattern == topic
}

// ValidateID checks an event id: [A-Za-z0-9_.:/-]{1,200}.
func ValidateID(id string) error {
	if id == "" || len(id) > MaxID {
		return invalid("event id must be 1..%d bytes, got %d", MaxID, len(id))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_.:/-", c) >= 0) {
			return invalid("event id %q: only letters, digits and _ . : / -", id)
		}
	}
	return nil
}

// ValidateKey checks an ordering key: printable UTF-8, 1..200 bytes.
func ValidateKey(key string) error {
	if key == "" || len(key) > MaxKey {
		return invalid("ordering key must be 1..%d bytes, got %d", MaxKey, len(key))
	}
	return printable("ordering key", key)
}

func printable(what, s string) error {
	if !utf8.ValidString(s) {
		return invalid("%s is not valid UTF-8", what)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return invalid("%s holds a non-printable character %U", what, r)
		}
	}
	return nil
}

// ValidateConsumer checks a durable consumer name: [a-z0-9_-]{1,64}.
func ValidateConsumer(name string) error {
	if name == "" || len(name) > MaxConsumer {
		return invalid("consumer name must be 1..%d bytes, got %d", MaxConsumer, len(name))
	}
	for i := 0; i < len(name); i++ {
		if !topicByte(name[i]) {
			return invalid("consumer name %q: only a-z, 0-9, '_' and '-'", name)
		}
	}
	return nil
}

// ValidateEvent checks everything EmitTx writes.
func ValidateEvent(ev *Event) error {
	if err := ValidateTopic(ev.Topic); err != nil {
		return err
	}
	if err := ValidateID(ev.ID); err != nil {
		return err
	}
	if err := ValidateKey(ev.Key); err != nil {
		return err
	}
	if len(ev.Type) > MaxType {
		return invalid("type is %d bytes; at most %d", len(ev.Type), MaxType)
	}
	if err := printable("type", ev.Type); err != nil {
		return err
	}
	if len(ev.Payload) == 0 {
		return invalid("payload is empty (send null or {} for none)")
	}
	if len(ev.Payload) > MaxPayload {
		return invalid("payload is %d bytes; at most %d", len(ev.Payload), MaxPayload)
	}
	if !json.Valid(ev.Payload) {
		return invalid("payload is not valid JSON")
	}
	return validateHeaders(ev.Headers)
}

func validateHeaders(h map[string]string) error {
	if len(h) > MaxHeaders {
		return invalid("%d headers; at most %d", len(h), MaxHeaders)
	}
	for k, v := range h {
		if k == "" || len(k) > MaxHeaderName {
			return invalid("header name must be 1..%d bytes", MaxHeaderName)
		}
		for i := 0; i < len(k); i++ {
			c := k[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return invalid("header name %q: only letters, digits, '-' and '_'", k)
			}
		}
		if len(v) > MaxHeaderValue {
			return invalid("header %q is %d bytes; at most %d", k, len(v), MaxHeaderValue)
		}
		if err := printable("header "+k, v); err != nil {
			return err
		}
	}
	return nil
}

// validateSubscription checks and fills a subscription's defaults.
func validateSubscription(sub *Subscription) error {
	if err := ValidateConsumer(sub.Consumer); err != nil {
		return err
	}
	if len(sub.Topics) == 0 {
		return invalid("consumer %s subscribes to no topic", sub.Consumer)
	}
	for _, p := range sub.Topics {
		if err := ValidatePattern(p); err != nil {
			return err
		}
	}
	if sub.AckWait < 0 {
		return invalid("AckWait is negative")
	}
	if sub.InFlight < 0 || sub.InFlight > MaxInFlight {
		return invalid("InFlight must be 0..%d", MaxInFlight)
	}
	if sub.Window < 0 || sub.Window > MaxWindow {
		return invalid("Window must be 0..%d", MaxWindow)
	}
	if sub.Window > 1 && !sub.Ordered {
		return invalid("consumer %s: a Window is for ordered consumers", sub.Consumer)
	}
	if sub.AckWait == 0 {
		sub.AckWait = DefaultAckWait
	}
	for _, b := range sub.Backoff {
		if b < 0 {
			return invalid("a Backoff entry is negative")
		}
	}
	if len(sub.Backoff) == 0 {
		sub.Backoff = DefaultBackoff
	}
	return nil
}
