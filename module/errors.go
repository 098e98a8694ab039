package module

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// MaxBodyBytes bounds every module request body (the same as the admin
// API's).
const MaxBodyBytes = 1 << 20

// Error is a problem a module reports: the server writes it as
// application/problem+json with Status and the stable Code. Engine errors
// (keeltype.ErrNotFound, ErrInvalidArgument, ErrInvalidState) need no
// wrapping: the server maps them itself.
type Error struct {
	Status int
	Code   string
	Detail string
}

func (e *Error) Error() string { return e.Code + ": " + e.Detail }

// Errorf builds an *Error.
func Errorf(status int, code, format string, args ...any) error {
	return &Error{Status: status, Code: code, Detail: fmt.Sprintf(format, args...)}
}

// Invalid is a 400 invalid_argument problem.
func Invalid(format string, args ...any) error {
	return Errorf(http.StatusBadRequest, "invalid_argument", format, args...)
}

// Decode reads a JSON object into v strictly: application/json only, at
// most MaxBodyBytes, no unknown fields, no trailing data. Its errors are
// *Error values with the admin API's codes (invalid_json, unknown_field,
// invalid_argument, unsupported_media_type, body_too_large).
func Decode(w http.ResponseWriter, r *http.Request, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return Errorf(http.StatusRequestEntityTooLarge, "body_too_large", "bodies are limited to %d bytes", tooLarge.Limit)
		}
		return Errorf(http.StatusBadRequest, "invalid_json", "reading the body: %v", err)
	}
	if len(strings.TrimSpace(string(raw))) == 0 {
		return Errorf(http.StatusBadRequest, "invalid_json", "a JSON body is required")
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return Errorf(http.StatusUnsupportedMediaType, "unsupported_media_type", "send Content-Type: application/json")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeProblem(err)
	}
	if dec.More() {
		return Errorf(http.StatusBadRequest, "invalid_json", "trailing data after the JSON object")
	}
	return nil
}

func decodeProblem(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return Errorf(http.StatusBadRequest, "invalid_json", "body is not valid JSON")
	case errors.As(err, &typ):
		return Invalid("field %q must be %s, got %s", typ.Field, typ.Type, typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return Errorf(http.StatusBadRequest, "unknown_field", "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return Errorf(http.StatusBadRequest, "invalid_json", "body is not a valid JSON object")
}
