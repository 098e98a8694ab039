package jetstream

// ServerPins reports whether b's server has pinned consumers, for the
// tests of the fallback.
func ServerPins(b *Bus) bool { return serverPins(b.nc.ConnectedServerVersion()) }
