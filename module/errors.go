package module

import (
	"net/http"

	"github.com/keelwork/keel/module/web"
)

// MaxBodyBytes bounds every module request body (the same as the admin
// API's).
const MaxBodyBytes = web.MaxBodyBytes

// Error is a problem a module reports: the server writes it as
// application/problem+json with Status and the stable Code. Engine errors
// (keeltype.ErrNotFound, ErrInvalidArgument, ErrInvalidState) need no
// wrapping: the server maps them itself. It is web.Error: the one problem
// type of the API and every module.
type Error = web.Error

// Errorf builds an *Error.
func Errorf(status int, code, format string, args ...any) error {
	return web.Errorf(status, code, format, args...)
}

// Invalid is a 400 invalid_argument problem.
func Invalid(format string, args ...any) error { return web.Invalid(format, args...) }

// Decode reads a required JSON object into v strictly (see web.Decode:
// null, arrays and scalars are refused, as are unknown fields).
func Decode(w http.ResponseWriter, r *http.Request, v any) error { return web.Decode(w, r, v) }
