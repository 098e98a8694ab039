package payment

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/keelwork/keel/module"
)

// perr is base's problem (status and stable code) with its own detail.
func perr(base error, format string, args ...any) error {
	var e *module.Error
	if !errors.As(base, &e) {
		return fmt.Errorf(format, args...)
	}
	return module.Errorf(e.Status, e.Code, format, args...)
}

// isProblem reports whether err is base's problem (the same code).
func isProblem(err, base error) bool {
	var a, b *module.Error
	return errors.As(err, &a) && errors.As(base, &b) && a.Code == b.Code
}

// writeProblem writes a problem+json where no server writes it for us
// (the public callback ingress).
func writeProblem(w http.ResponseWriter, err error) {
	var e *module.Error
	if !errors.As(err, &e) {
		e = &module.Error{Status: http.StatusInternalServerError, Code: "internal", Detail: "internal error"}
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": http.StatusText(e.Status),
		"status": e.Status, "code": e.Code, "detail": e.Detail})
}

func itoa(i int) string { return strconv.Itoa(i) }
