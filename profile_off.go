//go:build !profile

package main

// startProfiling does nothing outside builds with the profile tag.
func startProfiling() func() { return func() {} }
