//go:build unix

// Package demo holds what the examples' multi-process demos share: child
// processes that are always cleaned up, a console with a live status line,
// and the coloured logger.
package demo
