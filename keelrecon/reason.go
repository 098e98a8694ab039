package keelrecon

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
)

// MinReason is the shortest reason an operator action accepts (in
// characters, after trimming): an incident, a ticket, an explanation.
const MinReason = 5

// MaxReason is the longest, the audit log's bound.
const MaxReason = keel.MaxAuditReason

// CheckReason validates an operator's reason before anything is written:
// MinReason..MaxReason characters after trimming, valid UTF-8, no control
// characters other than newlines and tabs (a NUL would not survive
// PostgreSQL's text type).
func CheckReason(reason string) (string, error) {
	if !utf8.ValidString(reason) {
		return "", fmt.Errorf("%w: reason is not valid UTF-8", keeltype.ErrInvalidArgument)
	}
	for _, r := range reason {
		if unicode.IsControl(r) && r != '\n' && r != '\t' && r != '\r' {
			return "", fmt.Errorf("%w: reason holds a control character (%U)", keeltype.ErrInvalidArgument, r)
		}
	}
	reason = strings.TrimSpace(reason)
	switch n := utf8.RuneCountInString(reason); {
	case n < MinReason:
		return "", fmt.Errorf("%w: reason must say why in at least %d characters", keeltype.ErrInvalidArgument, MinReason)
	case n > MaxReason:
		return "", fmt.Errorf("%w: reason is %d characters; at most %d", keeltype.ErrInvalidArgument, n, MaxReason)
	}
	return reason, nil
}
