package module

import (
	"context"
	"fmt"
	"sync"
)

// Services is where one module offers a service that another module of
// the same server uses, without either importing the other (modules never
// import each other): the provider offers an implementation of an
// interface defined here, in its constructor; the user asks for it when it
// needs it and works without it when none is offered (and says so). One
// Services is shared by every module of one server (Host.Services); a nil
// *Services offers nothing.
type Services struct {
	mu    sync.RWMutex
	sms   SMSSender
	smsBy string
}

// NewServices is an empty registry.
func NewServices() *Services { return &Services{} }

// SMS is one text message to send.
type SMS struct {
	// Key makes sending idempotent: a second SendSMS with the same key
	// sends nothing more and returns the first one's reference.
	Key string
	// Account names who sends it on the platform (for the delivery
	// module: the account of the customer application the message goes
	// out as).
	Account string
	// Phones are the recipients (digits, an optional leading +).
	Phones []string
	// Text is the message (a provider may cut it to one SMS).
	Text string
}

// SMSSender sends text messages through an SMS platform.
type SMSSender interface {
	// SendSMS accepts m for sending and returns the platform's reference
	// of it. A nil error means the platform recorded the message and will
	// send it (durably: it survives a restart of either side); an error
	// wrapping keeltype.ErrInvalidArgument means m can never be sent.
	SendSMS(ctx context.Context, m SMS) (ref string, err error)
}

// OfferSMS registers the SMS sender of module by; a second offer is
// refused (one platform sends a server's messages).
func (s *Services) OfferSMS(by string, x SMSSender) error {
	if s == nil {
		return nil // the host offers no registry: nobody can ask either
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sms != nil {
		return fmt.Errorf("module %s offers an SMS sender, but module %s does already", by, s.smsBy)
	}
	s.sms, s.smsBy = x, by
	return nil
}

// SMS returns the offered SMS sender and the module offering it; nil and
// "" when none is.
func (s *Services) SMS() (SMSSender, string) {
	if s == nil {
		return nil, ""
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.sms, s.smsBy
}
