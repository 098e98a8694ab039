package inventory

import (
	"errors"
	"net/http"

	"github.com/keelwork/keel/module/web"
)

// The module's problem codes (stable: clients branch on them).
const (
	CodeInsufficient  = "inventory_insufficient"
	CodeKeyReused     = "inventory_key_reused"
	CodeConcurrent    = "inventory_concurrent_conflict"
	CodeUnknownSKU    = "inventory_unknown_sku"
	CodeUnknownWH     = "inventory_unknown_warehouse"
	CodeBusy          = "inventory_busy"
	CodeInvalidState  = "inventory_invalid_state"
	CodeNeedsApproval = "inventory_needs_approval"
)

func init() {
	web.Register(CodeInsufficient, http.StatusConflict, "Insufficient stock")
	web.Register(CodeKeyReused, http.StatusConflict, "Idempotency key reused with other parameters")
	web.Register(CodeConcurrent, http.StatusConflict, "Concurrent change: read the stock again")
	web.Register(CodeUnknownSKU, http.StatusBadRequest, "Unknown SKU")
	web.Register(CodeUnknownWH, http.StatusBadRequest, "Unknown warehouse")
	web.Register(CodeBusy, http.StatusTooManyRequests, "Inventory busy: retry later")
	web.Register(CodeInvalidState, http.StatusConflict, "Not allowed in the reservation's state")
	web.Register(CodeNeedsApproval, http.StatusAccepted, "Awaiting a second approver")
}

// Errors the operations return; each is a web problem with its code.
var (
	ErrKeyReused  = errors.New("the idempotency key was used with other parameters")
	ErrConcurrent = errors.New("the stock changed concurrently")
	ErrUnknownSKU = errors.New("unknown SKU")
	ErrUnknownWH  = errors.New("unknown warehouse")
	ErrBusy       = errors.New("inventory busy")
	ErrState      = errors.New("not allowed in the reservation's state")
	ErrNotFound   = errors.New("not found")
)

// problem maps an operation's error to the API's problem.
func problem(err error) error {
	if _, ok := web.As(err); ok {
		return err
	}
	switch {
	case errors.Is(err, ErrKeyReused):
		return web.Problem(CodeKeyReused, "%v", err)
	case errors.Is(err, ErrConcurrent):
		return web.Problem(CodeConcurrent, "%v", err)
	case errors.Is(err, ErrUnknownSKU):
		return web.Problem(CodeUnknownSKU, "%v", err)
	case errors.Is(err, ErrUnknownWH):
		return web.Problem(CodeUnknownWH, "%v", err)
	case errors.Is(err, ErrBusy):
		return web.Problem(CodeBusy, "%v", err)
	case errors.Is(err, ErrState):
		return web.Problem(CodeInvalidState, "%v", err)
	case errors.Is(err, ErrNotFound):
		return web.NotFound("%v", err)
	case errors.Is(err, errInvalid):
		return web.Invalid("%v", err)
	}
	return err
}
