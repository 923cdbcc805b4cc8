package durable

// platforms are the platforms a FreeBSD binary has; the tests run each.
func platforms() map[string]platform {
	return map[string]platform{"posix": posixSys{}}
}
