// Package server imports what the server may not.
package server

import (
	_ "github.com/keelwork/keel/keelpgx"
	_ "github.com/keelwork/keel/modules/other"
)
