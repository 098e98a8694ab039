// Package bad crosses every boundary a module must keep.
package bad

import (
	_ "github.com/keelwork/keel"
	_ "github.com/keelwork/keel/internal/secret"
	_ "github.com/keelwork/keel/keeldriver"
	_ "github.com/keelwork/keel/module"
	_ "github.com/keelwork/keel/modules/bad/sub"
	_ "github.com/keelwork/keel/modules/other"
	_ "github.com/keelwork/keel/server"
)
