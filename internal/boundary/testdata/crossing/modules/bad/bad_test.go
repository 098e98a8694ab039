package bad

import (
	_ "github.com/keelwork/keel/keelpgx"
	_ "github.com/keelwork/keel/modules/other"
)

// A module's tests may run it inside the server and open a driver; the
// test above imports keelpgx and expects no violation for it.
