package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 1 << 20

// Decode reads a required JSON object into v strictly: application/json
// only, at most MaxBodyBytes, an object (never null, an array or a
// scalar), no unknown fields, no trailing data.
func Decode(w http.ResponseWriter, r *http.Request, v any) error {
	return decode(w, r, v, false)
}

// DecodeOptional is Decode for a body that may be left out: an empty body
// leaves v untouched; a body that is sent obeys Decode's rules (so null is
// refused).
func DecodeOptional(w http.ResponseWriter, r *http.Request, v any) error {
	return decode(w, r, v, true)
}

func decode(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return Problem(CodeBodyTooLarge, "bodies are limited to %d bytes", tooLarge.Limit)
		}
		return Problem(CodeInvalidJSON, "the body could not be read")
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		if optional {
			return nil
		}
		return Problem(CodeInvalidJSON, "a JSON body is required")
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return Problem(CodeUnsupportedMedia, "send Content-Type: application/json")
	}
	if !utf8.Valid(trimmed) {
		// encoding/json would store U+FFFD in place of each bad byte.
		return Problem(CodeInvalidJSON, "the body is not valid UTF-8")
	}
	if trimmed[0] != '{' {
		return Invalid("the body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeProblem(err)
	}
	if dec.More() {
		return Problem(CodeInvalidJSON, "trailing data after the JSON object")
	}
	return nil
}

func decodeProblem(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return Problem(CodeInvalidJSON, "body is not valid JSON")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return Invalid("the body must be a JSON object")
		}
		return Invalid("field %q must be %s, got %s", typ.Field, typeWord(typ.Type.String()), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return Problem(CodeUnknownField, "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return Problem(CodeInvalidJSON, "body is not a valid JSON object")
}

// typeWord names a Go type for a person ("an integer", not "int64").
func typeWord(t string) string {
	t = strings.TrimPrefix(t, "*")
	switch t {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer in range"
	case "float32", "float64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "time.Time":
		return "an RFC 3339 time"
	}
	if strings.HasPrefix(t, "[]") {
		return "a list"
	}
	return "an object"
}
