// Package auth holds the server's identities: API tokens (random 32 bytes,
// shown once, stored as a SHA-256 hash), console sessions and the three
// roles every route requires one of.
package auth

import (
	"fmt"

	"github.com/keelwork/keel/keeltype"
)

// Role orders what an identity may do; a higher role may do everything a
// lower one may.
type Role int

const (
	// RoleNone is an anonymous request: only public routes.
	RoleNone Role = iota
	// RoleViewer reads.
	RoleViewer
	// RoleOperator also takes control actions (cancel, retry, pause, ...).
	RoleOperator
	// RoleAdmin also manages tokens, flow limits and settings.
	RoleAdmin
)

var roleNames = map[Role]string{RoleNone: "none", RoleViewer: "viewer", RoleOperator: "operator", RoleAdmin: "admin"}

// String is the role's stable name.
func (r Role) String() string { return roleNames[r] }

// Allows reports whether r may do what need requires.
func (r Role) Allows(need Role) bool { return r >= need }

// ParseRole reads viewer, operator or admin.
func ParseRole(s string) (Role, error) {
	for r, n := range roleNames {
		if n == s && r != RoleNone {
			return r, nil
		}
	}
	return RoleNone, fmt.Errorf("%w: role must be viewer, operator or admin, got %q", keeltype.ErrInvalidArgument, s)
}

// Principal is the authenticated identity of a request.
type Principal struct {
	TokenID int64
	Name    string
	Role    Role
	// CSRF is the session's anti-forgery token; empty for bearer tokens,
	// which are not sent automatically by browsers and need none.
	CSRF string
	// ActorName, if set, is audited instead of "token:<Name>" (the CLI's
	// local mode, which uses no token, audits "cli:<os user>").
	ActorName string
}

// Actor is the name audited for the principal's actions.
func (p *Principal) Actor() string {
	if p.ActorName != "" {
		return p.ActorName
	}
	return "token:" + p.Name
}
