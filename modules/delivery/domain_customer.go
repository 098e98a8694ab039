package delivery

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Protocol is how an application receives its pushes.
type Protocol string

// Protocols.
const (
	ProtoCMPP20 Protocol = "cmpp20"
	ProtoCMPP30 Protocol = "cmpp30"
	ProtoHTTP   Protocol = "http"
)

// Valid reports whether p is known.
func (p Protocol) Valid() bool { return p == ProtoCMPP20 || p == ProtoCMPP30 || p == ProtoHTTP }

// CMPP reports whether p is a CMPP version.
func (p Protocol) CMPP() bool { return p == ProtoCMPP20 || p == ProtoCMPP30 }

// Application statuses.
const (
	AppEnabled  = "enabled"
	AppDisabled = "disabled"
)

// DefaultAppRate is an application's pushes per second unless set.
const DefaultAppRate = 10

// Enterprise is a customer company.
type Enterprise struct {
	ID        int64
	Name      string
	CreatedAt time.Time
}

// Application is a customer application: its credentials, status,
// delivery capabilities and channel.
type Application struct {
	ID             int64
	EnterpriseID   int64
	EnterpriseName string
	Name           string
	// Account is the customer account: the CMPP Source_Addr (at most 6
	// characters) or the HTTP push account.
	Account string
	Secret  string
	Status  string
	// Protocol is the push channel.
	Protocol      Protocol
	ReportEnabled bool
	MOEnabled     bool
	// ReportCompat sends 3.0 status reports in the 60-byte 2.0 layout, for
	// client libraries that parse only that form.
	ReportCompat bool
	PushURL      string
	// MOCode routes MO messages: the longest MOCode prefixing a DELIVER's
	// Dest_Id names the application.
	MOCode    string
	Rate      float64
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Enabled reports whether the application may receive pushes at all.
func (a *Application) Enabled() bool { return a.Status == AppEnabled }

// Accepts reports whether the application takes pushes of kind k now.
func (a *Application) Accepts(k Kind) bool {
	if !a.Enabled() {
		return false
	}
	switch k {
	case KindReport:
		return a.ReportEnabled
	case KindMO:
		return a.MOEnabled
	}
	return false
}

// FlowKey is the engine flow key of the application's pushes.
func (a *Application) FlowKey() string { return appKey(a.ID) }

func appKey(id int64) string { return "app:" + strconv.FormatInt(id, 10) }

// appOfKey parses "app:<id>" (or a batch-scoped "batch:<n>:app:<id>").
func appOfKey(key string) (int64, bool) {
	i := strings.LastIndex(key, "app:")
	if i < 0 {
		return 0, false
	}
	id, err := strconv.ParseInt(key[i+4:], 10, 64)
	return id, err == nil && id > 0
}

// NewApplication is what creating an application takes.
type NewApplication struct {
	EnterpriseID  int64
	Name          string
	Account       string
	Secret        string
	Protocol      Protocol
	ReportEnabled bool
	MOEnabled     bool
	ReportCompat  bool
	PushURL       string
	MOCode        string
	Rate          float64 // 0 = DefaultAppRate
	Disabled      bool
}

func (n *NewApplication) validate() error {
	switch {
	case n.EnterpriseID <= 0:
		return fmt.Errorf("enterprise is required")
	case n.Name == "" || len(n.Name) > 200:
		return fmt.Errorf("name must be 1 to 200 characters")
	case !n.Protocol.Valid():
		return fmt.Errorf("protocol %q is not cmpp20, cmpp30 or http", n.Protocol)
	case n.Protocol.CMPP() && (len(n.Account) < 1 || len(n.Account) > 6):
		return fmt.Errorf("a CMPP account (Source_Addr) is 1 to 6 characters, got %q", n.Account)
	case len(n.Account) < 1 || len(n.Account) > 32:
		return fmt.Errorf("account must be 1 to 32 characters")
	case n.Secret == "":
		return fmt.Errorf("secret is required")
	case n.Protocol == ProtoHTTP && !strings.HasPrefix(n.PushURL, "http"):
		return fmt.Errorf("an HTTP application needs a push URL")
	case n.Rate < 0:
		return fmt.Errorf("rate must not be negative")
	}
	return nil
}
