//go:build !profile

package tune

// startProfiling does nothing outside builds with the profile tag.
func startProfiling() func() { return func() {} }
