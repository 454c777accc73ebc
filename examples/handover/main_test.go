package main

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	if err := run(t.Context()); err != nil {
		t.Fatal(err)
	}
}
