// Package scenario is the chaos suite: its tests start nats-server and lease
// holders as real processes, inject faults, and check what they recorded
// (package check). See docs/reliability.md for the scenarios and results.
//
//	go test -race -short ./scenario                      # the short suite (make test)
//	go test -race -timeout 40m ./scenario -chaos.full \
//	    -chaos.report ../../docs/reliability.md          # everything (make chaos)
package scenario
