package durable

// platforms are the platforms a Linux binary has: its own and the portable
// fallbacks, which macOS and FreeBSD build on; the tests run each.
func platforms() map[string]platform {
	return map[string]platform{"linux": linuxSys{}, "posix": posixSys{}}
}
