package durable

// platforms are the platforms a macOS binary has; the tests run each.
func platforms() map[string]platform {
	return map[string]platform{"darwin": darwinSys{}, "posix": posixSys{}}
}
